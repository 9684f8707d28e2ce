"""What fixes a failed build, said as the manifest line to write (pure functions over the log).

The two failures a kernel written for a runtime compiler (hiprtc, NVRTC) or for another
project's build meets first are a missing header and an undeclared built-in. The compiler's
own words ("'hip_fp16.h' file not found", "use of undeclared identifier 'blockIdx'") do not
say what to change in flopwatch's files; the hint does.

A build can also fail because the kernel, as written for this point, does not fit the device
(`resource_limit`): that is no mistake to fix but a configuration to leave out, as an autotuner
prunes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

# Built-ins the HIP runtime header declares (clang: "use of undeclared identifier 'X'" /
# "unknown type name 'X'"); the CUDA ones nvcc always knows unless it compiles host C++.
_GPU_BUILTINS = ("threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "__syncthreads", "__shfl",
                 "__shfl_xor", "__shfl_down", "__shfl_sync", "__shfl_xor_sync", "__syncwarp", "atomicAdd",
                 "__expf", "__logf", "__fdividef", "__ldg", "__launch_bounds__", "hipLaunchKernelGGL",
                 "__half", "__half2", "half", "half2", "__float2half", "__half2float", "__hip_bfloat16",
                 "hip_bfloat16", "__nv_bfloat16", "hipStream_t", "cudaStream_t", "dim3")
_UNDECLARED = re.compile(r"(?:use of undeclared identifier|unknown type name|identifier) ['\"](\w+)['\"]"
                         r"(?: is undefined)?|error: '(\w+)' was not declared in this scope")
_MISSING_HEADER = re.compile(r"['\"<]([\w./+-]+\.(?:h|hpp|cuh|hh|inc))['\">] file not found"
                             r"|fatal error: ([\w./+-]+\.(?:h|hpp|cuh|hh|inc)): No such file or directory"
                             r"|cannot open source file ['\"]([\w./+-]+)['\"]")
_ROCM6_HEADERS = ("hip_bf16.h", "hip_fp8.h", "amd_hip_bf16.h")
_CUDA_LIBRARIES = (("cublas", "cuBLAS"), ("cublasLt", "cuBLASLt"), ("cufft", "cuFFT"), ("curand", "cuRAND"),
                   ("cusparse", "cuSPARSE"), ("cusolver", "cuSOLVER"), ("cudnn", "cuDNN"), ("nccl", "NCCL"))
# A compiler's error diagnostic (`error:`, `ptxas error   :`, cicc's `Error:`, `fatal error:`); not
# the closing count ("2 errors generated", "1 error detected in the compilation").
_ERROR_DIAGNOSTIC = re.compile(r"\b(?:fatal )?error\s*:", re.IGNORECASE)
# A device resource the kernel exceeds, in the compilers' own words (tests/fixtures/compiler_limits):
# ptxas' "uses too much shared data (0x44000 bytes, 0x38c00 max)" (and local data); the AMDGPU
# back end's "local memory (69632) exceeds limit (65536)", "addressable scalar registers (106)
# exceeds limit (102)", "stack frame size (N) exceeds limit (M)"; cicc's kernel parameter space.
_RESOURCE_LIMIT = re.compile(r"uses too much (?:shared|local) data \(0x[0-9a-f]+ bytes, 0x[0-9a-f]+ max\)"
                             r"|\(\d+\) exceeds limit \(\d+\)|Formal parameter space overflowed", re.IGNORECASE)
_CUDA_HEADERS = ("cuda_fp16.h", "cuda_bf16.h", "cuda_runtime.h", "mma.h", "cuda_fp8.h", "cooperative_groups.h")


def hints(log: str, backend: str, binding: str, include_vars: Mapping[str, str] | None = None) -> list[str]:
    """Hints for a failed build of a `backend` variant with a `binding` kind; `include_vars`
    are the toolchain's folder variables (`HIP_INCLUDE_DIR`, ...) as the build node has them."""
    include_vars = include_vars or {}
    found: list[str] = []
    undeclared = {a or b for a, b in _UNDECLARED.findall(log)} & set(_GPU_BUILTINS)
    if undeclared:
        names = ", ".join(sorted(undeclared)[:4])
        found.append(_builtin_hint(names, backend, binding))
    for groups in _MISSING_HEADER.findall(log):
        header = next(g for g in groups if g)
        hint = _header_hint(header, backend, include_vars)
        if hint not in found:
            found.append(hint)
    return found


