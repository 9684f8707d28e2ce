// Causal attention forward on the CPU, fp32: row i attends to keys 0..i only (the loop:
// kernels/include/flopwatch_attention_cpu.h).
#include "flopwatch_attention_cpu.h"

extern "C" void attention_naive(const float* Q, const float* K, const float* V, float* O,
                                int B, int H, int S, int D, float scale) {
    fw_attention_cpu<true>(Q, K, V, O, B, H, S, D, scale);
}
