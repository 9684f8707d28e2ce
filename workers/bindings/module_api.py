"""Launch a bare ``__global__`` kernel from built device code, on torch's current stream, with
one code path for both vendors.

HIP's module API mirrors CUDA's driver API call for call, with the same argument lists:
``cuModuleLoadData``/``hipModuleLoadData``, ``cuModuleGetFunction``/``hipModuleGetFunction``,
``cuLaunchKernel``/``hipModuleLaunchKernel`` (grid, block, shared bytes, stream, a
``void** kernelParams`` array), ``cuModuleUnload``/``hipModuleUnload``. So the vendor is a row
of names (``VENDORS``) and the code that calls them, through ctypes on the vendor's library,
is the same: what is verified on an NVIDIA GPU is what runs on an AMD one. Torch (CUDA or
ROCm build) already loaded that library and made its context current; nothing else is needed
on the node, and nothing is compiled at run time.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ModuleApi:
    """One vendor's names for the same calls."""

    vendor: str
    libraries: tuple[str, ...]  # tried in order; torch's own lib folder is tried first
    load: str
    get_function: str
    launch: str
    unload: str
    error_name: str
    error_by_out_param: bool  # cuGetErrorName(code, &str) vs hipGetErrorName(code) -> str
    current_context: str | None  # the driver API needs a current context; HIP's runtime has one
    image_patterns: tuple[str, ...]  # artifact files holding device code; {arch} is the GPU's


VENDORS: dict[str, ModuleApi] = {
    "cuda": ModuleApi(
        vendor="cuda", libraries=("libcuda.so.1", "libcuda.so"),
        load="cuModuleLoadData", get_function="cuModuleGetFunction", launch="cuLaunchKernel",
        unload="cuModuleUnload", error_name="cuGetErrorName", error_by_out_param=True,
        current_context="cuCtxGetCurrent", image_patterns=("*.fatbin", "*.cubin")),
    "rocm": ModuleApi(
        vendor="rocm", libraries=("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6"),
        load="hipModuleLoadData", get_function="hipModuleGetFunction", launch="hipModuleLaunchKernel",
        unload="hipModuleUnload", error_name="hipGetErrorName", error_by_out_param=False,
        current_context=None, image_patterns=("*{arch}*.hsaco",)),
}


class ModuleError(RuntimeError):
    """A module-API call that did not return success (0 on both vendors)."""


@dataclass(frozen=True)
class RawKernel:
    """A loaded kernel; keep it (and so ``module``) alive while launches use it."""

    api: ModuleApi
    lib: Any
    module: ctypes.c_void_p
    function: ctypes.c_void_p
    entry: str


def images(api: ModuleApi, artifact: Path, arch: str = "") -> list[Path]:
    """The artifact's device-code files for this GPU, in a stable order (pure but for listing)."""
    found: list[Path] = []
    for pattern in api.image_patterns:
        found += sorted(artifact.glob(pattern.format(arch=arch)))
    return found


def kernel_params(values: Sequence[Any]) -> tuple[list, ctypes.Array]:
    """The ``void** kernelParams`` array: one pointer per argument to its value (tensors as
    device addresses, ints as 32-bit int — the ``int M, int N, int K`` of kernel signatures —
    floats as float). The value objects are returned too and must outlive the launch call."""
    holders: list = []
    for value in values:
        if hasattr(value, "data_ptr"):
            holders.append(ctypes.c_void_p(value.data_ptr()))
        elif isinstance(value, bool):
            raise TypeError("cannot pass bool to a raw kernel (say int or float)")
        elif isinstance(value, int):
            holders.append(ctypes.c_int(value))
        elif isinstance(value, float):
            holders.append(ctypes.c_float(value))
        else:
            raise TypeError(f"cannot pass {type(value).__name__} to a raw kernel")
    array = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
    return holders, array


def launch_argv(grid: Sequence[int], block: Sequence[int], shared_bytes: int, stream: int,
                params: ctypes.Array) -> list:
    """Arguments after the function handle, typed as both APIs declare them (pure)."""
    if len(grid) != 3 or len(block) != 3:
        raise ValueError(f"grid and block need 3 dimensions, got {list(grid)} and {list(block)}")
    return [*(ctypes.c_uint(int(x)) for x in grid), *(ctypes.c_uint(int(x)) for x in block),
            ctypes.c_uint(int(shared_bytes)), ctypes.c_void_p(stream), params, ctypes.c_void_p(None)]


def error_text(api: ModuleApi, lib, code: int) -> str:
    """The vendor's name for an error code."""
    fn = getattr(lib, api.error_name)
    if api.error_by_out_param:
        text = ctypes.c_char_p()
        fn(ctypes.c_int(code), ctypes.byref(text))
        name = text.value
    else:
        fn.restype = ctypes.c_char_p
        name = fn(ctypes.c_int(code))
    return name.decode() if name else f"error {code}"


def check(api: ModuleApi, lib, code: int, what: str) -> None:
    if code != 0:
        raise ModuleError(f"{what}: {error_text(api, lib, code)} ({code})")


def open_library(api: ModuleApi):
    """The vendor library torch already loaded (its own copy first: a ROCm wheel ships one)."""
    tried = []
    try:
        import torch

        torch_lib = Path(torch.__file__).parent / "lib"
        candidates = [str(torch_lib / name) for name in api.libraries if (torch_lib / name).exists()]
    except ImportError:
        candidates = []
    for name in [*candidates, *api.libraries]:
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            tried.append(f"{name}: {exc}")
    raise ModuleError(f"no {api.vendor} module-API library could be loaded: {'; '.join(tried)}")


def load(api: ModuleApi, image: bytes, entry: str) -> RawKernel:
    """Load device code into torch's context on the current device and look up ``entry``
    (an extern "C" name)."""
    import torch

    torch.empty(1, device="cuda")  # torch creates and makes current the device's context
    lib = open_library(api)
    if api.current_context:
        ctx = ctypes.c_void_p()
        check(api, lib, getattr(lib, api.current_context)(ctypes.byref(ctx)), api.current_context)
        if not ctx.value:
            raise ModuleError(f"no current {api.vendor} context on this thread")
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    buffer = ctypes.create_string_buffer(image, len(image))
    check(api, lib, getattr(lib, api.load)(ctypes.byref(module), buffer), api.load)
    check(api, lib, getattr(lib, api.get_function)(ctypes.byref(function), module, entry.encode()),
          f"{api.get_function} {entry}")
    return RawKernel(api, lib, module, function, entry)


def launch(kernel: RawKernel, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
           shared_bytes: int = 0) -> None:
    """Enqueue one launch on torch's current stream (asynchronous, like any kernel launch)."""
    import torch

    holders, params = kernel_params(args)
    argv = launch_argv(grid, block, shared_bytes, torch.cuda.current_stream().cuda_stream, params)
    check(kernel.api, kernel.lib, getattr(kernel.lib, kernel.api.launch)(kernel.function, *argv), kernel.api.launch)
    del holders  # the launch has copied the values


def unload(kernel: RawKernel) -> None:
    """Release the module (after the stream has finished using it)."""
    check(kernel.api, kernel.lib, getattr(kernel.lib, kernel.api.unload)(kernel.module), kernel.api.unload)
