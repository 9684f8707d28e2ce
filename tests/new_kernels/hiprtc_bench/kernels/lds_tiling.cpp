// bf16 GEMM for hiprtc with 64×64 tiles of A and B staged through LDS (see naive.cpp for the
// storage and launch conventions).
#define TILE 64
#define KSTEP 16

__device__ inline float bf16_to_float(unsigned short x) { return __uint_as_float((unsigned)x << 16); }

extern "C" __global__ void matmul_kernel(const unsigned short* A, const unsigned short* B, float* C,
                                         int M, int N, int K) {
    __shared__ float a_tile[TILE][KSTEP + 1];
    __shared__ float b_tile[KSTEP][TILE + 1];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += KSTEP) {
        for (int e = threadIdx.x; e < TILE * KSTEP; e += blockDim.x) {
            const int r = e / KSTEP, c = e % KSTEP, row = blockIdx.y * TILE + r;
            a_tile[r][c] = (row < M && k0 + c < K) ? bf16_to_float(A[row * K + k0 + c]) : 0.0f;
            const int br = e / TILE, bc = e % TILE, col = blockIdx.x * TILE + bc;
            b_tile[br][bc] = (col < N && k0 + br < K) ? bf16_to_float(B[(k0 + br) * N + col]) : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < KSTEP; ++k)
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += a_tile[ty * 4 + i][k] * b_tile[k][tx * 4 + j];
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int row = blockIdx.y * TILE + ty * 4 + i, col = blockIdx.x * TILE + tx * 4 + j;
            if (row < M && col < N) C[row * N + col] = acc[i][j];
        }
}
