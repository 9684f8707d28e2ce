"""kl_div: loss = Σ target · (log target - input) / (M·V), the KL divergence KL(target ‖ exp(input))
of distillation losses, with Liger-Kernel's defaults (`liger_kl_div(input, target)`: reduction
"mean" — over every element, as torch's "mean" is —, target as probabilities, eps 1e-10 for
log 0; `torch.nn.functional.kl_div`).

input is [M, V] log-probabilities (log_softmax of logits) and target [M, V] probabilities, both
in the job's dtype. The output is a 0-d fp32 tensor (Liger accumulates and returns fp32 for
every input dtype). Memory-bound: bytes = both inputs read once and the loss written; no FLOPs
are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("input", "target")
OUTPUT = "loss"
DIMS = ("M", "V")
LAYOUTS = ("rows",)
EPS = 1e-10  # Liger's: target·log(max(target, eps)), so a zero target adds 0
# One number. Liger sums the fp16/bf16 inputs in fp32 (about 1e-6); torch eager in bf16 returns
# a bf16 loss, half an ulp (up to 0.4%) plus its summation off (measured 2.4e-3 on softmax rows,
# M = 512, V = 8192), so bf16 allows 1%; fp16 (ulp ≤ 1e-3) 2e-3.
TOLERANCE = {"fp32": (1e-5, 1e-5), "fp16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2)}
# A backward pass differentiates the predictions, not the target distribution (Liger's
# LigerKLDivLossFunction returns no gradient for y_true).
GRAD_INPUTS = ("input",)
PEER_NAME = 'torch.nn.functional.kl_div(input, target, reduction="mean")'
ENTRY_NAMES = ("kl_div", "kldiv", "kl_divergence", "kl_div_loss", "kldiv_loss", "kl_loss")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(2 * itemsize * dims["M"] * dims["V"] + 4)


def output_dtype(dtype: str) -> str:
    return "fp32"


def output_shape(dims: dict) -> tuple:
    return ()


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Two unrelated distributions per row, as Liger's tests draw them: input the log_softmax
    of standard normal logits, target the softmax of others; drawn on the generator's device."""
    import torch

    dev, shape = generator.device, (dims["M"], dims["V"])
    logp = torch.randn(shape, generator=generator, dtype=torch.float32, device=dev).log_softmax(dim=-1)
    target = torch.randn(shape, generator=generator, dtype=torch.float32, device=dev).softmax(dim=-1)
    return {"input": logp.to(dtype=dtype, device=device), "target": target.to(dtype=dtype, device=device)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    x, t = inputs["input"].double(), inputs["target"].double()
    return (t * (t.clamp_min(EPS).log() - x)).mean()


def peer_returns(inputs: dict, layout: str):
    """torch's kl_div with reduction "mean", in the inputs' dtype, the loss as fp32 (Liger's
    output dtype). Called as `torch.kl_div`, the kernel F.kl_div calls (reduction 1 = mean):
    F.kl_div warns at every new call site that "mean" will change meaning."""
    import torch

    return torch.kl_div(inputs["input"], inputs["target"], 1, log_target=False).float()


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (input, target, loss, M, V); loss is one fp32 element."""
    return [ctypes.c_void_p(inputs["input"].data_ptr()), ctypes.c_void_p(inputs["target"].data_ptr()),
            ctypes.c_void_p(out.data_ptr()), ctypes.c_int(dims["M"]), ctypes.c_int(dims["V"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["input"], inputs["target"], out)
