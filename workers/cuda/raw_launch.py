"""Launch a bare ``__global__`` kernel from a fatbin/cubin with the CUDA driver API through
cuda-python (``cuda.bindings.driver``), on torch's current stream.

cuda-python is NVIDIA's own binding of the driver API, ships as a wheel next to the CUDA toolkit
wheels and needs no compiler at run time, so a raw variant is only device code: no host launcher
to build per variant."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class DriverError(RuntimeError):
    """A CUDA driver call that did not return CUDA_SUCCESS."""


def _check(result: tuple) -> Any:
    from cuda.bindings import driver

    err, *values = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, text = driver.cuGetErrorString(err)
        raise DriverError(f"{err.name}: {text.decode() if text else ''}")
    return values[0] if len(values) == 1 else tuple(values)


@dataclass(frozen=True)
class RawKernel:
    """A kernel function loaded from a device-code image; keep ``module`` alive while in use."""

    module: Any
    function: Any
    entry: str


def load(image: bytes, entry: str) -> RawKernel:
    """Load a fatbin/cubin into torch's CUDA context and look up ``entry`` (an extern "C" name)."""
    import torch
    from cuda.bindings import driver

    # torch creates the device's primary context lazily; the driver API needs it current here.
    torch.cuda.init()
    torch.empty(1, device="cuda")
    if int(_check(driver.cuCtxGetCurrent())) == 0:
        raise DriverError("no current CUDA context on this thread")
    module = _check(driver.cuModuleLoadData(image))
    function = _check(driver.cuModuleGetFunction(module, entry.encode()))
    return RawKernel(module, function, entry)


def kernel_args(values: Sequence[Any]) -> tuple[tuple, tuple]:
    """cuLaunchKernel's (values, ctypes types) pair: tensors pass their device address as a
    pointer, Python ints pass as 32-bit int (the ``int M, int N, int K`` of kernel signatures)."""
    args, types = [], []
    for value in values:
        if hasattr(value, "data_ptr"):
            args.append(value.data_ptr())
            types.append(ctypes.c_void_p)
        elif isinstance(value, int):
            args.append(value)
            types.append(ctypes.c_int)
        elif isinstance(value, float):
            args.append(value)
            types.append(ctypes.c_float)
        else:
            raise TypeError(f"cannot pass {type(value).__name__} to a raw kernel")
    return tuple(args), tuple(types)


def launch(kernel: RawKernel, grid: Sequence[int], block: Sequence[int], args: Sequence[Any],
           shared_bytes: int = 0) -> None:
    """Enqueue one launch on torch's current stream (asynchronous, like any kernel launch)."""
    import torch
    from cuda.bindings import driver

    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    _check(driver.cuLaunchKernel(kernel.function, *grid, *block, shared_bytes, stream,
                                 kernel_args(args), 0))


def unload(kernel: RawKernel) -> None:
    """Release the module (after the stream has finished using it)."""
    from cuda.bindings import driver

    _check(driver.cuModuleUnload(kernel.module))
