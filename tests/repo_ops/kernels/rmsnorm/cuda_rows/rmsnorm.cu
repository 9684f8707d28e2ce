// RMSNorm of one row per block of 256 threads: the sum of squares reduced through shared
// memory, then each element scaled by the inverse root and its weight. Arguments in the
// order flopwatch passes a repository op's by default: inputs, output, sizes, scalars.
extern "C" __global__ void __launch_bounds__(256) rmsnorm(const float* X, const float* W, float* Y, int M, int N,
                                                          float eps) {
    __shared__ float partial[256];
    const float* x = X + (long)blockIdx.x * N;
    float* y = Y + (long)blockIdx.x * N;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < N; i += 256) sum += x[i] * x[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int s = 128; s > 0; s /= 2) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    const float inv = rsqrtf(partial[0] / N + eps);
    for (int i = threadIdx.x; i < N; i += 256) y[i] = x[i] * inv * W[i];
}
