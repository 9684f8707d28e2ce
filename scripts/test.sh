#!/usr/bin/env bash
# Set up, then run the whole test suite (GPU tests skip themselves without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RAY_USAGE_STATS_ENABLED=0
# In parallel: FLOPWATCH_TEST_WORKERS pytest-xdist workers (default 4 on any machine: most tests
# wait on Ray, compilers and child processes rather than compute, so two cores carry four).
# Tests that share a Ray cluster, a module's fixture or a package's run go to one worker, in
# order (tests/xdist_groups.py). `./scripts/test.sh -n 0` (or `-p no:xdist`) runs serially.
python3 -m pytest -q -n "${FLOPWATCH_TEST_WORKERS:-4}" --dist loadgroup "$@"
