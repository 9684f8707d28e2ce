"""jsd: the generalised Jensen-Shannon divergence of distillation losses, with Liger-Kernel's
defaults (`liger_jsd(input, target)`: beta 0.5, no labels): with Q = exp(input), P = exp(target)
and the mixture Mx = β·P + (1 - β)·Q,
    loss = Σ_rows [β·KL(P ‖ Mx) + (1 - β)·KL(Q ‖ Mx)] / M   (a mean over rows, "batchmean").

input and target are [M, V] log-probabilities (log_softmax of logits) in the job's dtype. The
output is a 0-d tensor in the input's dtype (Liger sums in fp32 and casts back). Memory-bound:
bytes = both inputs read once and the loss written; no FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("input", "target")
OUTPUT = "loss"
DIMS = ("M", "V")
LAYOUTS = ("rows",)
BETA = 0.5
# One number, summed in fp32 by Liger and by the peer; an fp16/bf16 loss is rounded once (half an
# ulp: up to 0.4% in bf16, 5e-4 in fp16), and a kernel's own rounding may add as much.
TOLERANCE = {"fp32": (1e-5, 1e-5), "fp16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2)}
# A backward pass differentiates the student's log-probabilities, not the teacher's (Liger's
# LigerJSDFunction returns no gradient for the target).
GRAD_INPUTS = ("input",)
PEER_NAME = "torch eager JSD: β·kl_div(log Mx, P) + (1-β)·kl_div(log Mx, Q) in fp32 (Liger's test)"
ENTRY_NAMES = ("jsd", "js_div", "js_divergence", "jensen_shannon", "jensen_shannon_divergence", "jsd_loss")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(itemsize * (2 * dims["M"] * dims["V"] + 1))


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple:
    return ()


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Two log_softmax rows of standard normal logits (student and teacher), as Liger's tests
    draw them, on the generator's device."""
    import torch

    dev, shape = generator.device, (dims["M"], dims["V"])
    return {name: torch.randn(shape, generator=generator, dtype=torch.float32, device=dev).log_softmax(dim=-1)
            .to(dtype=dtype, device=device) for name in INPUTS}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    log_q, log_p = inputs["input"].double(), inputs["target"].double()
    q, p = log_q.exp(), log_p.exp()
    log_mix = (BETA * p + (1.0 - BETA) * q).log()
    per_row = BETA * (p * (log_p - log_mix)).sum(-1) + (1.0 - BETA) * (q * (log_q - log_mix)).sum(-1)
    return per_row.mean()


def peer_returns(inputs: dict, layout: str):
    """torch eager, as Liger's test computes JSD (torch has no JSD function): in fp32, the loss
    cast back to the input's dtype."""
    import torch
    import torch.nn.functional as F

    log_q, log_p = inputs["input"].float(), inputs["target"].float()
    log_mix = torch.lerp(log_q.exp(), log_p.exp(), BETA).log()
    loss = (BETA * F.kl_div(log_mix, log_p, reduction="none", log_target=True).sum()
            + (1 - BETA) * F.kl_div(log_mix, log_q, reduction="none", log_target=True).sum())
    return (loss / log_q.shape[0]).to(inputs["input"].dtype)


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (input, target, loss, M, V); loss is one element."""
    return [ctypes.c_void_p(inputs["input"].data_ptr()), ctypes.c_void_p(inputs["target"].data_ptr()),
            ctypes.c_void_p(out.data_ptr()), ctypes.c_int(dims["M"]), ctypes.c_int(dims["V"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["input"], inputs["target"], out)
