// bf16 GEMM on CDNA3 matrix cores (gfx942), C = A * B^T with A MxK, B NxK (row-major), C MxN fp32.
// A 256-thread block (4 waves) computes a 64x64 tile of C; each wave owns a 32x32 quarter and
// issues v_mfma_f32_32x32x8_bf16 (8 K-elements per instruction). A and B tiles of BK=32 columns
// are staged through LDS, single-buffered.
//
// Operand/result layout of v_mfma_f32_32x32x8bf16_1k (AMD matrix instruction calculator,
// CDNA3 ISA guide section 7): lane l holds A[l%32][4*(l/32) .. +3] and B^T likewise, so both
// operands are four consecutive K-elements of one row of A or B: one 8-byte LDS read each.
// Accumulator element r of lane l is C[8*(r/4) + 4*(l/32) + r%4][l%32].
#include "flopwatch_gpu.h"

typedef short bf16x4_t __attribute__((ext_vector_type(4)));
typedef float f32x16_t __attribute__((ext_vector_type(16)));
typedef unsigned int u32x4_t __attribute__((ext_vector_type(4)));

#define BM 64
#define BN 64
#define BK 32
// 8 shorts of padding: keeps 16-byte row alignment for the staging stores and shifts
// consecutive rows by 80 bytes so the 32 rows read by one MFMA spread over the banks.
#define LDS_STRIDE (BK + 8)
#define THREADS 256

// Copy one 64x32 bf16 tile (rows r0.., columns k0..) of a row-major matrix with `rows` rows and
// K columns into LDS. Each thread moves 8 consecutive elements (16 bytes); out-of-range elements
// are zero so partial tiles contribute nothing.
__device__ __forceinline__ void stage_tile(unsigned short (*dst)[LDS_STRIDE],
                                           const unsigned short* __restrict__ src,
                                           int rows, int r0, int k0, int K) {
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
    *(u32x4_t*)&dst[r][c] = v;
}

__global__ void __launch_bounds__(THREADS)
gemm_bf16_mfma(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
               float* __restrict__ C, int M, int N, int K) {
    __shared__ __attribute__((aligned(16))) unsigned short As[BM][LDS_STRIDE];
    __shared__ __attribute__((aligned(16))) unsigned short Bs[BN][LDS_STRIDE];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int lane = threadIdx.x % 64, wave = threadIdx.x / 64;
    const int wm = (wave / 2) * 32, wn = (wave % 2) * 32;
    f32x16_t acc = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        stage_tile(As, A, M, m0, k0, K);
        stage_tile(Bs, B, N, n0, k0, K);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            const int col = kk + 4 * (lane / 32);
            const bf16x4_t a = *(const bf16x4_t*)&As[wm + lane % 32][col];
            const bf16x4_t b = *(const bf16x4_t*)&Bs[wn + lane % 32][col];
            acc = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, acc, 0, 0, 0);
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

extern "C" void gemm_hip_mfma(const void* A, const void* B, float* C, int M, int N, int K,
                              void* stream) {
    dim3 grid(fw_ceil_div(N, BN), fw_ceil_div(M, BM));
    FW_LAUNCH(gemm_bf16_mfma, grid, dim3(THREADS), 0, fw_stream_from(stream),
              (const unsigned short*)A, (const unsigned short*)B, C, M, N, K);
}
