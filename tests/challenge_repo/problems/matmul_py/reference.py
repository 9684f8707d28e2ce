"""Matmul: an m × k by k × n product of fp16 matrices with entries in [0, 1)."""

import torch
from task import input_t, output_t
from utils import default_device, make_match_reference


def generate_input(m: int, n: int, k: int, seed: int) -> input_t:
    device = default_device()
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    a = torch.rand(m, k, dtype=torch.float16, device=device, generator=gen)
    b = torch.rand(k, n, dtype=torch.float16, device=device, generator=gen)
    return a, b


def ref_kernel(data: input_t) -> output_t:
    a, b = data
    if a.device.type == "cpu":  # fp16 products are summed in fp32 on the host, as GPU libraries sum them
        return (a.float() @ b.float()).half()
    return a @ b


# Sums of k products of [0, 1) entries: an fp16 result holds about 3 significant digits.
check_implementation = make_match_reference(ref_kernel, rtol=2e-2, atol=1e-3)
