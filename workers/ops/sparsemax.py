"""sparsemax: Y[m, :] = sparsemax(X[m, :]) = max(X - τ, 0) over the last dimension, the Euclidean
projection of the row onto the probability simplex (Martins & Astudillo, 2016): τ is chosen so
that the row sums to 1, and most entries are exactly 0 (Liger-Kernel's `liger_sparsemax`, dim -1).

X and Y are [M, N] row-major in one dtype. Memory-bound: bytes = X read once, Y written once; no
FLOPs are counted.
"""

from __future__ import annotations

from workers.ops.rows import (DIMS, INPUTS, LAYOUTS, OUTPUT, bytes_moved, c_args, flops,  # noqa: F401 - the
                              make_inputs, output_dtype, output_shape, tensor_args)  # contract of workers/ops/rows.py

# Y is a small difference X - τ of scores near the row's maximum (3-4 for standard normal rows):
# one bf16 ulp of a score there (1.6e-2) is a few % of Y, so torch eager in bf16, which sorts,
# sums and subtracts in bf16, lands 2.3% off in norm at N = 4096; fp16's ulp is 8x finer; fp32
# kernels (Liger computes in fp32) agree to 1e-6.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (1e-2, 2e-2), "bf16": (5e-2, 5e-2)}
PEER_NAME = "torch eager sparsemax (sort, cumsum, clamp; Liger's test)"
ENTRY_NAMES = ("sparsemax",)


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x = inputs["X"].double()
    # The support is the k largest scores with 1 + k·z_(k) > z_(1) + ... + z_(k) (z sorted
    # descending); τ = (z_(1) + ... + z_(k) - 1) / k.
    z = x.sort(dim=-1, descending=True).values
    k = torch.arange(1, z.shape[-1] + 1, dtype=torch.float64, device=z.device)
    partial = z.cumsum(dim=-1)
    support = (1.0 + k * z > partial).sum(dim=-1, keepdim=True)
    tau = (partial.gather(-1, support - 1) - 1.0) / support.double()
    return (x - tau).clamp_min(0.0)


def peer_returns(inputs: dict, layout: str):
    """torch eager, as Liger's test and sparsemax packages write it (no torch function exists)."""
    import torch

    x = inputs["X"]
    z = torch.sort(x, dim=-1, descending=True).values
    partial = torch.cumsum(z, dim=-1)
    k = torch.arange(1, x.shape[-1] + 1, device=x.device, dtype=x.dtype)
    support = (1 + k * z > partial).to(x.dtype)
    tau = ((z * support).sum(dim=-1, keepdim=True) - 1) / support.sum(dim=-1, keepdim=True)
    return torch.clamp(x - tau, min=0)
