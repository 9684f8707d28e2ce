// fp32 softmax over the last dimension on the CPU: per row, the max, the sum of exp(x - max),
// then the normalised values (three passes over a row that stays in cache).
#include <cmath>

extern "C" void softmax_rows(const float* X, float* Y, int M, int N) {
    for (long r = 0; r < M; ++r) {
        const float* x = X + r * N;
        float* y = Y + r * N;
        float m = -INFINITY;
        for (int i = 0; i < N; ++i) m = x[i] > m ? x[i] : m;
        float sum = 0.0f;
        for (int i = 0; i < N; ++i) sum += (y[i] = std::exp(x[i] - m));
        const float inv = 1.0f / sum;
        for (int i = 0; i < N; ++i) y[i] *= inv;
    }
}
