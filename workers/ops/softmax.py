"""softmax: Y[m, :] = softmax(X[m, :]) over the last dimension, the row-wise op of attention
and of classifier heads.

X and Y are [M, N] row-major in one dtype. It is memory-bound, so it is reported as
bandwidth, as Triton's fused-softmax tutorial does: bytes = X read once + Y written once,
and no FLOPs are counted.
"""

from __future__ import annotations

from workers.ops.rows import (DIMS, INPUTS, LAYOUTS, OUTPUT, bytes_moved, c_args, flops,  # noqa: F401 - the
                              make_inputs, output_dtype, output_shape, tensor_args)  # contract of workers/ops/rows.py

# exp is computed in fp32 by every kernel and by torch; fp16/bf16 outputs round once.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (2e-3, 1e-2), "bf16": (1e-2, 3e-2)}
PEER_NAME = "torch.softmax"
ENTRY_NAMES = ("softmax",)


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    return torch.softmax(inputs["X"].double(), dim=-1)


def peer(inputs: dict, out, layout: str, alpha: float = 1.0, beta: float = 0.0) -> None:
    """torch's softmax kernel writing straight into `out` (`_softmax.out`): no extra copy,
    which would double the traffic of a memory-bound op."""
    import torch

    torch.ops.aten._softmax.out(inputs["X"], -1, False, out=out)


def peer_returns(inputs: dict, layout: str):
    """torch.softmax returning its output: the form a backward or full pass starts from (the
    forward keeps `peer`, which writes into the harness's output)."""
    import torch

    return torch.softmax(inputs["X"], dim=-1)
