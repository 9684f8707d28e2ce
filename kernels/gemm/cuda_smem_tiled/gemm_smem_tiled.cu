// Shared-memory tiled GEMM, C = A * B^T (A: MxK, B: NxK, both row-major bf16; C: MxN fp32).
// Each 32x32 thread block stages a 32x32 tile of A and of B in shared memory per K step, so every
// global element is read once per block instead of once per thread.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define TILE 32

__global__ void gemm_smem_tiled_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                       float* __restrict__ C, int M, int N, int K) {
  // +1 column: B is read column-wise below, and the pad moves consecutive rows to different banks.
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty;
  int col = blockIdx.x * TILE + tx;
  int b_row = blockIdx.x * TILE + ty;  // the B row (output column) this thread stages
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    int k = k0 + tx;
    As[ty][tx] = (row < M && k < K) ? __bfloat162float(A[(size_t)row * K + k]) : 0.0f;
    Bs[ty][tx] = (b_row < N && k < K) ? __bfloat162float(B[(size_t)b_row * K + k]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Bs[tx][kk];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

extern "C" void gemm_cuda_smem_tiled(const void* A, const void* B, float* C, int M, int N, int K,
                                     void* stream) {
  dim3 block(TILE, TILE);
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  gemm_smem_tiled_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(
      (const __nv_bfloat16*)A, (const __nv_bfloat16*)B, C, M, N, K);
}
