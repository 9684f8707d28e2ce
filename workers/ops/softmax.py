"""softmax: Y[m, :] = softmax(X[m, :]) over the last dimension, the row-wise op of attention
and of classifier heads.

X and Y are [M, N] row-major in one dtype. It is memory-bound, so it is reported as
bandwidth, as Triton's fused-softmax tutorial does: bytes = X read once + Y written once,
and no FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X",)
OUTPUT = "Y"  # the output tensor's name in raw kernel argument lists
DIMS = ("M", "N")
LAYOUTS = ("rows",)
# exp is computed in fp32 by every kernel and by torch; fp16/bf16 outputs round once.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (2e-3, 1e-2), "bf16": (1e-2, 3e-2)}
PEER_NAME = "torch.softmax"
ENTRY_NAMES = ("softmax",)


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(2 * itemsize * dims["M"] * dims["N"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal logits: rows whose maximum matters (a kernel that skips the max
    subtraction overflows exp only for larger values, but loses precision here already)."""
    import torch

    x = torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=generator.device)
    return {"X": x.to(dtype=dtype, device=device)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    return torch.softmax(inputs["X"].double(), dim=-1)


def peer(inputs: dict, out, layout: str, alpha: float = 1.0, beta: float = 0.0) -> None:
    """torch's softmax kernel writing straight into `out` (`_softmax.out`): no extra copy,
    which would double the traffic of a memory-bound op."""
    import torch

    torch.ops.aten._softmax.out(inputs["X"], -1, False, out=out)


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, Y, M, N)."""
    return [ctypes.c_void_p(inputs["X"].data_ptr()), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["X"], out)
