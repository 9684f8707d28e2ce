// Row softmax for NVRTC through cupy.RawKernel (see run.py): one block per row, the block's
// reduction buffer in dynamic shared memory (one float per thread).
extern "C" __global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    extern __shared__ float red[];
    const float* in = x + (long)blockIdx.x * cols;
    float* out = y + (long)blockIdx.x * cols;
    float m = -3.0e38f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, in[i]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) sum += expf(in[i] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    for (int i = threadIdx.x; i < cols; i += blockDim.x) out[i] = expf(in[i] - m) / red[0];
}
