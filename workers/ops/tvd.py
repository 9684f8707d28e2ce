"""tvd: the total variation distance of two distributions per row, with Liger-Kernel's defaults
(`liger_tvd(input, target)`: reduction "mean", over every element, no labels):
    loss = Σ ½·|input - target| / (M·V).

input and target are [M, V] probabilities (softmax rows) in the job's dtype. The output is a 0-d
fp32 tensor (Liger accumulates and returns fp32 for every input dtype). Memory-bound: bytes =
both inputs read once and the loss written; no FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("input", "target")
OUTPUT = "loss"
DIMS = ("M", "V")
LAYOUTS = ("rows",)
# One number. Liger sums in fp32 (about 1e-6); torch eager in fp16/bf16 returns a rounded loss
# (half an ulp: up to 0.4% in bf16) after rounding the differences (measured 2.4e-3 in bf16).
TOLERANCE = {"fp32": (1e-5, 1e-5), "fp16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2)}
# A backward pass differentiates the input distribution, not the target (Liger's
# LigerTVDLossFunction returns no gradient for it).
GRAD_INPUTS = ("input",)
PEER_NAME = "(torch.abs(input - target) / 2).mean() (torch eager, Liger's test)"
ENTRY_NAMES = ("tvd", "tv_distance", "total_variation", "total_variation_distance", "tvd_loss")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(2 * itemsize * dims["M"] * dims["V"] + 4)


def output_dtype(dtype: str) -> str:
    return "fp32"


def output_shape(dims: dict) -> tuple:
    return ()


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Two softmax rows of standard normal logits, as Liger's tests draw them, on the
    generator's device."""
    import torch

    dev, shape = generator.device, (dims["M"], dims["V"])
    return {name: torch.randn(shape, generator=generator, dtype=torch.float32, device=dev).softmax(dim=-1)
            .to(dtype=dtype, device=device) for name in INPUTS}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    return 0.5 * (inputs["input"].double() - inputs["target"].double()).abs().mean()


def peer_returns(inputs: dict, layout: str):
    """torch eager in the inputs' dtype, the loss as fp32 (Liger's output dtype)."""
    import torch

    return (torch.abs(inputs["input"] - inputs["target"]) / 2.0).mean().float()


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (input, target, loss, M, V); loss is one fp32 element."""
    return [ctypes.c_void_p(inputs["input"].data_ptr()), ctypes.c_void_p(inputs["target"].data_ptr()),
            ctypes.c_void_p(out.data_ptr()), ctypes.c_int(dims["M"]), ctypes.c_int(dims["V"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["input"], inputs["target"], out)
