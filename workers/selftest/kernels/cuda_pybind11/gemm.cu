// Self-test: the smallest gemm through the `pybind11` binding, called the way ThunderKittens
// and HipKittens modules are: tk_kernel.dispatch_micro(A, B, C) with fp32 tensors.
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

__global__ void selftest_pybind_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
  int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[m * K + k] * B[n * K + k];
  C[m * N + n] = acc;
}

void dispatch_micro(torch::Tensor A, torch::Tensor B, torch::Tensor C) {
  int M = A.size(0), K = A.size(1), N = B.size(0);
  dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  selftest_pybind_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
      A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), M, N, K);
}

PYBIND11_MODULE(tk_kernel, m) { m.def("dispatch_micro", &dispatch_micro); }
