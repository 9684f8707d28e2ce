"""torch.matmul as a gemm variant: C = A · Bᵀ with fp32 output."""

import torch


def gemm_nt(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    if A.dtype == torch.float32:
        torch.matmul(A, B.T, out=C)
    else:
        C.copy_(torch.matmul(A, B.T))
