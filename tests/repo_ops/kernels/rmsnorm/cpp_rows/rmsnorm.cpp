// RMSNorm on the CPU, fp32: the arguments flopwatch passes a repository op by default
// (inputs, output, sizes, then the op's scalars).
#include <cmath>

extern "C" void rmsnorm(const float* X, const float* W, float* Y, int M, int N, float eps) {
    for (long r = 0; r < M; ++r) {
        double sum = 0.0;
        for (int i = 0; i < N; ++i) sum += (double)X[r * N + i] * X[r * N + i];
        const float inv = 1.0f / std::sqrt((float)(sum / N) + eps);
        for (int i = 0; i < N; ++i) Y[r * N + i] = X[r * N + i] * inv * W[i];
    }
}
