"""relu_squared: Y = relu(X)² elementwise, the activation of Primer and of nanoGPT-speedrun-style MLPs
(Liger-Kernel's `liger_relu_squared`).

X and Y are [M, N] row-major in one dtype. Memory-bound: bytes = X read once, Y written once; no
FLOPs are counted.
"""

from __future__ import annotations

from workers.ops.rows import (DIMS, INPUTS, LAYOUTS, OUTPUT, bytes_moved, c_args, flops,  # noqa: F401 - the
                              make_inputs, output_dtype, output_shape, tensor_args)  # contract of workers/ops/rows.py

# One product, rounded once to the output dtype (Liger squares in the input dtype; torch's
# square rounds once too).
TOLERANCE = {"fp32": (1e-6, 1e-5), "fp16": (2e-3, 1e-2), "bf16": (1e-2, 3e-2)}
PEER_NAME = "torch.square(torch.nn.functional.relu(X))"
ENTRY_NAMES = ("relu_squared", "relu_square", "squared_relu", "relu2", "relu_sq", "relusquared", "square_relu")


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    x = inputs["X"].double()
    return x.clamp_min(0.0).pow(2)


def peer_returns(inputs: dict, layout: str):
    """torch eager, as Liger's test writes it: relu, then square (two kernels)."""
    import torch
    import torch.nn.functional as F

    x = inputs["X"]
    return torch.square(F.relu(x))
