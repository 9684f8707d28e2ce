"""Build a HIP pybind11 module the way HipKittens' Makefiles do
(``hipcc kernel.cpp --offload-arch=gfx942 $(python3 -m pybind11 --includes) -shared -fPIC
-o tk_kernel$(python3-config --extension-suffix)``), so that
``import tk_kernel; tk_kernel.dispatch_micro(A, B, C)`` works on the node.

A module has two halves with different needs. The device code needs only the HIP compiler
(and, because clang parses the whole file, the headers the file includes: pybind11's and
Python's); it is built and analysed on every node. The host module additionally links the
node's HIP runtime, and, when the source uses torch's C++ API, a ROCm build of torch: only a
ROCm node can produce a module that imports where it runs. ``host_build_info`` asks Python and
torch for their paths (an edge); the rest is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .toolchain import CompileCommand, HipToolchain, hip_compile_command


@dataclass(frozen=True)
class HostBuildInfo:
    """What compiling a Python extension needs on this node; None where it is missing."""

    python_include: str | None  # the folder holding Python.h
    pybind11_include: str | None
    extension_suffix: str  # ".cpython-311-x86_64-linux-gnu.so"
    torch_hip: str | None = None  # torch.version.hip of a ROCm build of torch
    torch_include_dirs: tuple[str, ...] = ()
    torch_library_dir: str | None = None
    cxx11_abi: bool = True


def host_build_info() -> HostBuildInfo:
    """Query Python, pybind11 and (if importable) torch."""
    import sysconfig

    py_inc = sysconfig.get_paths().get("include")
    try:
        import pybind11

        pb_inc = pybind11.get_include()
    except ImportError:
        pb_inc = None
    info = {"python_include": py_inc if py_inc and Path(py_inc, "Python.h").is_file() else None,
            "pybind11_include": pb_inc if pb_inc and Path(pb_inc, "pybind11", "pybind11.h").is_file() else None,
            "extension_suffix": sysconfig.get_config_var("EXT_SUFFIX") or ".so"}
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        return HostBuildInfo(**info)
    hip = getattr(torch.version, "hip", None)
    if not hip:
        return HostBuildInfo(**info, cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    return HostBuildInfo(**info, torch_hip=hip, torch_include_dirs=tuple(cpp_extension.include_paths()),
                         torch_library_dir=cpp_extension.library_paths()[0],
                         cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI))


def header_dirs(info: HostBuildInfo) -> list[str]:
    """Include folders for both halves: pybind11, Python, and ROCm torch's where present (pure)."""
    dirs = [d for d in (info.pybind11_include, info.python_include) if d]
    return dirs + list(info.torch_include_dirs)


def missing_headers(info: HostBuildInfo) -> str:
    """Why the pybind11 headers cannot be compiled here, or "" (pure)."""
    missing = []
    if not info.pybind11_include:
        missing.append("pybind11's headers (pip install pybind11)")
    if not info.python_include:
        missing.append("Python's headers, Python.h (python3-dev)")
    return " and ".join(missing)


def missing_dependency(log: str, info: HostBuildInfo) -> str:
    """Why a failed compile is this node's lack rather than the source's fault, or "" (pure):
    the file includes pybind11's or Python's headers and they are missing here, or torch's C++
    API and this node's torch is not a ROCm build."""
    if "file not found" not in log:
        return ""
    missing = missing_headers(info)
    if missing and any(h in log for h in ("Python.h", "pybind11/")):
        return f"this build node lacks {missing}, which the module's source includes"
    if not info.torch_hip and any(h in log for h in ("'torch/", "'ATen/", "'c10/")):
        return ("the module's source includes torch's C++ headers: it builds on a node with a ROCm "
                "build of torch")
    return ""


def host_module_blocker(tc: HipToolchain, info: HostBuildInfo) -> str:
    """Why this node cannot produce a host module that imports on a ROCm node, or "" (pure).

    The clang-19 cross toolchain links Debian's HIP 5.2 runtime (libamdhip64.so.5), which no
    ROCm 6 node has; such a module would fail to import where it is run."""
    if tc.kind != "rocm":
        return ("the pybind11 host module is linked on a ROCm node (hipcc, the node's HIP runtime); "
                "this node has the clang-19 cross toolchain: device code built and analysed, "
                "host code compiled but not linked")
    return missing_headers(info)


def output_name(module: str, info: HostBuildInfo) -> str:
    """File name Python imports ``module`` from, e.g. 'tk_kernel.cpython-312-x86_64-linux-gnu.so'."""
    return module + info.extension_suffix


def module_flags(module: str, info: HostBuildInfo) -> list[str]:
    """Defines and libraries of a torch extension, when the node's torch is a ROCm build:
    TORCH_EXTENSION_NAME names the PYBIND11_MODULE, the ABI flag must match torch's (pure)."""
    flags = [f"-DTORCH_EXTENSION_NAME={module}"]
    if info.torch_hip and info.torch_library_dir:
        flags += ["-DTORCH_API_INCLUDE_EXTENSION_H", f"-D_GLIBCXX_USE_CXX11_ABI={int(info.cxx11_abi)}",
                  f"-L{info.torch_library_dir}", f"-Wl,-rpath,{info.torch_library_dir}",
                  "-lc10", "-lc10_hip", "-ltorch", "-ltorch_cpu", "-ltorch_hip", "-ltorch_python"]
    return flags


def host_command(tc: HipToolchain, sources: Sequence[str], include_dirs: Sequence[str],
                 flags: Sequence[str], arches: Sequence[str], module: str, info: HostBuildInfo,
                 output: str, link: bool) -> CompileCommand:
    """The whole module (host code plus a fat binary of every arch): linked into ``output`` on
    a ROCm node, or compiled to an object (``-c``) where it cannot be linked, which still
    checks the binding code (pure)."""
    includes = [*include_dirs, *header_dirs(info)]
    (cmd,) = hip_compile_command(tc, sources, includes, [*flags, *module_flags(module, info)], arches,
                                 output, "shared-library")
    if link:
        return cmd
    # Only the compile half of the shared-library line: the object is a check, never shipped.
    argv = [a for a in cmd.argv if a not in ("-shared", "-lamdhip64")]
    return CompileCommand((*argv[:1], "-c", *argv[1:]), cmd.env)


def capability(tc: HipToolchain | None, info: HostBuildInfo) -> tuple[bool, str, str]:
    """(usable, what this node does with a HIP pybind11 module, how to get more) for
    ``flopwatch doctor`` (pure)."""
    if tc is None:
        return False, "no HIP toolchain", "see build: hip"
    missing = missing_headers(info)
    if missing:
        return False, f"lacks {missing}", "pip install pybind11; apt-get install python3-dev (scripts/setup.sh)"
    newer = f"; HIP headers from {tc.hip_include}" if tc.hip_include else ""
    if tc.kind == "rocm":
        torch = f"ROCm torch {info.torch_hip}" if info.torch_hip else "no ROCm torch (torch/extension.h sources skip)"
        return True, f"device code analysed, host module linked; {torch}", ""
    hint = "" if tc.hip_include else "HipKittens needs ROCm 6 headers: FLOPWATCH_HIP_INCLUDE (docs/amd.md)"
    return True, "device code analysed, host code compiled (linked on ROCm nodes)" + newer, hint
