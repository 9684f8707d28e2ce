"""silu: Y = silu(X) = X · sigmoid(X) elementwise (swish), the activation of Llama-style MLPs
without their gate product (`torch.nn.functional.silu`; the activation inside Liger-Kernel's
SwiGLU kernel).

X and Y are [M, N] row-major in one dtype. Memory-bound: bytes = X read once, Y written once; no
FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X",)
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)
# sigmoid is computed in fp32 by every kernel and by torch; fp16/bf16 outputs round once.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = "torch.nn.functional.silu"
ENTRY_NAMES = ("silu", "swish")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(2 * itemsize * dims["M"] * dims["N"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal activations, drawn on the generator's device."""
    import torch

    x = torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=generator.device)
    return {"X": x.to(dtype=dtype, device=device)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x = inputs["X"].double()
    return x * torch.sigmoid(x)


def peer_returns(inputs: dict, layout: str):
    """torch's silu, returning Y."""
    import torch.nn.functional as F

    x = inputs["X"]
    return F.silu(x)


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, Y, M, N)."""
    return [ctypes.c_void_p(inputs["X"].data_ptr()), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["X"], out)
