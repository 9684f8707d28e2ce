"""Self-test: the smallest gemm through the `python` binding (torch), C = A · Bᵀ in fp32."""

import torch


def gemm_nt(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    torch.matmul(A, B.T, out=C)
