"""cross_entropy: loss = mean over rows m of (log Σ_v exp(input[m, v]) - input[m, target[m]]),
the language-model loss over a vocabulary (Liger-Kernel's `liger_cross_entropy(input, target)`
with its defaults: reduction "mean", no ignored rows, no label smoothing, no z-loss;
`torch.nn.functional.cross_entropy`).

input is [M, V] logits row-major in the job's dtype (M tokens, V the vocabulary); target is [M]
int64 class ids in [0, V). The output is a 0-d tensor in the input's dtype (as Liger returns it).
Memory-bound: bytes = the logits read once, the targets read once, the loss written; no FLOPs
are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("input", "target")
OUTPUT = "loss"
DIMS = ("M", "V")
LAYOUTS = ("rows",)
# One number: the two errors are the same relative error. Row losses are computed in fp32 by
# Liger and by torch, but an fp16/bf16 loss is one rounded number: one bf16 ulp is 0.4-0.8% of
# it, and torch's CPU cross_entropy in bf16 lands a whole ulp off (measured 0.94% at M = 8192,
# V = 2048), so bf16 allows two ulps; fp16 (ulp ≤ 1e-3) two as well; fp32 catches 1e-5.
TOLERANCE = {"fp32": (1e-5, 1e-5), "fp16": (2e-3, 2e-3), "bf16": (2e-2, 2e-2)}
PEER_NAME = "torch.nn.functional.cross_entropy"
ENTRY_NAMES = ("cross_entropy", "crossentropy", "cross_entropy_loss", "crossentropy_loss", "ce_loss", "xentropy",
               "softmax_cross_entropy")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(itemsize * (dims["M"] * dims["V"] + 1) + 8 * dims["M"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple:
    return ()


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal logits and uniform int64 targets, drawn on the generator's device."""
    import torch

    dev, m, v = generator.device, dims["M"], dims["V"]
    logits = torch.randn((m, v), generator=generator, dtype=torch.float32, device=dev)
    target = torch.randint(0, v, (m,), generator=generator, dtype=torch.int64, device=dev)
    return {"input": logits.to(dtype=dtype, device=device), "target": target.to(device=device)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    x, target = inputs["input"].double(), inputs["target"]
    top = x.max(dim=-1, keepdim=True).values  # exp of the shifted row cannot overflow
    lse = top.squeeze(-1) + (x - top).exp().sum(dim=-1).log()
    return (lse - x.gather(-1, target[:, None]).squeeze(-1)).mean()


def peer_returns(inputs: dict, layout: str):
    """torch's cross_entropy (log_softmax, then nll_loss), returning the loss."""
    import torch.nn.functional as F

    return F.cross_entropy(inputs["input"], inputs["target"])


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (input, target, loss, M, V); target is int64, loss one
    element of the input's dtype."""
    return [ctypes.c_void_p(inputs["input"].data_ptr()), ctypes.c_void_p(inputs["target"].data_ptr()),
            ctypes.c_void_p(out.data_ptr()), ctypes.c_int(dims["M"]), ctypes.c_int(dims["V"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["input"], inputs["target"], out)
