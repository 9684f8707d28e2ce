extern "C" void gemm_past_end(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i <= M; ++i)  // off by one: row M does not exist
        for (int j = 0; j < N; ++j) {
            const int row = i < M ? i : M - 1;
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[(long)row * K + k] * B[(long)j * K + k];
            C[(long)i * N + j] = acc;
        }
}
