"""Find a HIP compiler and build its command lines.

Two kinds are supported: ROCm's own ``hipcc``/``amdclang++`` (a ROCm node), and Debian's
``clang++-19`` as a cross compiler for gfx942 on machines without ROCm (CI, developers),
which needs the device-library folder made by ``tools/install-hip-cross.sh``.

Debian's HIP headers are 5.2 (no ``hip_bf16.h``, ``hip_fp8.h``); kernels written against
ROCm 6 headers (HipKittens) build with the cross compiler when ``FLOPWATCH_HIP_INCLUDE``
names a folder of newer HIP headers (``<dir>/hip/hip_runtime.h``): it is searched before
``/usr/include`` (docs/amd.md says where such a folder comes from).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DEVLIB = Path.home() / ".cache" / "flopwatch" / "amdgcn-bitcode"
INSTALL_HINT = "run tools/install-hip-cross.sh (as root)"
MODES = ("shared-library", "code-object")


@dataclass(frozen=True)
class HipToolchain:
    """A usable HIP compiler."""

    kind: str  # "rocm" | "clang-cross"
    compiler: str
    version: str
    devlib_dir: str | None  # only for clang-cross: --rocm-device-lib-path
    can_link_host_library: bool
    rocm_path: str  # --rocm-path (headers, libamdhip64)
    # The folder holding hip/hip_runtime.h, when it is not ``rocm_path``/include (cross
    # toolchain with newer headers); searched first.
    hip_include: str | None = None

    def include_vars(self) -> dict[str, str]:
        """Values a manifest's ``include_dirs`` may name, under the variable names of ROCm
        Makefiles (``-I$(ROCM_INCLUDE_DIR) -I$(HIP_INCLUDE_DIR)``), for this node's headers."""
        root = self.hip_include or str(Path(self.rocm_path) / "include")
        return {"ROCM_INCLUDE_DIR": root, "HIP_INCLUDE_DIR": str(Path(root) / "hip")}


@dataclass(frozen=True)
class ToolchainMissing:
    """Why no HIP toolchain was found."""

    reason: str


@dataclass(frozen=True)
class CompileCommand:
    """argv plus the environment overrides it needs."""

    argv: tuple[str, ...]
    env: Mapping[str, str]