def resource_limit(log: str) -> str:
    """The compiler's lines saying the kernel exceeds a device limit (shared memory, LDS,
    registers, stack, parameter space), one per distinct message, when every error of the
    log is such a line; "" otherwise: a build that also has a real compile error is broken,
    not too large, and must still fail."""
    errors = [line.strip() for line in log.splitlines() if _ERROR_DIAGNOSTIC.search(line)]
    if not errors or not all(_RESOURCE_LIMIT.search(line) for line in errors):
        return ""
    return "\n".join(dict.fromkeys(errors))


def with_hints(errors: str, log: str, backend: str, binding: str, include_vars: Mapping[str, str] | None = None) -> str:
    """`errors` (the first compiler errors) followed by one `hint:` line per fix found."""
    extra = hints(log, backend, binding, include_vars)
    return errors + "".join(f"\nhint: {h}" for h in extra)


def _builtin_hint(names: str, backend: str, binding: str) -> str:
    if backend == "hip":
        return (f"{names}: declared by HIP's runtime header, which this source does not include (hiprtc "
                f"includes it implicitly; flopwatch does so for binding.kind = \"raw\"): add "
                f"`#include <hip/hip_runtime.h>` (and <hip/hip_fp16.h> for half types) to the source, or in "
                f"variant.toml: [build] flags = [\"-include\", \"hip/hip_runtime.h\"]")
    if backend == "cuda":
        if names.split(", ")[0] in ("__half", "__half2", "half", "half2", "__float2half", "__half2float"):
            return (f"{names}: from cuda_fp16.h, which this source does not include: in variant.toml "
                    f"[build] flags = [\"-include\", \"cuda_fp16.h\"]")
        return (f"{names}: CUDA built-ins, undefined because nvcc compiled this file as host C++ (a .cpp, "
                f".h or .cuh source): in variant.toml [build] flags = [\"-x\", \"cu\"], or use binding.kind = \"raw\"")
    return (f"{names}: GPU built-ins, so this is device code, so backend = \"cuda\" or \"hip\" in variant.toml, "
            f"not {backend!r}")


def _header_hint(header: str, backend: str, include_vars: Mapping[str, str]) -> str:
    name = Path(header).name
    if backend == "hip" and name in _ROCM6_HEADERS:
        return (f"{header} comes with ROCm 6; the clang-19 cross toolchain has Debian's HIP 5.2 headers. Set "
                f"FLOPWATCH_HIP_INCLUDE to a folder of ROCm 6 HIP headers (docs/amd.md, 'HipKittens without ROCm')")
    for var in ("HIP_INCLUDE_DIR", "ROCM_INCLUDE_DIR"):
        folder = include_vars.get(var)
        if backend == "hip" and folder and (Path(folder) / header).is_file():
            return (f"{header} is in HIP's include folder ({var}): in variant.toml "
                    f"[build] include_dirs = [\"${{{var}}}\"]")
    if backend == "cuda" and name in _CUDA_HEADERS:
        return f"{header} is a CUDA toolkit header: nvcc finds it; check that backend = \"cuda\""
    library = next((lib for prefix, lib in _CUDA_LIBRARIES if name.startswith(prefix)), None)
    if library:
        return (f"{header} belongs to {library}, whose development headers this build node's CUDA toolkit lacks "
                f"(a kernel file may include it without calling it): install them on the node (a full CUDA "
                f"toolkit has them), or build this variant where they are")
    return (f"{header} is not in the variant folder: a header of this repository goes in a shared folder listed "
            f"in flopwatch.toml (include_dirs = [\"path/to/headers\"]); one of another checkout on the build node "
            f"in variant.toml [build] include_dirs = [\"${{SOMETHING_ROOT}}/include\"] with SOMETHING_ROOT set there")
