"""Vector add: two fp16 matrices of size × size, summed elementwise."""

import torch
from task import input_t, output_t
from utils import default_device, make_match_reference


def generate_input(size: int, seed: int) -> input_t:
    """Two size × size fp16 matrices, normally distributed, on the default device."""
    device = default_device()
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    a = torch.randn(size, size, dtype=torch.float16, device=device, generator=gen)
    b = torch.randn(size, size, dtype=torch.float16, device=device, generator=gen)
    return a, b


def ref_kernel(data: input_t) -> output_t:
    a, b = data
    return a + b


check_implementation = make_match_reference(ref_kernel)
