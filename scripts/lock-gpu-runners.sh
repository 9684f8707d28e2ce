#!/usr/bin/env bash
# Pin what the GPU runners' workflows install, with hashes: requirements/gpu-runners.in compiled
# into requirements/gpu-runners.txt by pip-compile (pip-tools), against PyPI only, for CPython 3.11
# on x86_64 Linux (the interpreter that runs it; docs/ci.md, "Python dependencies: pinned with
# hashes"). Each pinned release gets the hashes of all its files on PyPI, every wheel and the sdist.
# Dependabot (pip) refreshes the same file; run this after editing the .in file.
#   PYTHON=python3.11 bash scripts/lock-gpu-runners.sh [pip-compile options, e.g. --upgrade]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
venv="$(mktemp -d)/lock"
trap 'rm -rf "$(dirname "$venv")"' EXIT
# A machine's own pip settings (a local wheel folder, an extra index, a constraints file) must not
# reach the lock: its hashes are PyPI's files, which the runners download.
export PIP_CONFIG_FILE=/dev/null
unset PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_INDEX_URL PIP_CONSTRAINT
"$PYTHON" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --index-url https://pypi.org/simple "pip-tools>=7.4"
# Run from requirements/ so that the header names the files as Dependabot finds them.
cd requirements
"$venv/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
  --index-url https://pypi.org/simple --output-file gpu-runners.txt "$@" gpu-runners.in
