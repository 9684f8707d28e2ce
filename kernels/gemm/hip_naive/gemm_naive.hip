// Naive bf16 GEMM, C = A * B^T: one thread per output element, fp32 accumulation.
// A is MxK row-major, B is NxK row-major (so both operands are read along K), C is MxN fp32.
// The reference point for every faster variant; compiles for HIP and CUDA.
#include "flopwatch_gpu.h"

#define NAIVE_TILE 16

__global__ void __launch_bounds__(NAIVE_TILE * NAIVE_TILE)
gemm_bf16_naive(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                float* __restrict__ C, int M, int N, int K) {
    const int n = blockIdx.x * NAIVE_TILE + threadIdx.x;
    const int m = blockIdx.y * NAIVE_TILE + threadIdx.y;
    if (m >= M || n >= N) return;
    const unsigned short* a = A + (size_t)m * K;
    const unsigned short* b = B + (size_t)n * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += fw_bf16_to_float(a[k]) * fw_bf16_to_float(b[k]);
    C[(size_t)m * N + n] = acc;
}

extern "C" void gemm_hip_naive(const void* A, const void* B, float* C, int M, int N, int K,
                               void* stream) {
    dim3 block(NAIVE_TILE, NAIVE_TILE);
    dim3 grid(fw_ceil_div(N, NAIVE_TILE), fw_ceil_div(M, NAIVE_TILE));
    FW_LAUNCH(gemm_bf16_naive, grid, block, 0, fw_stream_from(stream),
              (const unsigned short*)A, (const unsigned short*)B, C, M, N, K);
}
