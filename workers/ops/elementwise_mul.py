"""elementwise_mul: Y = A · B elementwise (FlagGems' `mul`, pytorch/extension-cpp's `mymul`).

The contract is elementwise_add's (`workers/ops/elementwise_add.py`): A, B and Y vectors of N
elements in one dtype, bytes = A and B read once, Y written once, no FLOPs counted.
"""

from __future__ import annotations

from workers.ops.elementwise_add import (DIMS, INPUTS, LAYOUTS, OUTPUT, bytes_moved,  # noqa: F401 - the contract
                                         c_args, flops, make_inputs, output_dtype, output_shape, tensor_args)

# one rounding of the product: an fp32 kernel equals torch bit for bit, fp16/bf16 round it once.
TOLERANCE = {"fp32": (1e-6, 1e-6), "fp16": (2e-3, 1e-2), "bf16": (1e-2, 5e-2)}
PEER_NAME = "torch.mul(A, B)"
ENTRY_NAMES = ("elementwise_mul", "mul", "vector_mul", "vec_mul", "mul_tensor")


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    a, b = inputs["A"].double(), inputs["B"].double()
    return a * b


def peer_returns(inputs: dict, layout: str):
    import torch

    return torch.mul(inputs["A"], inputs["B"])
