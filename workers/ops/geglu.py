"""geglu: Y = gelu_tanh(A) · B elementwise, the gated activation of Gemma-style MLPs
(Liger-Kernel's `liger_geglu`, HF's `act_fn(gate_proj(x)) * up_proj(x)` with
"gelu_pytorch_tanh"); gelu_tanh(a) = 0.5·a·(1 + tanh(√(2/π)·(a + 0.044715·a³))).

A, B and Y are [M, N] row-major in one dtype. Memory-bound: bytes = A and B read once, Y
written once; no FLOPs are counted.
"""

from __future__ import annotations

from workers.ops.swiglu import (DIMS, INPUTS, LAYOUTS, OUTPUT, bytes_moved, c_args,  # noqa: F401 - swiglu's
                                flops, make_inputs, output_dtype, output_shape, tensor_args)  # contract

# GELU is computed in fp32 by Liger and by torch; fp16/bf16 kernels round gelu(A) and the
# product once each (as swiglu's do).
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = 'torch.nn.functional.gelu(A, approximate="tanh") * B'
ENTRY_NAMES = ("geglu", "gelu_mul", "gelu_and_mul", "gelu_tanh_and_mul", "geglu_approx", "geglu_tanh")


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    a, b = inputs["A"].double(), inputs["B"].double()
    return 0.5 * a * (1.0 + torch.tanh((2.0 / torch.pi) ** 0.5 * (a + 0.044715 * a.pow(3)))) * b


def peer_returns(inputs: dict, layout: str):
    """torch eager, as a Gemma MLP computes it: GELU (tanh), then the product (two kernels)."""
    import torch.nn.functional as F

    return F.gelu(inputs["A"], approximate="tanh") * inputs["B"]
