"""swiglu: Y = silu(A) · B elementwise, the gated activation of Llama-style MLPs (Liger-Kernel's
`liger_swiglu`, LlamaMLP's `act_fn(gate_proj(x)) * up_proj(x)`).

A, B and Y are [M, N] row-major in one dtype. Memory-bound: bytes = A and B read once, Y
written once; no FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("A", "B")
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)
# silu is computed in fp32 by Liger and by torch; fp16/bf16 kernels round silu(A) and the
# product once each.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = "torch.nn.functional.silu(A) * B"
ENTRY_NAMES = ("swiglu", "silu_mul", "silu_and_mul", "swiglu_fg")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(3 * itemsize * dims["M"] * dims["N"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    import torch

    shape = output_shape(dims)
    return {name: torch.randn(shape, generator=generator, dtype=torch.float32, device=generator.device)
            .to(dtype=dtype, device=device) for name in INPUTS}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    a, b = inputs["A"].double(), inputs["B"].double()
    return a * torch.sigmoid(a) * b


def peer_returns(inputs: dict, layout: str):
    """torch eager, as a Llama MLP computes it: silu, then the product (two kernels)."""
    import torch.nn.functional as F

    return F.silu(inputs["A"]) * inputs["B"]


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (A, B, Y, M, N)."""
    return [ctypes.c_void_p(inputs["A"].data_ptr()), ctypes.c_void_p(inputs["B"].data_ptr()),
            ctypes.c_void_p(out.data_ptr()), ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["A"], inputs["B"], out)
