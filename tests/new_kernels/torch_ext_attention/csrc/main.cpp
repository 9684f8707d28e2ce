// The module's Python face: forward(Q, K, V) -> O, defined in flash.cu.
#include <torch/extension.h>

torch::Tensor forward(torch::Tensor Q, torch::Tensor K, torch::Tensor V);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", torch::wrap_pybind_function(forward), "O = attention(Q, K, V), fp32, B x H x N x d");
}
