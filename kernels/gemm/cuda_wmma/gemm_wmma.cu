// Tensor-core GEMM through nvcuda::wmma (bf16 16x16x16 fragments, fp32 accumulate), C = A * B^T.
// A: MxK row-major bf16 is a row_major matrix_a with ldm = K. B: NxK row-major is B^T stored
// column-major, i.e. a col_major matrix_b with ldm = K, so no transpose is needed.
// 4 warps per block, each owning a 32x32 output tile (2x2 fragments); a block covers 64x64.
// M, N and K must be multiples of 16 (fragments are loaded whole); 16-aligned edges are guarded.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

using namespace nvcuda;

#define WM 32
#define WN 32

__global__ void __launch_bounds__(128)
gemm_wmma_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                 float* __restrict__ C, int M, int N, int K) {
  int warp = threadIdx.x / 32;
  int m0 = blockIdx.y * 64 + (warp / 2) * WM;
  int n0 = blockIdx.x * 64 + (warp % 2) * WN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[2];
  for (int k = 0; k < K; k += 16) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
      if (m0 + i * 16 < M) wmma::load_matrix_sync(a[i], A + (size_t)(m0 + i * 16) * K + k, K);
#pragma unroll
    for (int j = 0; j < 2; ++j)
      if (n0 + j * 16 < N) wmma::load_matrix_sync(b[j], B + (size_t)(n0 + j * 16) * K + k, K);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      if (m0 + i * 16 < M && n0 + j * 16 < N)
        wmma::store_matrix_sync(C + (size_t)(m0 + i * 16) * N + n0 + j * 16, acc[i][j], N, wmma::mem_row_major);
}

extern "C" void gemm_cuda_wmma(const void* A, const void* B, float* C, int M, int N, int K, void* stream) {
  dim3 grid((N + 63) / 64, (M + 63) / 64);
  gemm_wmma_kernel<<<grid, 128, 0, (cudaStream_t)stream>>>(
      (const __nv_bfloat16*)A, (const __nv_bfloat16*)B, C, M, N, K);
}
