"""Model profiles and the sweeps derived from them at run time, as Liger-Kernel's
benchmark_model_configs.py derives them: a probe at a small size measures the bytes per token,
and the token counts swept are the powers of two that fit a memory budget."""

import math

import torch
from toy_kernels.functional import toy_norm

MODELS = {
    "tiny": {"hidden_size": 64, "vocab_size": 80},
    "small": {"hidden_size": 96, "vocab_size": 112},
    "wide": {"hidden_size": 48, "vocab_size": 144},
}
# What the sweep may use per call (a GPU node would take a fraction of its memory).
BUDGET_BYTES = 512 << 10
PROBE_TOKENS = 96
SMALLEST = 16


def probe_norm(hidden_size: int) -> int:
    """Bytes per token of the norm's forward and backward at PROBE_TOKENS: its input, output
    and the input's gradient."""
    x = torch.randn(PROBE_TOKENS, hidden_size, requires_grad=True)
    w = torch.ones(hidden_size, requires_grad=True)
    y = toy_norm(x, w)  # the kernel itself, as the probe
    y.backward(torch.randn_like(y))
    return (x.nbytes + y.nbytes + x.grad.nbytes) // PROBE_TOKENS


def norm_sweep(model: str) -> list[int]:
    """Token counts of the norm's sweep for `model`."""
    per_token = probe_norm(MODELS[model]["hidden_size"])
    largest = BUDGET_BYTES // per_token
    return [2**i for i in range(int(math.log2(SMALLEST)), int(math.log2(largest)) + 1)]


def cross_entropy_sweep(tokens: int) -> list[tuple[str, int, int]]:
    """(model, BT, V) of the model-config sweep: every model at the same token count."""
    return [(name, tokens, cfg["vocab_size"]) for name, cfg in MODELS.items()]
