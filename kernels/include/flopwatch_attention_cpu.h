/*
 * flopwatch_attention_cpu.h: the CPU attention forward of the bundled suite, written once for
 * its non-causal and causal variants (kernels/attention/cpp_naive, cpp_causal), fp32: per head,
 * per query row, the scores against every key, their softmax (max subtracted), then the
 * weighted sum of V. With causal set, row i attends to keys 0..i only.
 */
#ifndef FLOPWATCH_ATTENTION_CPU_H
#define FLOPWATCH_ATTENTION_CPU_H

#include <cmath>
#include <vector>

template <bool causal>
inline void fw_attention_cpu(const float* Q, const float* K, const float* V, float* O,
                             int B, int H, int S, int D, float scale) {
    std::vector<float> p(S);
    for (long bh = 0; bh < (long)B * H; ++bh) {
        const float* q = Q + bh * S * D;
        const float* k = K + bh * S * D;
        const float* v = V + bh * S * D;
        float* o = O + bh * S * D;
        for (int i = 0; i < S; ++i) {
            const int keys = causal ? i + 1 : S;
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

#endif
