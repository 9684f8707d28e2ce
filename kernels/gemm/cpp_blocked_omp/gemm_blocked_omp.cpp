// C[M,N] = A[M,K] · B[N,K]^T, fp32, 64×64 output tiles distributed over OpenMP threads.
// Each tile is owned by one thread for the whole K loop, so there is no write sharing and the
// result is deterministic whatever the thread count.
#include <omp.h>

namespace {
constexpr int TM = 64, TN = 64, TK = 128;

void tile(const float* A, const float* B, float* C, int M, int N, int K, int i0, int j0) {
    const int mb = (M - i0 < TM) ? M - i0 : TM;
    const int nb = (N - j0 < TN) ? N - j0 : TN;
    alignas(64) float acc[TM][TN] = {};
    alignas(64) float bt[TK][TN];
    for (int k0 = 0; k0 < K; k0 += TK) {
        const int kb = (K - k0 < TK) ? K - k0 : TK;
        for (int j = 0; j < TN; ++j)
            for (int k = 0; k < kb; ++k) bt[k][j] = (j < nb) ? B[(long)(j0 + j) * K + k0 + k] : 0.0f;
        for (int i = 0; i < mb; ++i) {
            const float* a = A + (long)(i0 + i) * K + k0;
            for (int k = 0; k < kb; ++k) {
                const float av = a[k];
                for (int j = 0; j < TN; ++j) acc[i][j] += av * bt[k][j];
            }
        }
    }
    for (int i = 0; i < mb; ++i)
        for (int j = 0; j < nb; ++j) C[(long)(i0 + i) * N + j0 + j] = acc[i][j];
}
}  // namespace

extern "C" void gemm_blocked_omp(const float* A, const float* B, float* C, int M, int N, int K) {
    const int tiles_m = (M + TM - 1) / TM, tiles_n = (N + TN - 1) / TN;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < tiles_m * tiles_n; ++t) tile(A, B, C, M, N, K, (t / tiles_n) * TM, (t % tiles_n) * TN);
}
