// Naive GEMM exported as a bare kernel, C = A * B^T (A: MxK, B: NxK row-major bf16; C: MxN fp32).
// No host code: the harness loads the fatbin with the driver API and launches `gemm_raw` with the
// grid and block given in variant.toml. extern "C" keeps the symbol name unmangled for that lookup.
#include <cuda_bf16.h>

extern "C" __global__ void gemm_raw(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                    float* __restrict__ C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k)
    acc += __bfloat162float(A[(size_t)row * K + k]) * __bfloat162float(B[(size_t)col * K + k]);
  C[(size_t)row * N + col] = acc;
}
