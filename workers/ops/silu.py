"""silu: Y = silu(X) = X · sigmoid(X) elementwise (swish), the activation of Llama-style MLPs
without their gate product (`torch.nn.functional.silu`; the activation inside Liger-Kernel's
SwiGLU kernel).

X and Y are [M, N] row-major in one dtype. Memory-bound: bytes = X read once, Y written once; no
FLOPs are counted.
"""

from __future__ import annotations

from workers.ops.rows import (DIMS, INPUTS, LAYOUTS, OUTPUT, bytes_moved, c_args, flops,  # noqa: F401 - the
                              make_inputs, output_dtype, output_shape, tensor_args)  # contract of workers/ops/rows.py

# sigmoid is computed in fp32 by every kernel and by torch; fp16/bf16 outputs round once.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = "torch.nn.functional.silu"
ENTRY_NAMES = ("silu", "swish")


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x = inputs["X"].double()
    return x * torch.sigmoid(x)


def peer_returns(inputs: dict, layout: str):
    """torch's silu, returning Y."""
    import torch.nn.functional as F

    x = inputs["X"]
    return F.silu(x)
