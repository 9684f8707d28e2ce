import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
torch::Tensor add_forward(torch::Tensor a, torch::Tensor b) {
    return a + b  // a semicolon short
}
"""

add_broken = load_inline(name="add_broken", cpp_sources=source, functions=["add_forward"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return add_broken.add_forward(a, b)
