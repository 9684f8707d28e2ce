// C[M,N] = A[M,K] · B[N,K]^T, fp32, one dot product per output element.
extern "C" void gemm_naive(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[(long)i * K + k] * B[(long)j * K + k];
            C[(long)i * N + j] = acc;
        }
    }
}
