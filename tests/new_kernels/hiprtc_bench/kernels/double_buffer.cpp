// bf16 GEMM for hiprtc with two LDS buffers, so the next K-step loads while this one computes,
// and the helper that clears C between runs (see naive.cpp for the conventions).
#define TILE 64
#define KSTEP 16

__device__ inline float bf16_to_float(unsigned short x) { return __uint_as_float((unsigned)x << 16); }

extern "C" __global__ void clear_output(float* C, int count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) C[i] = 0.0f;
}

extern "C" __global__ void matmul_kernel(const unsigned short* A, const unsigned short* B, float* C,
                                         int M, int N, int K) {
    __shared__ float a_tile[2][TILE][KSTEP + 1];
    __shared__ float b_tile[2][KSTEP][TILE + 1];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[4][4] = {};
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += KSTEP, buf ^= 1) {
        for (int e = threadIdx.x; e < TILE * KSTEP; e += blockDim.x) {
            const int r = e / KSTEP, c = e % KSTEP, row = blockIdx.y * TILE + r;
            a_tile[buf][r][c] = (row < M && k0 + c < K) ? bf16_to_float(A[row * K + k0 + c]) : 0.0f;
            const int br = e / TILE, bc = e % TILE, col = blockIdx.x * TILE + bc;
            b_tile[buf][br][bc] = (col < N && k0 + br < K) ? bf16_to_float(B[(k0 + br) * N + col]) : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < KSTEP; ++k)
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += a_tile[buf][ty * 4 + i][k] * b_tile[buf][k][tx * 4 + j];
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int row = blockIdx.y * TILE + ty * 4 + i, col = blockIdx.x * TILE + tx * 4 + j;
            if (row < M && col < N) C[row * N + col] = acc[i][j];
        }
}
