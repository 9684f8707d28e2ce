"""relu_squared: Y = relu(X)² elementwise, the activation of Primer and of nanoGPT-speedrun-style MLPs
(Liger-Kernel's `liger_relu_squared`).

X and Y are [M, N] row-major in one dtype. Memory-bound: bytes = X read once, Y written once; no
FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X",)
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)
# One product, rounded once to the output dtype (Liger squares in the input dtype; torch's
# square rounds once too).
TOLERANCE = {"fp32": (1e-6, 1e-5), "fp16": (2e-3, 1e-2), "bf16": (1e-2, 3e-2)}
PEER_NAME = "torch.square(torch.nn.functional.relu(X))"
ENTRY_NAMES = ("relu_squared", "relu_square", "squared_relu", "relu2", "relu_sq", "relusquared", "square_relu")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(2 * itemsize * dims["M"] * dims["N"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal activations (half of them clipped to zero), drawn on the generator's device."""
    import torch

    x = torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=generator.device)
    return {"X": x.to(dtype=dtype, device=device)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    x = inputs["X"].double()
    return x.clamp_min(0.0).pow(2)


def peer_returns(inputs: dict, layout: str):
    """torch eager, as Liger's test writes it: relu, then square (two kernels)."""
    import torch
    import torch.nn.functional as F

    x = inputs["X"]
    return torch.square(F.relu(x))


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, Y, M, N)."""
    return [ctypes.c_void_p(inputs["X"].data_ptr()), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["X"], out)
