"""Build a torch extension module (pybind11) from a .cu file with nvcc directly, the way
ThunderKittens-style kernels are used: ``import tk_kernel; tk_kernel.dispatch_micro(A, B, C)``.

``torch_build_info`` asks the installed torch for its paths (an edge); ``pybind_command`` is pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workers.cuda.toolchain import gencode_flags


@dataclass(frozen=True)
class TorchBuildInfo:
    """What compiling against the installed torch needs. ``cuda`` is torch's CUDA version or None
    for a CPU build, whose headers lack c10/cuda's generated config: no CUDA extension compiles."""

    include_dirs: tuple[str, ...]
    library_dir: str
    python_include: str
    extension_suffix: str
    cxx11_abi: bool
    cuda: str | None


def torch_build_info() -> TorchBuildInfo:
    """Query torch and Python for include and library paths."""
    import sysconfig

    import torch
    from torch.utils import cpp_extension

    return TorchBuildInfo(
        include_dirs=tuple(cpp_extension.include_paths()),
        library_dir=cpp_extension.library_paths()[0],
        python_include=sysconfig.get_paths()["include"],
        extension_suffix=sysconfig.get_config_var("EXT_SUFFIX"),
        cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        cuda=torch.version.cuda,
    )


def output_name(module: str, info: TorchBuildInfo) -> str:
    """File name Python imports ``module`` from, e.g. 'tk_kernel.cpython-312-x86_64-linux-gnu.so'."""
    return module + info.extension_suffix


def pybind_command(nvcc: str, sources: Sequence[str], module: str, arches: Sequence[str],
                   info: TorchBuildInfo, output: str, flags: Sequence[str] = ()) -> list[str]:
    """nvcc command for a torch extension named ``module``.

    TORCH_EXTENSION_NAME names the PYBIND11_MODULE; the ABI flag must match torch's or the module
    fails to import with undefined std::string symbols; the rpath lets the module find libc10 &co
    even when torch was not imported first."""
    cmd = [nvcc, *flags, "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "--resource-usage",
           *gencode_flags(arches),
           f"-DTORCH_EXTENSION_NAME={module}", "-DTORCH_API_INCLUDE_EXTENSION_H",
           f"-D_GLIBCXX_USE_CXX11_ABI={int(info.cxx11_abi)}"]
    cmd += [f"-I{d}" for d in (*info.include_dirs, info.python_include)]
    cmd += [f"-L{info.library_dir}", f"-Xlinker=-rpath,{info.library_dir}",
            "-lc10", "-lc10_cuda", "-ltorch", "-ltorch_cpu", "-ltorch_cuda", "-ltorch_python"]
    return cmd + ["-o", output, *sources]
