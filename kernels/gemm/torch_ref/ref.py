"""torch.matmul as a gemm variant: C = A · Bᵀ with fp32 output."""

import torch


def gemm_nt(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    if A.dtype == torch.float32:
        torch.matmul(A, B.T, out=C)
        return
    if A.is_cuda:
        try:
            # One cuBLAS/hipBLASLt call that writes fp32 directly, like the kernels it is compared with.
            torch.mm(A, B.T, out_dtype=torch.float32, out=C)
            return
        except (TypeError, RuntimeError):
            pass  # torch without out_dtype: matmul in the input dtype, then widen
    C.copy_(torch.matmul(A, B.T))
