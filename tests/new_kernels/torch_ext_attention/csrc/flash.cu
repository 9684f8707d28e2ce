// A small tiled attention forward pass in fp32: each block owns one (batch, head) pair and walks
// the sequence in Br-row tiles of Q against Bc-column tiles of K and V, keeping the running
// row max (m) and normaliser (l) in global memory between tiles.
#include <torch/types.h>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void forward_kernel(const float* Q, const float* K, const float* V, const int N, const int d,
                               const int Tc, const int Tr, const int Bc, const int Br, const float softmax_scale,
                               float* l, float* m, float* O) {
    const int tx = threadIdx.x;
    const int head = blockIdx.x * gridDim.y + blockIdx.y;
    const int qkv_offset = head * N * d, lm_offset = head * N;
    extern __shared__ float sram[];
    float* Qi = sram;
    float* Kj = sram + Bc * d;
    float* Vj = Kj + Bc * d;
    float* S = Vj + Bc * d;
    for (int j = 0; j < Tc; ++j) {
        for (int x = 0; x < d; ++x) {
            Kj[tx * d + x] = K[qkv_offset + j * Bc * d + tx * d + x];
            Vj[tx * d + x] = V[qkv_offset + j * Bc * d + tx * d + x];
        }
        __syncthreads();
        for (int i = 0; i < Tr; ++i) {
            for (int x = 0; x < d; ++x) Qi[tx * d + x] = Q[qkv_offset + i * Br * d + tx * d + x];
            const float row_m_prev = m[lm_offset + i * Br + tx], row_l_prev = l[lm_offset + i * Br + tx];
            float row_m = -INFINITY;
            for (int y = 0; y < Bc; ++y) {
                float sum = 0.0f;
                for (int x = 0; x < d; ++x) sum += Qi[tx * d + x] * Kj[y * d + x];
                S[Bc * tx + y] = sum * softmax_scale;
                row_m = fmaxf(row_m, S[Bc * tx + y]);
            }
            float row_l = 0.0f;
            for (int y = 0; y < Bc; ++y) {
                S[Bc * tx + y] = __expf(S[Bc * tx + y] - row_m);
                row_l += S[Bc * tx + y];
            }
            const float row_m_new = fmaxf(row_m_prev, row_m);
            const float row_l_new = __expf(row_m_prev - row_m_new) * row_l_prev + __expf(row_m - row_m_new) * row_l;
            for (int x = 0; x < d; ++x) {
                float pv = 0.0f;
                for (int y = 0; y < Bc; ++y) pv += S[Bc * tx + y] * Vj[y * d + x];
                float* o = &O[qkv_offset + i * Br * d + tx * d + x];
                *o = (row_l_prev * __expf(row_m_prev - row_m_new) * *o + __expf(row_m - row_m_new) * pv) / row_l_new;
            }
            m[lm_offset + i * Br + tx] = row_m_new;
            l[lm_offset + i * Br + tx] = row_l_new;
        }
        __syncthreads();
    }
}

torch::Tensor forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V) {
    const int Bc = 32;
    const int Br = 32;
    const int B = Q.size(0);
    const int nh = Q.size(1);
    const int N = Q.size(2);
    const int d = Q.size(3);
    const int Tc = ceil((float)N / Bc);
    const int Tr = ceil((float)N / Br);
    const float softmax_scale = 1.0 / sqrt(d);

    auto O = torch::zeros_like(Q);
    auto l = torch::zeros({B, nh, N}, Q.options());
    auto m = torch::full({B, nh, N}, -INFINITY, Q.options());

    const int sram_size = (3 * Bc * d * sizeof(float)) + (Bc * Br * sizeof(float));
    dim3 grid_dim(B, nh);
    dim3 block_dim(Bc);
    forward_kernel<<<grid_dim, block_dim, sram_size>>>(
        Q.data_ptr<float>(), K.data_ptr<float>(), V.data_ptr<float>(), N, d, Tc, Tr, Bc, Br, softmax_scale,
        l.data_ptr<float>(), m.data_ptr<float>(), O.data_ptr<float>());
    return O;
}
