// bf16 GEMM for hiprtc, one output per thread: C[M,N] = A[M,K] · B[K,N] (row-major), bf16
// stored as 16-bit words (no bf16 header under hiprtc), fp32 accumulation and output.
// Launched by ../bench.py with a 64×64 tile per block of 256 threads.
#define TILE 64

__device__ inline float bf16_to_float(unsigned short x) { return __uint_as_float((unsigned)x << 16); }

extern "C" __global__ void matmul_kernel(const unsigned short* A, const unsigned short* B, float* C,
                                         int M, int N, int K) {
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
            const int row = blockIdx.y * TILE + ty * 4 + i, col = blockIdx.x * TILE + tx * 4 + j;
            if (row >= M || col >= N) continue;
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += bf16_to_float(A[row * K + k]) * bf16_to_float(B[k * N + col]);
            C[row * N + col] = acc;
        }
    }
}
