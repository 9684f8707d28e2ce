#include <cuda_runtime.h>

__global__ void gemm_illegal_kernel(float* C) {
    float* wild = C + (1L << 40);  // a terabyte past C: no allocation there
    wild[threadIdx.x] = 1.0f;
}

extern "C" void gemm_illegal(const void* A, const void* B, float* C, int M, int N, int K, void* stream) {
    gemm_illegal_kernel<<<1, 32, 0, (cudaStream_t)stream>>>(C);
    cudaStreamSynchronize((cudaStream_t)stream);
}
