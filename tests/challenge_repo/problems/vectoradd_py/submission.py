"""A submission: the sum written into a tensor of its own."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    out = torch.empty_like(a)
    torch.add(a, b, out=out)
    return out
