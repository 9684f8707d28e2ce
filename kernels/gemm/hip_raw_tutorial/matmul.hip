// The tutorial-style kernel many HIP GEMMs start from: row-major A[M,K] and B[K,N] ("nn"),
// fp16 in, fp32 out, C = alpha·A·B + beta·C, one thread per output element.
#include <hip/hip_runtime.h>

extern "C" __global__ void matmul_kernel(int M, int N, int K, const __fp16* A, const __fp16* B, float* C,
                                         float alpha, float beta) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += static_cast<float>(A[(long)row * K + k]) * static_cast<float>(B[(long)k * N + col]);
    C[(long)row * N + col] = alpha * acc + beta * C[(long)row * N + col];
}
