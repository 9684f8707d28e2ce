#!/usr/bin/env bash
# Set up, then benchmark the bundled suite on whatever this machine has and write the report.
# Extra arguments go to `flopwatch run` (e.g. --budget 1, --profile on a GPU node).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RAY_USAGE_STATS_ENABLED=0
flopwatch run "$@"
