"""log_softmax: Y[m, :] = X[m, :] - log Σ exp(X[m, :]) over the last dimension, the log-probabilities of
classifier heads and losses (`torch.log_softmax`; a softmax variant).

X and Y are [M, N] row-major in one dtype. Memory-bound: bytes = X read once, Y written once; no
FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X",)
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)
# exp and log are computed in fp32 by every kernel and by torch; fp16/bf16 outputs round once
# (errors relative to max|Y|, which is about log N + 3).
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (2e-3, 1e-2), "bf16": (1e-2, 3e-2)}
PEER_NAME = "torch.log_softmax"
ENTRY_NAMES = ("log_softmax", "logsoftmax")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(2 * itemsize * dims["M"] * dims["N"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal logits, drawn on the generator's device."""
    import torch

    x = torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=generator.device)
    return {"X": x.to(dtype=dtype, device=device)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    x = inputs["X"].double()
    return x - x.exp().sum(dim=-1, keepdim=True).log()


def peer_returns(inputs: dict, layout: str):
    """torch's log_softmax over the last dimension, returning Y."""
    import torch

    x = inputs["X"]
    return torch.log_softmax(x, dim=-1)


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, Y, M, N)."""
    return [ctypes.c_void_p(inputs["X"].data_ptr()), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["X"], out)
