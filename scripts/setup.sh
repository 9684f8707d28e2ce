#!/usr/bin/env bash
# Install what flopwatch needs on a fresh Debian-based machine (run as root for the apt part):
# the CPU build of torch, flopwatch itself with its test extras, PostgreSQL for the store tests, the gfx942 cross toolchain
# (clang-19 + HIP headers + device libraries), cuobjdump for SASS histograms, and Chromium for
# the browser test. GPU nodes install their own CUDA or ROCm torch first (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

# Under CI=true the toolchains the CI machine is meant to have (FLOPWATCH_CI_TOOLCHAINS, default
# "gfx942,nvcc"; tests/ci_toolchains.py, docs/verification.md) must be there: a failed install stops
# here, loudly, instead of leaving their tests to skip and the HIP and CUDA builds untested.
ci_requires() { [ "${CI:-}" = true ] && [[ ",${FLOPWATCH_CI_TOOLCHAINS-gfx942,nvcc}," == *",$1,"* ]]; }

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO="sudo"; fi
# A package apt must still install (the machine's index is refreshed only when one is missing:
# on a machine that has them all, setup touches neither the network nor the package lists).
missing() { ! dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
if { [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; } && command -v apt-get >/dev/null; then
  for pkg in binutils iproute2 postgresql chromium; do
    if missing "$pkg"; then $SUDO apt-get update -qq; break; fi
  done
  if missing binutils; then $SUDO apt-get install -y -qq --no-install-recommends binutils >/dev/null; fi
  # `ip netns` and veth links: the network tests put Ray nodes and the store on namespaces of their own.
  if missing iproute2; then
    $SUDO apt-get install -y -qq --no-install-recommends iproute2 >/dev/null \
      || echo "setup: iproute2 not installed; the network namespace tests will fail in CI and skip elsewhere" >&2
  fi
  # Python.h for pybind11 modules (HipKittens' tk_kernel), where python3 is Debian's own:
  # clang parses the module's host code even when it builds only the device code.
  if python3 -c 'import sys, sysconfig, os; sys.exit(not sysconfig.get_paths()["include"].startswith("/usr/"))' &&
     [ ! -f "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends python3-dev >/dev/null; } \
      || echo "setup: python3-dev not installed; pybind11 variants will be skipped" >&2
  fi
  # PostgreSQL server binaries: the store tests start a private server of their own (as the
  # `postgres` account when run as root) on a private port; they never use the package's own.
  if missing postgresql; then
    $SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null \
      || echo "setup: postgresql not installed; the PostgreSQL store tests will fail in CI and skip elsewhere" >&2
  fi
  # Optional extras: where a distribution lacks them, the tests that need them skip and say why.
  if missing chromium; then
    $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null \
      || echo "setup: Chromium not installed; the browser test will skip" >&2
  fi
  if ! $SUDO env FLOPWATCH_HIP_DEVLIB="${FLOPWATCH_HIP_DEVLIB:-$HOME/.cache/flopwatch/amdgcn-bitcode}" \
       bash tools/install-hip-cross.sh >/dev/null; then
    if ci_requires gfx942; then
      echo "setup: error: the gfx942 cross toolchain did not install (tools/install-hip-cross.sh above), and" \
           "CI=true requires it (FLOPWATCH_CI_TOOLCHAINS)" >&2
      exit 1
    fi
    echo "setup: gfx942 cross toolchain not installed; hip builds will be skipped" >&2
  fi
else
  if ci_requires gfx942; then
    echo "setup: error: no root or apt-get to install the gfx942 cross toolchain, and CI=true requires it" \
         "(FLOPWATCH_CI_TOOLCHAINS)" >&2
    exit 1
  fi
  echo "setup: no root or apt-get: skipping the gfx942 toolchain and Chromium (their tests skip)" >&2
fi

# The CPU build of torch first: a bare `torch` requirement (or flopwatch's own `torch>=2.4`)
# would pull a multi-GB CUDA build. PyTorch's CPU index first; where it cannot be reached, the
# plain package (on a machine that keeps the CPU wheel at hand, pip's find-links give it; elsewhere
# it may be PyPI's CUDA build). A torch already installed (a GPU node's own) is kept.
torch_line() {
  python3 -c 'import torch; v = torch.version
kind = f"CUDA {v.cuda}" if v.cuda else f"ROCm {v.hip}" if getattr(v, "hip", None) else "CPU"
print(f"setup: torch {torch.__version__} ({kind} build) at {torch.__path__[0]}")' >&2 2>/dev/null
}
if ! torch_line; then
  python3 -m pip install -q --retries 1 --timeout 20 --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0" \
    || python3 -m pip install -q "torch==2.13.0"
  torch_line
fi
# One resolver run for flopwatch and the CUDA binary tools. Without build isolation where the
# interpreter has setuptools already (pyproject's build backend: no fresh environment to make);
# with it where it has not.
extras=(-e ".[test]" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)
python3 -m pip install -q --no-build-isolation "${extras[@]}" 2>/dev/null || python3 -m pip install -q "${extras[@]}"
# Triton compiles for sm_90a and gfx942 without a GPU (its wheel ships ptxas and links AMD code
# objects itself): the `triton` back end builds and analyses Triton variants in CI. Pinned to
# the release the GPU nodes run, so the ahead-of-time code is the code that runs there.
python3 -c "import triton" 2>/dev/null || python3 -m pip install -q "triton==3.6.0"
# Under CI=true, every toolchain the CI machine is meant to have, found as the tests find it
# (nvcc is not installed here: the CI machine has it at /usr/local/bin).
if [ "${CI:-}" = true ]; then
  PYTHONPATH=. python3 tests/ci_toolchains.py || { echo "setup: error: a toolchain CI=true requires is missing" >&2; exit 1; }
fi
