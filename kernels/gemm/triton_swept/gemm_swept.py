"""Swept Triton GEMM: C[M,N] (fp32) = A[M,K] · B[N,K]ᵀ, both inputs row-major.

One program computes a BLOCK_M×BLOCK_N tile of C, walking K in BLOCK_K steps; `tl.dot`
becomes wgmma on sm_90a and MFMA on gfx942. Programs are ordered in groups of GROUP_M rows of
tiles so that consecutive programs share tiles of B in L2. The tile sizes and the warp count
are the launcher's keyword arguments, so each point of the variant's sweep is one call shape
of the same kernel (`gemm_nt(A, B, C, BLOCK_M=64, BLOCK_N=128, num_warps=4)`).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gemm_swept_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    # Grouped order: GROUP_M rows of tiles are walked column by column.
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_here = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_here
    pid_n = (pid % per_group) // rows_here

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_n[None, :] * stride_bn + offs_k[:, None]  # Bᵀ slice: K along rows
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_left = K - k0
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_n[None, :] < N) & (offs_k[:, None] < k_left), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


GROUP_M = 8
NUM_STAGES = 3


def gemm_nt(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, *,
            BLOCK_M: int = 128, BLOCK_N: int = 128, BLOCK_K: int = 64, num_warps: int = 8) -> None:
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    gemm_swept_kernel[grid](A, B, C, M, N, K, A.stride(0), B.stride(0), C.stride(0),
                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
                            num_warps=num_warps, num_stages=NUM_STAGES)
