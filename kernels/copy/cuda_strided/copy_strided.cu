// fp32 copy, dst[i] = src[i], with deliberately uncoalesced reads and coalesced writes.
// Each warp copies a 32x32 chunk (1024 consecutive words). In the read phase lane l reads
// row l of the chunk (words l*32 + c for c = 0..31), so one load instruction touches 32 words
// 128 bytes apart: 32 sectors per request, the worst case coalescing_pct must report (12.5%).
// The words go through shared memory and are written row by row, consecutive lanes on
// consecutive words, so dst still equals src and only the loads are strided.
#include <cuda_runtime.h>

#define WARPS 8

__global__ void __launch_bounds__(WARPS * 32)
copy_strided_kernel(const float* __restrict__ src, float* __restrict__ dst, long long n) {
  __shared__ float tile[WARPS][32][33];  // +1 pad: the column-wise reads below avoid bank conflicts
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  long long base = ((long long)blockIdx.x * WARPS + warp) * 1024;
  for (int c = 0; c < 32; ++c) {
    long long i = base + (long long)lane * 32 + c;
    tile[warp][lane][c] = i < n ? src[i] : 0.0f;
  }
  __syncwarp();
  for (int r = 0; r < 32; ++r) {
    long long i = base + (long long)r * 32 + lane;
    if (i < n) dst[i] = tile[warp][r][lane];
  }
}

extern "C" void copy_strided(const void* src, void* dst, long long n, void* stream) {
  if (n <= 0) return;
  long long blocks = (n + WARPS * 1024 - 1) / (WARPS * 1024);
  copy_strided_kernel<<<(unsigned)blocks, WARPS * 32, 0, (cudaStream_t)stream>>>((const float*)src, (float*)dst, n);
}
