// Naive GEMM: one thread per output element, C = A * B^T.
// A is MxK row-major bf16, B is NxK row-major bf16, C is MxN row-major fp32.
// Every operand is read straight from global memory: the baseline the other variants beat.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void gemm_naive_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k)
    acc += __bfloat162float(A[(size_t)row * K + k]) * __bfloat162float(B[(size_t)col * K + k]);
  C[(size_t)row * N + col] = acc;
}

extern "C" void gemm_cuda_naive(const void* A, const void* B, float* C, int M, int N, int K, void* stream) {
  dim3 block(16, 16);
  dim3 grid((N + 15) / 16, (M + 15) / 16);
  gemm_naive_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(
      (const __nv_bfloat16*)A, (const __nv_bfloat16*)B, C, M, N, K);
}
