"""log_softmax: Y[m, :] = X[m, :] - log Σ exp(X[m, :]) over the last dimension, the log-probabilities of
classifier heads and losses (`torch.log_softmax`; a softmax variant).

X and Y are [M, N] row-major in one dtype. Memory-bound: bytes = X read once, Y written once; no
FLOPs are counted.
"""

from __future__ import annotations

from workers.ops.rows import (DIMS, INPUTS, LAYOUTS, OUTPUT, bytes_moved, c_args, flops,  # noqa: F401 - the
                              make_inputs, output_dtype, output_shape, tensor_args)  # contract of workers/ops/rows.py

# exp and log are computed in fp32 by every kernel and by torch; fp16/bf16 outputs round once
# (errors relative to max|Y|, which is about log N + 3).
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (2e-3, 1e-2), "bf16": (1e-2, 3e-2)}
PEER_NAME = "torch.log_softmax"
ENTRY_NAMES = ("log_softmax", "logsoftmax")


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    x = inputs["X"].double()
    return x - x.exp().sum(dim=-1, keepdim=True).log()


def peer_returns(inputs: dict, layout: str):
    """torch's log_softmax over the last dimension, returning Y."""
    import torch

    x = inputs["X"]
    return torch.log_softmax(x, dim=-1)
