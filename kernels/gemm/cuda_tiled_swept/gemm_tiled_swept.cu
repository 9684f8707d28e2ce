// Swept tiled GEMM, C = A * B^T (A: MxK, B: NxK, both row-major bf16; C: MxN fp32).
// A TILE x TILE block tile walks K in BK steps through double-buffered fp32 shared-memory
// tiles: while the block computes on one buffer, the next K slice is already on its way from
// global memory through registers into the other, so one barrier per step suffices.
// 256 threads form a 16x16 grid; each accumulates a (TILE/16)x(TILE/16) block in registers,
// its rows and columns strided by 16, so that the threads of a warp read consecutive tile rows
// in 128-bit loads along k. TILE and BK are compile-time parameters (-DTILE=128 -DBK=16).
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef TILE
#define TILE 64
#endif
#ifndef BK
#define BK 16
#endif

#define THREADS 256
#define TM (TILE / 16)  // accumulator rows (and columns) per thread
// Tiles are stored row-major with k contiguous: one row per output row (A) or column (B).
// 4 floats of padding keep rows 16-byte aligned and put the 8 rows read by a quarter warp's
// 128-bit loads in 8 different groups of 4 banks.
#define LDT (BK + 4)
#define CHUNKS (TILE * BK / 8)  // 8-element (16-byte) pieces of one operand's K slice
#define CHUNKS_PER_THREAD ((CHUNKS + THREADS - 1) / THREADS)

static_assert(TILE >= 16 && TILE % 16 == 0, "TILE must be a multiple of 16");
static_assert(BK >= 8 && BK % 8 == 0, "BK must be a multiple of 8");

// bf16 is the upper half of an fp32: widening is a shift.
__device__ __forceinline__ float lo_bf16(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_bf16(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// Fetch this thread's pieces of rows [r0, r0 + TILE) x columns [k0, k0 + BK) of X (rows x K),
// as raw bf16 bits; elements outside the matrix read as zero. VEC: K % 8 == 0 and X 16-byte
// aligned, so a piece is entirely inside or entirely outside and is one 128-bit load.
template <bool VEC>
__device__ __forceinline__ void fetch(const uint16_t* __restrict__ X, int rows, int K, int r0, int k0,
                                      uint4 (&reg)[CHUNKS_PER_THREAD]) {
#pragma unroll
  for (int l = 0; l < CHUNKS_PER_THREAD; ++l) {
    const int c = threadIdx.x + l * THREADS;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (CHUNKS % THREADS == 0 || c < CHUNKS) {
      const int r = c / (BK / 8), kc = c % (BK / 8);
      const int gr = r0 + r, gk = k0 + kc * 8;
      if (VEC) {
        if (gr < rows && gk < K) v = __ldg(reinterpret_cast<const uint4*>(X + (size_t)gr * K + gk));
      } else if (gr < rows) {
        const uint16_t* p = X + (size_t)gr * K;
        uint32_t w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const uint32_t lo = gk + 2 * e < K ? p[gk + 2 * e] : 0u;
          const uint32_t hi = gk + 2 * e + 1 < K ? p[gk + 2 * e + 1] : 0u;
          w[e] = lo | (hi << 16);
        }
        v = make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
    reg[l] = v;
  }
}

// Widen the fetched pieces to fp32 and write them into one shared-memory buffer.
__device__ __forceinline__ void stash(float (*__restrict__ Xs)[LDT], const uint4 (&reg)[CHUNKS_PER_THREAD]) {
#pragma unroll
  for (int l = 0; l < CHUNKS_PER_THREAD; ++l) {
    const int c = threadIdx.x + l * THREADS;
    if (CHUNKS % THREADS == 0 || c < CHUNKS) {
      const int r = c / (BK / 8), kc = c % (BK / 8);
      float4* dst = reinterpret_cast<float4*>(&Xs[r][kc * 8]);
      const uint4 v = reg[l];
      dst[0] = make_float4(lo_bf16(v.x), hi_bf16(v.x), lo_bf16(v.y), hi_bf16(v.y));
      dst[1] = make_float4(lo_bf16(v.z), hi_bf16(v.z), lo_bf16(v.w), hi_bf16(v.w));
    }
  }
}

template <bool VEC>
__global__ void __launch_bounds__(THREADS)
gemm_tiled_swept_kernel(const uint16_t* __restrict__ A, const uint16_t* __restrict__ B,
                        float* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(16) float As[2][TILE][LDT];
  __shared__ __align__(16) float Bs[2][TILE][LDT];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
  const int steps = (K + BK - 1) / BK;

  float acc[TM][TM];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TM; ++j) acc[i][j] = 0.0f;

  uint4 ra[CHUNKS_PER_THREAD], rb[CHUNKS_PER_THREAD];
  fetch<VEC>(A, M, K, m0, 0, ra);
  fetch<VEC>(B, N, K, n0, 0, rb);
  stash(As[0], ra);
  stash(Bs[0], rb);
  __syncthreads();

  for (int s = 0; s < steps; ++s) {
    const int cur = s & 1;
    const bool more = s + 1 < steps;
    if (more) {  // the next slice's global loads are in flight during the FMAs below
      fetch<VEC>(A, M, K, m0, (s + 1) * BK, ra);
      fetch<VEC>(B, N, K, n0, (s + 1) * BK, rb);
    }
#pragma unroll
    for (int k = 0; k < BK; k += 4) {
      float4 a[TM], b[TM];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = *reinterpret_cast<const float4*>(&As[cur][ty + 16 * i][k]);
#pragma unroll
      for (int j = 0; j < TM; ++j) b[j] = *reinterpret_cast<const float4*>(&Bs[cur][tx + 16 * j][k]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TM; ++j) {
          float t = acc[i][j];
          t = fmaf(a[i].x, b[j].x, t);
          t = fmaf(a[i].y, b[j].y, t);
          t = fmaf(a[i].z, b[j].z, t);
          t = fmaf(a[i].w, b[j].w, t);
          acc[i][j] = t;
        }
    }
    // The other buffer was last read before the previous barrier: safe to overwrite.
    if (more) {
      stash(As[cur ^ 1], ra);
      stash(Bs[cur ^ 1], rb);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int gm = m0 + ty + 16 * i;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < TM; ++j) {
      const int gn = n0 + tx + 16 * j;  // 16 threads of a row write 16 consecutive floats
      if (gn < N) C[(size_t)gm * N + gn] = acc[i][j];
    }
  }
}

extern "C" void gemm_cuda_tiled_swept(const void* A, const void* B, float* C, int M, int N, int K,
                                      void* stream) {
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  const bool vec = K % 8 == 0 && (uintptr_t)A % 16 == 0 && (uintptr_t)B % 16 == 0;
  if (vec)
    gemm_tiled_swept_kernel<true><<<grid, THREADS, 0, (cudaStream_t)stream>>>(
        (const uint16_t*)A, (const uint16_t*)B, C, M, N, K);
  else
    gemm_tiled_swept_kernel<false><<<grid, THREADS, 0, (cudaStream_t)stream>>>(
        (const uint16_t*)A, (const uint16_t*)B, C, M, N, K);
}
