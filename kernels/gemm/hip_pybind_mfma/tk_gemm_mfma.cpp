// bf16 GEMM on CDNA3 matrix cores behind a pybind11 module, called the way HipKittens' kernels
// are:  import tk_kernel; tk_kernel.dispatch_micro(A, B, C)
// A: MxK bf16, B: NxK bf16 (row-major, contiguous, on the GPU), C: MxN fp32; C = A * B^T.
//
// The kernel is hip_mfma's (64x64 block tile, four waves of v_mfma_f32_32x32x8_bf16, BK = 32
// staged through LDS) with its LDS tiles in dynamic shared memory, like HipKittens: the launch
// sets hipFuncAttributeMaxDynamicSharedMemorySize and the manifest declares the bytes.
// Like HipKittens' pyutils, the binding reads tensors through Python attributes (data_ptr,
// shape, dtype), so it needs pybind11 and Python headers but not torch's C++ API; it launches
// on torch's current stream, which torch events time.
#include <hip/hip_runtime.h>
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

namespace py = pybind11;

typedef short bf16x4_t __attribute__((ext_vector_type(4)));
typedef float f32x16_t __attribute__((ext_vector_type(16)));
typedef unsigned int u32x4_t __attribute__((ext_vector_type(4)));

constexpr int BM = 64, BN = 64, BK = 32, THREADS = 256;
constexpr int LDS_STRIDE = BK + 8;  // 16-byte aligned rows, spread over the LDS banks
constexpr size_t LDS_BYTES = 2 * BM * LDS_STRIDE * sizeof(unsigned short);

// One 64x32 bf16 tile of a row-major matrix (rows x K) into LDS, 8 elements per thread;
// out-of-range elements are zero so partial tiles contribute nothing.
__device__ __forceinline__ void stage_tile(unsigned short* dst, const unsigned short* __restrict__ src,
                                           int rows, int r0, int k0, int K) {
    const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * 8;
    const int gr = r0 + r, gk = k0 + c;
    u32x4_t v = {0u, 0u, 0u, 0u};
    const unsigned short* p = src + (size_t)gr * K + gk;
    if (gr < rows && gk + 8 <= K && (K % 8) == 0) {
        v = *(const u32x4_t*)p;
    } else if (gr < rows) {
        unsigned short tmp[8];
        for (int i = 0; i < 8; ++i) tmp[i] = (gk + i < K) ? p[i] : (unsigned short)0;
        v = *(const u32x4_t*)tmp;
    }
    *(u32x4_t*)&dst[r * LDS_STRIDE + c] = v;
}

__global__ void __launch_bounds__(THREADS)
tk_gemm_mfma(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
             float* __restrict__ C, int M, int N, int K) {
    extern __shared__ __attribute__((aligned(16))) unsigned short lds[];
    unsigned short* As = lds;
    unsigned short* Bs = lds + BM * LDS_STRIDE;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int lane = threadIdx.x % 64, wave = threadIdx.x / 64;
    const int wm = (wave / 2) * 32, wn = (wave % 2) * 32;
    f32x16_t acc = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        stage_tile(As, A, M, m0, k0, K);
        stage_tile(Bs, B, N, n0, k0, K);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            // lane l holds 4 consecutive K-elements of row l%32 (CDNA3 ISA, 32x32x8 operands)
            const int col = kk + 4 * (lane / 32);
            const bf16x4_t a = *(const bf16x4_t*)&As[(wm + lane % 32) * LDS_STRIDE + col];
            const bf16x4_t b = *(const bf16x4_t*)&Bs[(wn + lane % 32) * LDS_STRIDE + col];
            acc = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, acc, 0, 0, 0);
        }
        __syncthreads();
    }
    const int n = n0 + wn + lane % 32;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        const int m = m0 + wm + 8 * (r / 4) + 4 * (lane / 32) + r % 4;
        if (m < M && n < N) C[(size_t)m * N + n] = acc[r];
    }
}

// A device tensor as the kernel sees it: address and sizes, after the checks a user would
// otherwise discover as a wrong answer.
struct Matrix {
    uintptr_t ptr;
    int rows, cols;
};

static Matrix matrix(const py::object& t, const char* name, const char* dtype) {
    const std::string what(name);
    if (py::str(t.attr("dtype")).cast<std::string>() != dtype)
        throw std::invalid_argument(what + " must be " + dtype);
    if (t.attr("device").attr("type").cast<std::string>() != "cuda")
        throw std::invalid_argument(what + " must be on the GPU");
    if (!t.attr("is_contiguous")().cast<bool>()) throw std::invalid_argument(what + " must be contiguous");
    py::tuple shape = t.attr("shape");
    if (shape.size() != 2) throw std::invalid_argument(what + " must be 2-D");
    return {t.attr("data_ptr")().cast<uintptr_t>(), shape[0].cast<int>(), shape[1].cast<int>()};
}

void dispatch_micro(py::object A, py::object B, py::object C) {
    const Matrix a = matrix(A, "A", "torch.bfloat16"), b = matrix(B, "B", "torch.bfloat16");
    const Matrix c = matrix(C, "C", "torch.float32");
    const int M = a.rows, K = a.cols, N = b.rows;
    if (b.cols != K || c.rows != M || c.cols != N)
        throw std::invalid_argument("shapes must be A MxK, B NxK, C MxN");
    const uintptr_t stream = py::module_::import("torch").attr("cuda").attr("current_stream")()
                                 .attr("cuda_stream").cast<uintptr_t>();
    hipFuncSetAttribute((const void*)tk_gemm_mfma, hipFuncAttributeMaxDynamicSharedMemorySize, LDS_BYTES);
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    hipLaunchKernelGGL(tk_gemm_mfma, grid, dim3(THREADS), LDS_BYTES, (hipStream_t)stream,
                       (const unsigned short*)a.ptr, (const unsigned short*)b.ptr, (float*)c.ptr, M, N, K);
    const hipError_t err = hipGetLastError();
    if (err != hipSuccess) throw std::runtime_error(std::string("launch failed: ") + hipGetErrorString(err));
}

PYBIND11_MODULE(tk_kernel, m) {
    m.doc() = "bf16 MFMA GEMM, C = A * B^T (flopwatch's bundled HipKittens-style binding)";
    m.def("dispatch_micro", &dispatch_micro, "C = A * B^T (bf16 in, fp32 out)");
}
