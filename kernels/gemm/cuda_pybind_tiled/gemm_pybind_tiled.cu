// Shared-memory tiled GEMM behind a pybind11 module, called the way ThunderKittens' kernels are:
//   import tk_kernel; tk_kernel.dispatch_micro(A, B, C)
// A: MxK bf16, B: NxK bf16 (both row-major, contiguous, on the GPU), C: MxN fp32; C = A * B^T.
// Launches on torch's current stream so timing with torch events measures this kernel.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <torch/extension.h>

#define TILE 32

__global__ void gemm_pybind_tiled_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                         float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx, b_row = blockIdx.x * TILE + ty;
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

void dispatch_micro(torch::Tensor A, torch::Tensor B, torch::Tensor C) {
  TORCH_CHECK(A.is_cuda() && B.is_cuda() && C.is_cuda(), "A, B, C must be CUDA tensors");
  TORCH_CHECK(A.scalar_type() == torch::kBFloat16 && B.scalar_type() == torch::kBFloat16, "A, B must be bf16");
  TORCH_CHECK(C.scalar_type() == torch::kFloat32, "C must be fp32");
  TORCH_CHECK(A.is_contiguous() && B.is_contiguous() && C.is_contiguous(), "A, B, C must be contiguous");
  int M = A.size(0), K = A.size(1), N = B.size(0);
  TORCH_CHECK(B.size(1) == K && C.size(0) == M && C.size(1) == N, "shapes must be A MxK, B NxK, C MxN");
  dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  gemm_pybind_tiled_kernel<<<grid, block, 0, stream>>>(
      reinterpret_cast<const __nv_bfloat16*>(A.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(B.data_ptr()),
      C.data_ptr<float>(), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("dispatch_micro", &dispatch_micro, "C = A * B^T (bf16 in, fp32 out)");
}
