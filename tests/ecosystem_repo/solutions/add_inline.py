import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
torch::Tensor add_forward(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + pb[i];
    return out;
}
"""

add_ext = load_inline(name="add_ext", cpp_sources=source, functions=["add_forward"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return add_ext.add_forward(a.contiguous(), b.contiguous())
