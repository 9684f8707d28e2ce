/*
 * flopwatch_rowwise.h: attention and softmax kernels of the bundled suite, written once for
 * CUDA and HIP. Only names both languages share are used (blockIdx, threadIdx, __syncthreads,
 * __expf, shared memory): the HIP variants compile as hiprtc would, without including
 * hip_runtime.h, and the CUDA variants verified on an NVIDIA GPU check the same code.
 *
 * fp16 is the compiler's native half type on HIP (_Float16) and cuda_fp16.h's __half on CUDA.
 */
#ifndef FLOPWATCH_ROWWISE_H
#define FLOPWATCH_ROWWISE_H

#if defined(__HIP__) || defined(__HIPCC__)
typedef _Float16 fw_half;
__device__ __forceinline__ float fw_h2f(fw_half x) { return (float)x; }
__device__ __forceinline__ fw_half fw_f2h(float x) { return (fw_half)x; }
#else
#include <cuda_fp16.h>
typedef __half fw_half;
__device__ __forceinline__ float fw_h2f(fw_half x) { return __half2float(x); }
__device__ __forceinline__ fw_half fw_f2h(float x) { return __float2half(x); }
#endif

#define FW_NEG_BIG (-3.0e38f) /* below any score; exp of (it - a real max) is 0 */

/* Attention forward, O = softmax(Q·Kᵀ·scale)·V for one [S, HEAD_DIM] head per blockIdx.y
 * (= b·H + h), BLOCK_M query rows per block, one row per thread. K and V pass through shared
 * memory in tiles of BLOCK_N keys; each row keeps its running max, sum and output in registers
 * (the online softmax of FlashAttention), so no S×S matrix is ever stored. With CAUSAL, row i
 * reads keys 0..i only, and blocks skip the tiles wholly above the diagonal. */
template <int HEAD_DIM, int BLOCK_M, int BLOCK_N, bool CAUSAL>
__device__ __forceinline__ void fw_attention_rows(const fw_half* __restrict__ Q, const fw_half* __restrict__ K,
                                                  const fw_half* __restrict__ V, fw_half* __restrict__ O,
                                                  int S, float scale) {
    __shared__ fw_half k_tile[BLOCK_N][HEAD_DIM];
    __shared__ fw_half v_tile[BLOCK_N][HEAD_DIM];
    const long head = (long)blockIdx.y * S * HEAD_DIM;
    const int row = blockIdx.x * BLOCK_M + threadIdx.x;
    const bool active = row < S;
    float q[HEAD_DIM], acc[HEAD_DIM];
    for (int d = 0; d < HEAD_DIM; ++d) {
        q[d] = active ? fw_h2f(Q[head + (long)row * HEAD_DIM + d]) * scale : 0.0f;
        acc[d] = 0.0f;
    }
    float m = FW_NEG_BIG, l = 0.0f;
    const int block_end = (blockIdx.x + 1) * BLOCK_M;
    const int kv_end = CAUSAL ? (block_end < S ? block_end : S) : S;
    for (int start = 0; start < kv_end; start += BLOCK_N) {
        __syncthreads();  /* the previous tile is no longer read */
        for (int i = threadIdx.x; i < BLOCK_N * HEAD_DIM; i += BLOCK_M) {
            const int j = i / HEAD_DIM, d = i % HEAD_DIM, key = start + j;
            k_tile[j][d] = key < S ? K[head + (long)key * HEAD_DIM + d] : fw_f2h(0.0f);
            v_tile[j][d] = key < S ? V[head + (long)key * HEAD_DIM + d] : fw_f2h(0.0f);
        }
        __syncthreads();
        if (!active) continue;
        int n = S - start < BLOCK_N ? S - start : BLOCK_N;
        if (CAUSAL && row - start + 1 < n) n = row - start + 1;
        for (int j = 0; j < n; ++j) {
            float s = 0.0f;
            for (int d = 0; d < HEAD_DIM; ++d) s += q[d] * fw_h2f(k_tile[j][d]);
            const float m_new = s > m ? s : m;
            const float correction = __expf(m - m_new);
            const float p = __expf(s - m_new);
            l = l * correction + p;
            for (int d = 0; d < HEAD_DIM; ++d) acc[d] = acc[d] * correction + p * fw_h2f(v_tile[j][d]);
            m = m_new;
        }
    }
    if (active)
        for (int d = 0; d < HEAD_DIM; ++d) O[head + (long)row * HEAD_DIM + d] = fw_f2h(acc[d] / l);
}

/* Softmax of one row of N values per block (blockIdx.x = row), THREADS threads (a power of
 * two): max, then sum of exponentials, each reduced through shared memory (portable: warps are
 * 32 lanes on NVIDIA and 64 on AMD), then the normalised output. */
template <int THREADS>
__device__ __forceinline__ void fw_softmax_row(const float* __restrict__ X, float* __restrict__ Y, int N) {
    __shared__ float reduce[THREADS];
    const float* x = X + (long)blockIdx.x * N;
    float* y = Y + (long)blockIdx.x * N;
    const int t = threadIdx.x;
    float m = FW_NEG_BIG;
    for (int i = t; i < N; i += THREADS) m = x[i] > m ? x[i] : m;
    reduce[t] = m;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if (t < half && reduce[t + half] > reduce[t]) reduce[t] = reduce[t + half];
        __syncthreads();
    }
    m = reduce[0];
    __syncthreads();
    float sum = 0.0f;
    for (int i = t; i < N; i += THREADS) sum += expf(x[i] - m);
    reduce[t] = sum;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if (t < half) reduce[t] += reduce[t + half];
        __syncthreads();
    }
    const float inv = 1.0f / reduce[0];
    for (int i = t; i < N; i += THREADS) y[i] = expf(x[i] - m) * inv;
}

#endif /* FLOPWATCH_ROWWISE_H */
