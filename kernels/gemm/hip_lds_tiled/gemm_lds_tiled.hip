// LDS-tiled bf16 GEMM, C = A * B^T (A MxK, B NxK, both row-major; C MxN fp32).
// Each 16x16 block stages a 16xTK slice of A and of B in shared memory (LDS), converted to
// fp32 once, so every global element is read once per block instead of once per thread.
// Compiles for HIP and CUDA.
#include "flopwatch_gpu.h"

#define TILE 16
#define TK 32
// One float of padding per row: threads of a row read down a column of the B tile, and an
// odd row stride puts consecutive rows in different banks.
#define TK_PAD (TK + 1)

__global__ void __launch_bounds__(TILE * TILE)
gemm_bf16_lds_tiled(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                    float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TK_PAD];
    __shared__ float Bs[TILE][TK_PAD];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TK) {
        // 256 threads fill 16x32 elements of each tile: two per thread, zero outside bounds.
        for (int i = tx; i < TK; i += TILE) {
            const int k = k0 + i;
            const int am = m0 + ty, bn = n0 + ty;
            As[ty][i] = (am < M && k < K) ? fw_bf16_to_float(A[(size_t)am * K + k]) : 0.0f;
            Bs[ty][i] = (bn < N && k < K) ? fw_bf16_to_float(B[(size_t)bn * K + k]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TK; ++i) acc += As[ty][i] * Bs[tx][i];
        __syncthreads();
    }
    const int m = m0 + ty, n = n0 + tx;
    if (m < M && n < N) C[(size_t)m * N + n] = acc;
}

extern "C" void gemm_hip_lds_tiled(const void* A, const void* B, float* C, int M, int N, int K,
                                   void* stream) {
    dim3 block(TILE, TILE);
    dim3 grid(fw_ceil_div(N, TILE), fw_ceil_div(M, TILE));
    FW_LAUNCH(gemm_bf16_lds_tiled, grid, block, 0, fw_stream_from(stream),
              (const unsigned short*)A, (const unsigned short*)B, C, M, N, K);
}
