// Attention forward on the CPU, fp32: per head, per query row, the scores against every key,
// their softmax (max subtracted), then the weighted sum of V. CAUSAL_ONLY_PAST limits row i
// to keys 0..i (the causal variant builds this file with -DCAUSAL_ONLY_PAST=1).
#include <cmath>
#include <vector>

#ifndef CAUSAL_ONLY_PAST
#define CAUSAL_ONLY_PAST 0
#endif

extern "C" void attention_naive(const float* Q, const float* K, const float* V, float* O,
                                int B, int H, int S, int D, float scale) {
    std::vector<float> p(S);
    for (long bh = 0; bh < (long)B * H; ++bh) {
        const float* q = Q + bh * S * D;
        const float* k = K + bh * S * D;
        const float* v = V + bh * S * D;
        float* o = O + bh * S * D;
        for (int i = 0; i < S; ++i) {
            const int keys = CAUSAL_ONLY_PAST ? i + 1 : S;
            float m = -INFINITY;
            for (int j = 0; j < keys; ++j) {
                float s = 0.0f;
                for (int d = 0; d < D; ++d) s += q[(long)i * D + d] * k[(long)j * D + d];
                p[j] = s * scale;
                m = p[j] > m ? p[j] : m;
            }
            float sum = 0.0f;
            for (int j = 0; j < keys; ++j) sum += (p[j] = std::exp(p[j] - m));
            for (int d = 0; d < D; ++d) {
                float acc = 0.0f;
                for (int j = 0; j < keys; ++j) acc += p[j] * v[(long)j * D + d];
                o[(long)i * D + d] = acc / sum;
            }
        }
    }
}
