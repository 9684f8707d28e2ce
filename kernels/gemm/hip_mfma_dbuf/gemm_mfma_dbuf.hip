// bf16 GEMM on CDNA3 matrix cores with double-buffered LDS, C = A * B^T
// (A MxK, B NxK row-major, C MxN fp32). Same tiling and MFMA layout as hip_mfma
// (64x64 block tile, 4 waves of 32x32, v_mfma_f32_32x32x8_bf16); the difference is the
// pipeline: the global loads of tile t+1 are issued into registers before the MFMAs of
// tile t, and land in the other LDS buffer afterwards, so one barrier per K-step suffices
// and memory latency overlaps the matrix-core work.
#include "flopwatch_gpu.h"

typedef short bf16x4_t __attribute__((ext_vector_type(4)));
typedef float f32x16_t __attribute__((ext_vector_type(16)));
typedef unsigned int u32x4_t __attribute__((ext_vector_type(4)));

#define BM 64
#define BN 64
#define BK 32
#define LDS_STRIDE (BK + 8)  // 16-byte aligned rows, 80-byte row shift against bank conflicts
#define THREADS 256

// Global -> registers: the 8 consecutive bf16 this thread moves for a 64x32 tile, zero
// outside the matrix.
__device__ __forceinline__ u32x4_t fetch_tile(const unsigned short* __restrict__ src, int rows,
                                              int r0, int k0, int K) {
    const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * 8;
    const int gr = r0 + r, gk = k0 + c;
    u32x4_t v = {0u, 0u, 0u, 0u};
    const unsigned short* p = src + (size_t)gr * K + gk;
    if (gr < rows && gk + 8 <= K && (K % 8) == 0) {
        v = *(const u32x4_t*)p;
    } else if (gr < rows) {
        unsigned short tmp[8];
        for (int i = 0; i < 8; ++i) tmp[i] = (gk + i < K) ? p[i] : (unsigned short)0;
        v = *(const u32x4_t*)tmp;
    }
    return v;
}

// Registers -> LDS, the counterpart of fetch_tile.
__device__ __forceinline__ void store_tile(unsigned short (*dst)[LDS_STRIDE], u32x4_t v) {
    *(u32x4_t*)&dst[threadIdx.x / 4][(threadIdx.x % 4) * 8] = v;
}

__global__ void __launch_bounds__(THREADS)
gemm_bf16_mfma_dbuf(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                    float* __restrict__ C, int M, int N, int K) {
    __shared__ __attribute__((aligned(16))) unsigned short As[2][BM][LDS_STRIDE];
    __shared__ __attribute__((aligned(16))) unsigned short Bs[2][BN][LDS_STRIDE];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int lane = threadIdx.x % 64, wave = threadIdx.x / 64;
    const int wm = (wave / 2) * 32, wn = (wave % 2) * 32;
    const int tiles = (K + BK - 1) / BK;
    f32x16_t acc = {};

    store_tile(As[0], fetch_tile(A, M, m0, 0, K));
    store_tile(Bs[0], fetch_tile(B, N, n0, 0, K));
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        const bool more = t + 1 < tiles;
        u32x4_t next_a = {}, next_b = {};
        if (more) {
            next_a = fetch_tile(A, M, m0, (t + 1) * BK, K);
            next_b = fetch_tile(B, N, n0, (t + 1) * BK, K);
        }
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            const int col = kk + 4 * (lane / 32);
            const bf16x4_t a = *(const bf16x4_t*)&As[cur][wm + lane % 32][col];
            const bf16x4_t b = *(const bf16x4_t*)&Bs[cur][wn + lane % 32][col];
            acc = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, acc, 0, 0, 0);
        }
        // The other buffer was last read in step t-1, which every wave finished before the
        // barrier that closed it, so writing it now needs no extra barrier.
        if (more) {
            store_tile(As[cur ^ 1], next_a);
            store_tile(Bs[cur ^ 1], next_b);
        }
        __syncthreads();
    }
    const int n = n0 + wn + lane % 32;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        const int m = m0 + wm + 8 * (r / 4) + 4 * (lane / 32) + r % 4;
        if (m < M && n < N) C[(size_t)m * N + n] = acc[r];
    }
}

extern "C" void gemm_hip_mfma_dbuf(const void* A, const void* B, float* C, int M, int N, int K,
                                   void* stream) {
    dim3 grid(fw_ceil_div(N, BN), fw_ceil_div(M, BM));
    FW_LAUNCH(gemm_bf16_mfma_dbuf, grid, dim3(THREADS), 0, fw_stream_from(stream),
              (const unsigned short*)A, (const unsigned short*)B, C, M, N, K);
}
