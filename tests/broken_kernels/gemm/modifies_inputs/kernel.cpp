// Computes C = A·Bᵀ correctly, then uses A as scratch space: it halves every element of A in
// place. The output is right, but the caller's input is gone; a second call (or the timing
// loop) would compute on other data.
extern "C" void gemm_modifies_inputs(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[(long)i * K + k] * B[(long)j * K + k];
            C[(long)i * N + j] = acc;
        }
    float* scratch = const_cast<float*>(A);
    for (long x = 0; x < (long)M * K; ++x) scratch[x] *= 0.5f;
}
