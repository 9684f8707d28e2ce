// Deliberately broken: undeclared names and a type error.
extern "C" void gemm_broken(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j)
            C[i * N + j] = dot(A + i * K, B + j * K, K);   // 'dot' was never declared
    float* p = undefined_buffer;                             // nor was this
    int x = "not an int";
}
