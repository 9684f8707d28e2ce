#include <torch/extension.h>

torch::Tensor swiglu(torch::Tensor a, torch::Tensor b) {
    return torch::silu(a) * b;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("swiglu", &swiglu, "silu(a) * b");
}
