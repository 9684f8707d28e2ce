"""The toolchains the CI machine is meant to have, and which of them are missing here.

On a developer's machine a test that needs the gfx942 cross toolchain or nvcc skips where the
tool is absent. On the CI machine that skip would hide every regression of the HIP and CUDA
builds (their static analysis: VGPRs, LDS, registers, spills) behind a failed install, so under
CI=true each toolchain named by FLOPWATCH_CI_TOOLCHAINS (comma-separated; default every one of
`TOOLCHAINS`: the project's CI machine, Debian with no GPU, has nvcc 13 at /usr/local/bin and
gets the cross toolchain from scripts/setup.sh) must be there: tests/conftest.py turns a skip
for a missing one into a failure naming it, tests/test_ci_toolchains.py fails once for each,
and scripts/setup.sh stops when the install of one fails. A CI machine that lacks one by design
says so with the variable (FLOPWATCH_CI_TOOLCHAINS=gfx942, or empty for none). Skips for a
missing GPU are not toolchain skips and stay skips.

Run as a script (`PYTHONPATH=. python3 tests/ci_toolchains.py`), it prints each missing one and
exits 1 when any is; scripts/setup.sh does that under CI=true.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping

VARIABLE = "FLOPWATCH_CI_TOOLCHAINS"
# name -> (words of a test's skip reason that mean it lacks this toolchain, how to get it)
TOOLCHAINS = {
    # the words of the tests' own skips, and of every reason the toolchain's finder gives
    # (`workers.rocm.toolchain.ToolchainMissing`: each names the install script or what it lacks)
    "gfx942": (re.compile(r"HIP toolchain|cross toolchain|clang-19|clang\+\+-19|clang with the AMDGPU target|gfx942|"
                          r"install-hip-cross|oclc_isa_version|hip_runtime\.h", re.I),
               "tools/install-hip-cross.sh, run by scripts/setup.sh as root"),
    "nvcc": (re.compile(r"\bnvcc\b", re.I), "the CUDA toolkit's nvcc on PATH or under CUDA_HOME"),
}


def required(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The toolchains this machine must have: none outside CI; under CI=true those named by
    FLOPWATCH_CI_TOOLCHAINS, every one of `TOOLCHAINS` where it is unset. ValueError for a name
    that is not a toolchain flopwatch tests."""
    env = os.environ if env is None else env
    if env.get("CI") != "true":
        return ()
    names = [n.strip() for n in env.get(VARIABLE, ",".join(TOOLCHAINS)).split(",") if n.strip()]
    unknown = [n for n in names if n not in TOOLCHAINS]
    if unknown:
        raise ValueError(f"{VARIABLE}={env[VARIABLE]!r}: {', '.join(unknown)} is not one of {', '.join(TOOLCHAINS)}")
    return tuple(names)


def _probe_gfx942() -> str | None:
    from workers.rocm.toolchain import HipToolchain, find_hip_toolchain

    found = find_hip_toolchain()
    return None if isinstance(found, HipToolchain) else getattr(found, "reason", str(found))


def _probe_nvcc() -> str | None:
    from workers.cuda.toolchain import find_nvcc

    return None if find_nvcc(os.environ) else "nvcc is not on PATH nor under CUDA_HOME"


PROBES: dict[str, Callable[[], str | None]] = {"gfx942": _probe_gfx942, "nvcc": _probe_nvcc}


def missing(names: tuple[str, ...], probes: Mapping[str, Callable[[], str | None]] = PROBES) -> dict[str, str]:
    """{name: why it is missing, and how to get it} for each of `names` this machine lacks."""
    out = {}
    for name in names:
        why = probes[name]()
        if why:
            out[name] = f"{why} (get it: {TOOLCHAINS[name][1]})"
    return out


def named_in(reason: str, lacking: Mapping[str, str]) -> str | None:
    """The missing toolchain a test's skip reason is about, if any of `lacking` is."""
    return next((name for name in lacking if TOOLCHAINS[name][0].search(reason or "")), None)


def main() -> int:
    lacking = missing(required())
    for name, why in lacking.items():
        print(f"CI=true and {VARIABLE} require {name}, which is missing: {why}", file=sys.stderr)
    return 1 if lacking else 0


if __name__ == "__main__":
    sys.exit(main())
