"""Launch a bare ``__global__`` kernel from a gfx code object with HIP's module API
(hipModuleLoadData / hipModuleGetFunction / hipModuleLaunchKernel), through ctypes on the
libamdhip64 that ROCm's torch already loaded, on torch's current stream. The AMD counterpart
of ``workers.cuda.raw_launch``; no extra Python package is needed on a ROCm node."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class HipError(RuntimeError):
    """A HIP call that did not return hipSuccess."""


def _lib() -> ctypes.CDLL:
    lib = ctypes.CDLL("libamdhip64.so")
    lib.hipGetErrorString.restype = ctypes.c_char_p
    return lib


def _check(lib: ctypes.CDLL, code: int, what: str) -> None:
    if code != 0:
        raise HipError(f"{what}: {lib.hipGetErrorString(code).decode()} ({code})")


@dataclass(frozen=True)
class RawKernel:
    module: ctypes.c_void_p
    function: ctypes.c_void_p
    entry: str


def load(image: bytes, entry: str) -> RawKernel:
    """Load a code object into torch's HIP context and look up ``entry`` (an extern "C" name)."""
    import torch

    torch.empty(1, device="cuda")  # make torch create the device's context first
    lib = _lib()
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    buffer = ctypes.create_string_buffer(image, len(image))
    _check(lib, lib.hipModuleLoadData(ctypes.byref(module), buffer), "hipModuleLoadData")
    _check(lib, lib.hipModuleGetFunction(ctypes.byref(function), module, entry.encode()), f"hipModuleGetFunction {entry}")
    return RawKernel(module, function, entry)


def kernel_params(values: Sequence[Any]) -> tuple[list, ctypes.Array]:
    """The ``void** kernelParams`` array: one pointer per argument to its value (tensors as
    device addresses, ints as 32-bit int, floats as float). The value objects are returned too
    and must outlive the launch call."""
    holders: list = []
    for value in values:
        if hasattr(value, "data_ptr"):
            holders.append(ctypes.c_void_p(value.data_ptr()))
        elif isinstance(value, int):
            holders.append(ctypes.c_int(value))
        elif isinstance(value, float):
            holders.append(ctypes.c_float(value))
        else:
            raise TypeError(f"cannot pass {type(value).__name__} to a raw kernel")
    array = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
    return holders, array


def launch(kernel: RawKernel, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
           shared_bytes: int = 0) -> None:
    import torch

    lib = _lib()
    holders, params = kernel_params(args)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    _check(lib, lib.hipModuleLaunchKernel(kernel.function, *(ctypes.c_uint(x) for x in grid),
                                          *(ctypes.c_uint(x) for x in block), ctypes.c_uint(shared_bytes),
                                          stream, params, None), "hipModuleLaunchKernel")
    del holders
