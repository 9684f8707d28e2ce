#include <cstdio>
#include <cstring>

static bool flooded = false;

extern "C" void gemm_flood(const float* A, const float* B, float* C, int M, int N, int K) {
    if (!flooded) {
        flooded = true;
        static char line[1024];
        memset(line, 'x', sizeof line - 1);
        line[sizeof line - 1] = '\n';
        for (int i = 0; i < 100 * 1024; ++i) fwrite(line, 1, sizeof line, stdout);
        fflush(stdout);
    }
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[(long)i * K + k] * B[(long)j * K + k];
            C[(long)i * N + j] = acc;
        }
}
