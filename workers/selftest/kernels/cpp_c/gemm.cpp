// Self-test: the smallest gemm through the `c` binding on the CPU (C = A * B^T, fp32).
extern "C" void selftest_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int k = 0; k < K; ++k) acc += A[m * K + k] * B[n * K + k];
      C[m * N + n] = acc;
    }
}
