// fp32 copy, dst[i] = src[i]: consecutive threads touch consecutive words, so a warp's 32 loads
// fall in 4 sectors of 32 bytes (the ideal): the calibration point of coalescing_pct (100%).
#include <cuda_runtime.h>

__global__ void copy_coalesced_kernel(const float* __restrict__ src, float* __restrict__ dst, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

extern "C" void copy_coalesced(const void* src, void* dst, long long n, void* stream) {
  if (n <= 0) return;
  long long blocks = (n + 255) / 256;
  copy_coalesced_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>((const float*)src, (float*)dst, n);
}
