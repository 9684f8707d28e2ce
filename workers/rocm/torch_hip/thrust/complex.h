// Declarations only, for the device-code analysis of a hipified torch extension
// (workers/torch_ext/gfx942.py): torch's headers (torch/headeronly/util/complex.h) include <thrust/complex.h> when
// compiled as HIP, and a CPU or CUDA torch's node has no rocThrust. Nothing here is linked.
#pragma once
namespace thrust {
template <typename T> struct complex {
  __host__ __device__ complex(const T& re = T(), const T& im = T());
  __host__ __device__ T real() const;
  __host__ __device__ T imag() const;
};
#define FLOPWATCH_THRUST_FN(name) template <typename... A> __host__ __device__ auto name(const A&...) -> complex<float>;
FLOPWATCH_THRUST_FN(abs) FLOPWATCH_THRUST_FN(arg) FLOPWATCH_THRUST_FN(norm) FLOPWATCH_THRUST_FN(conj)
FLOPWATCH_THRUST_FN(proj) FLOPWATCH_THRUST_FN(polar) FLOPWATCH_THRUST_FN(exp) FLOPWATCH_THRUST_FN(log)
FLOPWATCH_THRUST_FN(log10) FLOPWATCH_THRUST_FN(sqrt) FLOPWATCH_THRUST_FN(pow) FLOPWATCH_THRUST_FN(sin)
FLOPWATCH_THRUST_FN(cos) FLOPWATCH_THRUST_FN(tan) FLOPWATCH_THRUST_FN(asin) FLOPWATCH_THRUST_FN(acos)
FLOPWATCH_THRUST_FN(atan) FLOPWATCH_THRUST_FN(sinh) FLOPWATCH_THRUST_FN(cosh) FLOPWATCH_THRUST_FN(tanh)
FLOPWATCH_THRUST_FN(asinh) FLOPWATCH_THRUST_FN(acosh) FLOPWATCH_THRUST_FN(atanh)
#undef FLOPWATCH_THRUST_FN
}  // namespace thrust
