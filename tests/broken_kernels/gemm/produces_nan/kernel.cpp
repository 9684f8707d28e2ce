extern "C" void gemm_nan(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[(long)i * K + k] * B[(long)j * K + k];
            const float zero = (i == 3) ? 0.0f : 1.0f;
            C[(long)i * N + j] = (i == 3) ? acc * zero / zero : acc;
        }
}
