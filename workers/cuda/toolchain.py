"""Find the CUDA tools on this node and build nvcc command lines.

Discovery (``find_*``, ``nvcc_version``) touches the filesystem and runs subprocesses; the command
builders are pure so that tests can compare them as strings."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MODES = ("shared-library", "fatbin", "cubin")


@dataclass(frozen=True)
class CudaTools:
    """Paths of the CUDA tools found on a node; ``None`` where a tool is missing."""

    nvcc: str | None
    nvcc_version: str | None
    cuobjdump: str | None
    nvdisasm: str | None
    ncu: str | None
    demangler: str | None


def _which(name: str, extra_dirs: Sequence[Path] = ()) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for directory in extra_dirs:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _cuda_home_bins(env: Mapping[str, str]) -> list[Path]:
    homes = [env.get("CUDA_HOME"), env.get("CUDA_PATH"), "/usr/local/cuda"]
    return [Path(h) / "bin" for h in homes if h]


def wheel_bin_dirs(site_dirs: Sequence[str] | None = None) -> list[Path]:
    """The ``bin`` folders of NVIDIA's pip wheels. CUDA 13 wheels (nvidia-cuda-cuobjdump 13.x,
    nvidia-cuda-nvdisasm 13.x) install into ``site-packages/nvidia/cu13/bin``; CUDA 12 wheels
    used one folder per component, e.g. ``nvidia/cuda_cuobjdump/bin``."""
    if site_dirs is None:
        site_dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    found: list[Path] = []
    for site in dict.fromkeys(site_dirs):
        root = Path(site) / "nvidia"
        if root.is_dir():
            found.extend(sorted(p for p in root.glob("*/bin") if p.is_dir()))
    return found


def find_nvcc(env: Mapping[str, str] = os.environ) -> str | None:
    """nvcc from ``$CUDA_HOME/bin`` first (the toolkit the user chose), then PATH."""
    for home in (env.get("CUDA_HOME"), env.get("CUDA_PATH")):
        candidate = Path(home or "/nonexistent") / "bin" / "nvcc"
        if home and candidate.is_file():
            return str(candidate)
    return _which("nvcc", [Path("/usr/local/cuda/bin")])


def find_cuobjdump(env: Mapping[str, str] = os.environ) -> str | None:
    """cuobjdump from PATH, the CUDA home, or the nvidia-cuda-cuobjdump wheel."""
    return _which("cuobjdump", _cuda_home_bins(env) + wheel_bin_dirs())


def find_nvdisasm(env: Mapping[str, str] = os.environ) -> str | None:
    """nvdisasm from PATH, the CUDA home, or the nvidia-cuda-nvdisasm wheel."""
    return _which("nvdisasm", _cuda_home_bins(env) + wheel_bin_dirs())


def find_ncu(env: Mapping[str, str] = os.environ) -> str | None:
    """ncu from PATH, the CUDA home, or a standalone Nsight Compute install under /opt/nvidia."""
    standalone = sorted(Path("/opt/nvidia").glob("nsight-compute/*"), reverse=True)
    return _which("ncu", _cuda_home_bins(env) + standalone)


def find_demangler() -> str | None:
    """cu++filt (CUDA's demangler) or binutils' c++filt: CUDA kernels use the Itanium ABI, so
    either gives the same names for ordinary kernels."""
    return _which("cu++filt", _cuda_home_bins(os.environ)) or shutil.which("c++filt")


def parse_nvcc_version(text: str) -> str | None:
    """'13.0.88' from ``nvcc --version`` output ('... release 13.0, V13.0.88')."""
    match = re.search(r"release \S+, V(\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None


def nvcc_version(nvcc: str) -> str | None:
    """Run ``nvcc --version`` and return its version string."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=False)
    return parse_nvcc_version(out.stdout)


def find_tools(env: Mapping[str, str] = os.environ) -> CudaTools:
    """Everything this backend may use, found once per node."""
    nvcc = find_nvcc(env)
    return CudaTools(
        nvcc=nvcc,
        nvcc_version=nvcc_version(nvcc) if nvcc else None,
        cuobjdump=find_cuobjdump(env),
        nvdisasm=find_nvdisasm(env),
        ncu=find_ncu(env),
        demangler=find_demangler(),
    )


def gencode_flags(arches: Sequence[str]) -> list[str]:
    """``-gencode arch=compute_XX,code=sm_XX`` per arch. The virtual arch keeps the suffix
    ('sm_90a' -> 'compute_90a'): wgmma and setmaxnreg exist only in the 'a' feature set."""
    flags: list[str] = []
    for arch in arches:
        if not re.fullmatch(r"sm_\d+[af]?", arch):
            raise ValueError(f"not an NVIDIA arch: {arch!r} (expected e.g. 'sm_90a')")
        flags += ["-gencode", f"arch=compute_{arch[3:]},code={arch}"]
    return flags


def nvcc_command(
    nvcc: str,
    sources: Sequence[str],
    include_dirs: Sequence[str],
    flags: Sequence[str],
    arches: Sequence[str],
    output: str,
    mode: str = "shared-library",
) -> list[str]:
    """The nvcc command line for one variant.

    ``shared-library``: a host library with the variant's ``extern "C"`` launcher, loaded with
    ctypes. ``fatbin``: device code only, loaded at run time with the driver API (raw binding);
    it may hold several arches. ``cubin``: the same for exactly one arch.
    ``--resource-usage`` is always on: its ptxas lines are parsed by ``resource_usage``."""
    if mode not in MODES:
        raise ValueError(f"unknown build mode {mode!r}; expected one of {MODES}")
    if mode == "cubin" and len(arches) != 1:
        raise ValueError("a cubin holds exactly one arch; use mode 'fatbin' for several")
    cmd = [nvcc, *flags]
    if mode == "shared-library":
        cmd += ["-shared", "-Xcompiler", "-fPIC"]
    else:
        cmd.append(f"-{mode}")
    cmd.append("--resource-usage")
    cmd += gencode_flags(arches)
    cmd += [f"-I{d}" for d in include_dirs]
    cmd += ["-o", output, *sources]
    return cmd
