/*
 * flopwatch_gpu.h: the few names that differ between HIP and CUDA, so that plain
 * (non matrix-core) kernels compile with hipcc/clang -x hip and with nvcc from one source.
 *
 * The vendor test uses __HIP__/__HIPCC__ (set by the compiler driver) rather than
 * __HIP_PLATFORM_AMD__, which only exists once a HIP header has been included.
 */
#ifndef FLOPWATCH_GPU_H
#define FLOPWATCH_GPU_H

#if defined(__HIP__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define FW_BACKEND_HIP 1
typedef hipStream_t fw_stream_t;
typedef hipError_t fw_error_t;
#define fw_get_last_error hipGetLastError
#define FW_SUCCESS hipSuccess
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#define FW_BACKEND_CUDA 1
typedef cudaStream_t fw_stream_t;
typedef cudaError_t fw_error_t;
#define fw_get_last_error cudaGetLastError
#define FW_SUCCESS cudaSuccess
#else
#error "flopwatch_gpu.h needs a HIP (-x hip) or CUDA (nvcc) compiler"
#endif

/* Triple-chevron launch is accepted by both HIP-Clang and nvcc; the macro keeps call
 * sites identical and names the stream argument explicitly. */
#define FW_LAUNCH(kernel, grid, block, lds_bytes, stream, ...) \
    kernel<<<(grid), (block), (lds_bytes), (stream)>>>(__VA_ARGS__)

/* Callers pass the stream through a C ABI as void*; nullptr means the default stream. */
static inline fw_stream_t fw_stream_from(void* stream) { return (fw_stream_t)stream; }

/* bf16 is kept as its raw 16 bits (unsigned short): Debian's HIP 5.2 headers have no
 * hip_bf16.h, and the upper half of an fp32 is exactly a bf16, so the widening is a shift. */
__device__ __forceinline__ float fw_bf16_to_float(unsigned short bits) {
    return __uint_as_float(((unsigned int)bits) << 16);
}

static inline unsigned int fw_ceil_div(unsigned int a, unsigned int b) { return (a + b - 1) / b; }

#endif /* FLOPWATCH_GPU_H */
