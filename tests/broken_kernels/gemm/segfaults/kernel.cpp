extern "C" void gemm_segfault(const float* A, const float* B, float* C, int M, int N, int K) {
    volatile float* null_output = nullptr;
    for (int i = 0; i < M * N; ++i) null_output[i] = A[i % (M * K)];
}
