"""FlashAttention forward in Triton, after Triton's fused-attention tutorial (06), without its
Hopper-only TMA and warp-specialisation paths: one program per BLOCK_M query rows of one head,
K and V streamed in BLOCK_N tiles, `tl.dot` for Q·Kᵀ and P·V (wgmma / MFMA), online softmax in
base 2 (scale folded with log2 e). The causal and non-causal variants carry this same file and
name different launchers.
"""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def attn_fwd(Q, K, V, O, sm_scale, S, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64) * S * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # exp(x) = exp2(x · log2 e)
    hi = S
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, S)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + head + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=cols[None, :] < S, other=0.0)
        qk = tl.dot(q, k) * qk_scale
        keep = cols[None, :] < S
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + head + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None] < S, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(O + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :], out.to(O.dtype.element_ty),
             mask=offs_m[:, None] < S)


BLOCK_M, BLOCK_N, NUM_WARPS, NUM_STAGES = 128, 64, 4, 2


def _launch(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, O: torch.Tensor, causal: bool) -> None:
    B, H, S, D = Q.shape
    grid = (triton.cdiv(S, BLOCK_M), B * H)
    attn_fwd[grid](Q, K, V, O, 1.0 / math.sqrt(D), S, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                   CAUSAL=causal, num_warps=NUM_WARPS, num_stages=NUM_STAGES)


def attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, O: torch.Tensor) -> None:
    _launch(Q, K, V, O, causal=False)


def attention_causal(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, O: torch.Tensor) -> None:
    _launch(Q, K, V, O, causal=True)
