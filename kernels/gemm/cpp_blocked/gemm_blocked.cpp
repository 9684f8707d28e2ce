// C[M,N] = A[M,K] · B[N,K]^T, fp32, cache-blocked.
// B rows are contiguous in K, which makes the j loop stride K; packing a panel of BN columns
// as Bp[k][j] turns the inner loop into a unit-stride axpy the compiler vectorises.
#include <cstddef>
#include <vector>

namespace {
constexpr int BN = 64;   // columns per packed panel (the panel stays in L2)
constexpr int BK = 256;  // depth per pass (the panel slice stays in L1)
}

extern "C" void gemm_blocked(const float* A, const float* B, float* C, int M, int N, int K) {
    std::vector<float> panel((std::size_t)BK * BN);
    for (int j0 = 0; j0 < N; j0 += BN) {
        const int nb = (N - j0 < BN) ? N - j0 : BN;
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < nb; ++j) C[(long)i * N + j0 + j] = 0.0f;
        for (int k0 = 0; k0 < K; k0 += BK) {
            const int kb = (K - k0 < BK) ? K - k0 : BK;
            for (int j = 0; j < nb; ++j)
                for (int k = 0; k < kb; ++k) panel[(std::size_t)k * BN + j] = B[(long)(j0 + j) * K + k0 + k];
            for (int i = 0; i < M; ++i) {
                float acc[BN] = {0.0f};
                const float* a = A + (long)i * K + k0;
                for (int k = 0; k < kb; ++k) {
                    const float av = a[k];
                    const float* p = &panel[(std::size_t)k * BN];
                    for (int j = 0; j < BN; ++j) acc[j] += av * p[j];
                }
                for (int j = 0; j < nb; ++j) C[(long)i * N + j0 + j] += acc[j];
            }
        }
    }
}
