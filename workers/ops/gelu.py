"""gelu: Y = GELU(X) elementwise in its tanh approximation, 0.5·x·(1 + tanh(√(2/π)·(x +
0.044715·x³))) — HF's "gelu_pytorch_tanh" (Gemma, GPT-2's "gelu_new"), the form of Liger-Kernel's
GEGLU kernel and of `torch.nn.functional.gelu(x, approximate="tanh")`. An erf GELU (torch's
default) differs from it by up to 5e-4 absolute: such a kernel is another op.

X and Y are [M, N] row-major in one dtype. Memory-bound: bytes = X read once, Y written once; no
FLOPs are counted.
"""

from __future__ import annotations

from workers.ops.rows import (DIMS, INPUTS, LAYOUTS, OUTPUT, bytes_moved, c_args, flops,  # noqa: F401 - the
                              make_inputs, output_dtype, output_shape, tensor_args)  # contract of workers/ops/rows.py

# tanh is computed in fp32 by Liger-style kernels and by torch; fp16/bf16 outputs round once.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = 'torch.nn.functional.gelu(X, approximate="tanh")'
ENTRY_NAMES = ("gelu", "gelu_tanh", "gelu_pytorch_tanh", "gelu_new", "gelu_approx", "gelu_fast")


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x = inputs["X"].double()
    return 0.5 * x * (1.0 + torch.tanh((2.0 / torch.pi) ** 0.5 * (x + 0.044715 * x.pow(3))))


def peer_returns(inputs: dict, layout: str):
    """torch's GELU with the tanh approximation, returning Y."""
    import torch.nn.functional as F

    x = inputs["X"]
    return F.gelu(x, approximate="tanh")
