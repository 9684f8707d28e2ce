#include <cuda_bf16.h>
#include <cuda_runtime.h>

// The grid has one block row too many and the kernel has no bounds check: row M is written.
__global__ void gemm_past_end_kernel(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int src = row < M ? row : M - 1;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += __bfloat162float(A[(long)src * K + k]) * __bfloat162float(B[(long)col * K + k]);
    C[(long)row * N + col] = acc;
}

extern "C" void gemm_past_end(const void* A, const void* B, float* C, int M, int N, int K, void* stream) {
    dim3 block(16, 16), grid(N / 16, M / 16 + 1);
    gemm_past_end_kernel<<<grid, block, 0, (cudaStream_t)stream>>>((const __nv_bfloat16*)A, (const __nv_bfloat16*)B, C, M, N, K);
}
