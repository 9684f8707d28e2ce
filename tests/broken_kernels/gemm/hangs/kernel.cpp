extern "C" void gemm_hang(const float* A, const float* B, float* C, int M, int N, int K) {
    volatile int spin = 1;
    while (spin) {
    }
}
