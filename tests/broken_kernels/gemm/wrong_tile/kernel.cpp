// Correct everywhere except output tile (1, 0): rows 64..127, cols 0..63 read row i-1 of A.
extern "C" void gemm_wrong_tile(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            const bool bad = (i / 64 == 1) && (j / 64 == 0);
            const float* a = A + (long)(bad ? i - 1 : i) * K;
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += a[k] * B[(long)j * K + k];
            C[(long)i * N + j] = acc;
        }
}
