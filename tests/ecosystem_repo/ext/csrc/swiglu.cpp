// The kernel's unit needs ATen alone, as many extensions' kernel files do; the binding unit
// (bind.cpp) brings torch's Python binding header and pybind11.
#include <ATen/ATen.h>

at::Tensor swiglu(at::Tensor a, at::Tensor b) {
    return at::silu(a) * b;
}
