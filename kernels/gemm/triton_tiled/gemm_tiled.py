"""Tiled Triton GEMM: C[M,N] (fp32) = A[M,K] · B[N,K]ᵀ, both inputs row-major.

One program computes a BLOCK_M×BLOCK_N tile of C, walking K in BLOCK_K steps; `tl.dot`
becomes wgmma on sm_90a and MFMA on gfx942. Programs are ordered in groups of GROUP_M rows of
tiles so that consecutive programs share tiles of B in L2. Inner strides are 1 (contiguous
inputs), so only the leading dimensions are arguments.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gemm_tiled_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_tile = b_ptr + rn[None, :] * stride_bn + rk[:, None]  # Bᵀ tile: K along rows
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_tile, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        b = tl.load(b_tile, mask=(rn[None, :] < N) & (rk[:, None] + k0 < K), other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K
        b_tile += BLOCK_K
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :]
    tl.store(c, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 128, 64, 8
NUM_WARPS, NUM_STAGES = 8, 3


def gemm_nt(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> None:
    M, K = A.shape
    N = B.shape[0]
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    gemm_tiled_kernel[grid](A, B, C, M, N, K, A.stride(0), B.stride(0), C.stride(0),
                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
                            num_warps=NUM_WARPS, num_stages=NUM_STAGES)