def _first_line(cmd: Sequence[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def _find_rocm(env: Mapping[str, str]) -> HipToolchain | None:
    root = Path(env.get("ROCM_PATH") or "/opt/rocm")
    for name in ("hipcc", "amdclang++"):
        path = root / "bin" / name
        if path.is_file() and os.access(path, os.X_OK):
            version = _first_line([str(path), "--version"])
            return HipToolchain("rocm", str(path), version, None, True, str(root))
    return None


def _find_clang_cross(env: Mapping[str, str]) -> HipToolchain | ToolchainMissing:
    clang = shutil.which("clang++-19")
    if clang is None:
        return ToolchainMissing(f"no ROCm and no clang++-19 on PATH: {INSTALL_HINT}")
    devlib = Path(env.get("FLOPWATCH_HIP_DEVLIB") or DEFAULT_DEVLIB)
    # Debian's rocm-device-libs lacks the gfx942 ISA-version bitcode; without it clang fails
    # with a confusing "cannot find ROCm device library" message, so say what fixes it.
    if not (devlib / "oclc_isa_version_942.bc").is_file():
        return ToolchainMissing(
            f"clang++-19 found but {devlib}/oclc_isa_version_942.bc is missing: {INSTALL_HINT}")
    has_runtime = Path("/usr/include/hip/hip_runtime.h").is_file()
    version = _first_line([clang, "--version"])
    headers = env.get("FLOPWATCH_HIP_INCLUDE")
    if headers:
        header = Path(headers) / "hip" / "hip_runtime.h"
        if not header.is_file():
            return ToolchainMissing(f"FLOPWATCH_HIP_INCLUDE={headers} has no hip/hip_runtime.h")
        # The header version enters the toolchain ident, so changing headers rebuilds.
        version += f"; HIP headers {_hip_header_version(Path(headers))} from {headers}"
    return HipToolchain("clang-cross", clang, version, str(devlib), has_runtime, "/usr", headers or None)


def _hip_header_version(include: Path) -> str:
    """'6.2' from hip/hip_version.h, or 'unknown' (pure file read)."""
    try:
        text = (include / "hip" / "hip_version.h").read_text()
    except OSError:
        return "unknown"
    found = dict(re.findall(r"#define\s+HIP_VERSION_(MAJOR|MINOR)\s+(\d+)", text))
    return f"{found['MAJOR']}.{found['MINOR']}" if len(found) == 2 else "unknown"


def find_hip_toolchain(env: Mapping[str, str] | None = None) -> HipToolchain | ToolchainMissing:
    """Return ROCm's compiler if installed, else the clang-19 cross toolchain, else the reason
    neither is usable."""
    env = os.environ if env is None else env
    return _find_rocm(env) or _find_clang_cross(env)


def code_object_path(output: str, arch: str) -> str:
    """Path of one arch's code object: ``{arch}`` in ``output`` is replaced, otherwise the arch
    is appended to the stem (``gemm.hsaco`` -> ``gemm-gfx942.hsaco``) (pure)."""
    if "{arch}" in output:
        return output.replace("{arch}", arch)
    base, dot, ext = output.rpartition(".")
    return f"{base}-{arch}.{ext}" if dot and "/" not in ext else f"{output}-{arch}"


def hip_compile_command(toolchain: HipToolchain, sources: Sequence[str],
                        include_dirs: Sequence[str], flags: Sequence[str],
                        arches: Sequence[str], output: str, mode: str) -> list[CompileCommand]:
    """Build the compiler command lines (pure).

    "shared-library": one command producing a host library (the C launchers plus a fat binary
    with every arch), linked against libamdhip64.
    "code-object": one command per arch, each writing a bare .hsaco to
    ``code_object_path(output, arch)``; clang refuses ``-o`` with several device outputs, so
    arches are compiled separately.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if not arches:
        raise ValueError("at least one --offload-arch is needed")
    # hipcc picks the NVIDIA platform whenever nvcc is on PATH unless told otherwise.
    env = {"HIP_PLATFORM": "amd"} if toolchain.kind == "rocm" else {}
    if mode == "shared-library":
        argv = _common_argv(toolchain, include_dirs, flags, arches)
        argv += ["-shared", "-fPIC", "-o", output, *sources, "-lamdhip64"]
        return [CompileCommand(tuple(argv), env)]
    commands = []
    for arch in arches:
        argv = _common_argv(toolchain, include_dirs, flags, [arch])
        argv += ["--cuda-device-only", "--no-gpu-bundle-output",
                 "-o", code_object_path(output, arch), *sources]
        commands.append(CompileCommand(tuple(argv), env))
    return commands


def _common_argv(toolchain: HipToolchain, include_dirs: Sequence[str], flags: Sequence[str],
                 arches: Sequence[str]) -> list[str]:
    argv: list[str] = [toolchain.compiler, "-x", "hip"]
    argv += [f"--offload-arch={arch}" for arch in arches]
    if toolchain.kind == "clang-cross":
        argv += [f"--rocm-path={toolchain.rocm_path}",
                 f"--rocm-device-lib-path={toolchain.devlib_dir}"]
        # hipcc compiles at -O3 unless told otherwise and Makefiles rely on it; clang's
        # default is -O0, at which HipKittens' inline-asm immediates do not even compile.
        if not any(f.startswith("-O") for f in flags):
            argv.append("-O3")
    if toolchain.hip_include:
        argv += [f"-I{toolchain.hip_include}"]
    argv += list(flags)
    argv += [f"-I{d}" for d in include_dirs]
    # Resource-usage remarks are the cheapest complete per-kernel register/LDS report.
    argv.append("-Rpass-analysis=kernel-resource-usage")
    return argv
