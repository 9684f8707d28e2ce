#include <torch/extension.h>

torch::Tensor swiglu(torch::Tensor a, torch::Tensor b) {
    return torch::silu(a) * b;
}
