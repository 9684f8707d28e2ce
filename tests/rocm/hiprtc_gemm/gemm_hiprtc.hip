// An fp16 GEMM written for hiprtc, as public collections ship them: no #include of
// hip/hip_runtime.h (the runtime compiler declares blockIdx and friends implicitly), the
// half type from <hip_fp16.h> as hiprtc resolves it, and a C++ (mangled) kernel name.
#include <hip_fp16.h>

#define TILE 16

__global__ void gemm_fp16_tiled(const __half* A, const __half* B, float* C, int M, int N, int K) {
    __shared__ float a_tile[TILE][TILE + 1];
    __shared__ float b_tile[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        a_tile[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? __half2float(A[(long)row * K + k0 + threadIdx.x]) : 0.0f;
        b_tile[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? __half2float(B[(long)(k0 + threadIdx.y) * N + col]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += a_tile[threadIdx.y][k] * b_tile[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(long)row * N + col] = acc;
}
