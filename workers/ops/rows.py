"""The contract every row-wise op of one tensor shares (softmax, gelu, silu, relu_squared,
log_softmax, sparsemax): X [M, N] in, Y [M, N] out, row-major, one dtype; memory-bound, so bytes = X read
once and Y written once, no FLOPs counted; standard normal inputs; a C entry point
`void f(const T* X, T* Y, int M, int N)`. Such an op module imports these and writes only what
it computes (its reference, its peer, tolerances, names). Not an op of its own (not in `OPS`).
"""

from __future__ import annotations

import ctypes

INPUTS = ("X",)
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(2 * itemsize * dims["M"] * dims["N"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal activations (both tails matter to GELU and silu), drawn on the
    generator's device."""
    import torch

    x = torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=generator.device)
    return {"X": x.to(dtype=dtype, device=device)}


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, Y, M, N)."""
    return [ctypes.c_void_p(inputs["X"].data_ptr()), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["X"], out)
