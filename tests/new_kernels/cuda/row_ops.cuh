// Kernels as a header-only CUDA collection ships them: no extern "C", a template kernel
// instantiated only by the runner (runner.cu), the launch geometry written there.
#pragma once

template <int THREADS>
__global__ void row_softmax(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float red[THREADS];
    const float* in = x + (long)blockIdx.x * cols;
    float* out = y + (long)blockIdx.x * cols;
    float m = -3.0e38f;
    for (int i = threadIdx.x; i < cols; i += THREADS) m = fmaxf(m, in[i]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int i = threadIdx.x; i < cols; i += THREADS) sum += expf(in[i] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    const float inv = 1.0f / red[0];
    for (int i = threadIdx.x; i < cols; i += THREADS) out[i] = expf(in[i] - m) * inv;
}

// C[M,N] = A[M,K] · B[K,N], row-major fp32, one output per thread in 16×16 tiles.
__global__ void sgemm_tiled(int M, int N, int K, const float* A, const float* B, float* C) {
    __shared__ float a_tile[16][16];
    __shared__ float b_tile[16][16];
    const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        a_tile[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[(long)row * K + k0 + threadIdx.x] : 0.0f;
        b_tile[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? B[(long)(k0 + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += a_tile[threadIdx.y][k] * b_tile[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(long)row * N + col] = acc;
}
