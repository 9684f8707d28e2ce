"""fused_linear_jsd: distillation's loss with both heads in one op (Liger-Kernel's
`liger_fused_linear_jsd(student_input, student_weight, teacher_input, teacher_weight)` with its
defaults: jsd_beta 0.5, temperature 1, no labels). With the student's log-probabilities
log Q = log_softmax(student_input · student_weightᵀ), the teacher's log P =
log_softmax(teacher_input · teacher_weightᵀ) and the mixture Mx = β·P + (1 - β)·Q,
    loss = Σ_rows [β·KL(P ‖ Mx) + (1 - β)·KL(Q ‖ Mx)] / M
— the `jsd` op (student as its input, teacher as its target) on logits never written out.

student_input and teacher_input are [M, H], student_weight and teacher_weight [V, H], row-major
in the job's dtype (one hidden size H for both models; Liger allows two). The output is a 0-d
fp32 tensor (Liger sums the fp32 per-element losses and returns that sum). Counted as compute:
FLOPs = the two heads' products, 4·M·H·V (softmaxes not counted); bytes = the four inputs read
once, the fp32 loss written.
"""

from __future__ import annotations

import ctypes

INPUTS = ("student_input", "student_weight", "teacher_input", "teacher_weight")
OUTPUT = "loss"
DIMS = ("M", "H", "V")
LAYOUTS = ("rows",)
BETA = 0.5
# One fp32 number, about 0.2 nats for two unrelated heads (logits ~N(0, 1) each). Liger and the
# peer form both heads' logits in the input dtype and everything after in fp32, so the loss
# differs only by the logits' roundings, which average out: the peer's relative error measured
# on CPU at M = 512, H = 1024, V = 8192 was 6e-8 in fp32, 4e-7 in fp16 and 4e-6 in bf16. fp32
# allows 1e-5 (accumulation order only); fp16/bf16 1e-3, 250× the bf16 peer's error.
TOLERANCE = {"fp32": (1e-5, 1e-5), "fp16": (1e-3, 1e-3), "bf16": (1e-3, 1e-3)}
# The student's gradients are rounded to the input dtype element by element (not averaged as the
# loss is). The peer's gradient errors against fp64, measured on CPU at M = 128, H = 256, V = 2048
# over three seeds (relative Frobenius, max abs over max |ref|): fp32 9e-7 / 3e-6, bf16 5e-3 /
# 8.7e-3; bf16 allows about 3-4× that. In fp16 the peer's gradients underflow (28% off): fp16
# keeps the loss's tolerance, and a backward check in fp16 fails for the peer too.
GRAD_TOLERANCE = {"fp32": (1e-5, 1e-5), "fp16": (1e-3, 1e-3), "bf16": (2e-2, 3e-2)}
# A backward pass differentiates the student's head only: the teacher is frozen in distillation
# (Liger's LigerFusedLinearJSDFunction returns no gradient for the teacher's input or weight).
GRAD_INPUTS = ("student_input", "student_weight")
PEER_NAME = ("torch eager: both heads in the input dtype, log_softmax in fp32, then β·kl_div(log Mx, P) + "
             "(1-β)·kl_div(log Mx, Q) (Liger's TorchLMHeadJSD)")
ENTRY_NAMES = ("fused_linear_jsd", "linear_jsd", "fused_linear_js_div", "lm_head_jsd",
               "fused_linear_jensen_shannon")


def flops(dims: dict) -> float:
    return 4.0 * dims["M"] * dims["H"] * dims["V"]


def bytes_moved(dims: dict, itemsize: int) -> float:
    m, h, v = dims["M"], dims["H"], dims["V"]
    return float(itemsize * 2 * (m * h + v * h) + 4)


def peak_bytes(dims: dict, itemsize: int) -> float:
    """What a call holds at its peak, for the sizes a draft may ask (`decide.scaling`): the
    student's and the teacher's [M, V] logits, each in the input dtype, as fp32 log-probabilities
    and their backward copies, and again in fp64 in the check's reference. A size grown on the
    inputs alone (H = 4 in Liger's test) asked an H100 for 64 GiB at once."""
    return bytes_moved(dims, itemsize) + 2 * dims["M"] * dims["V"] * (itemsize + 3 * 4 + 2 * 8)


def output_dtype(dtype: str) -> str:
    return "fp32"


def output_shape(dims: dict) -> tuple:
    return ()


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal hidden states and heads of N(0, 1/H) rows for student and teacher
    (independent: the two distributions differ as a student's and teacher's do before
    training), drawn on the generator's device."""
    import torch

    dev, m, h, v = generator.device, dims["M"], dims["H"], dims["V"]
    out = {}
    for who in ("student", "teacher"):
        out[f"{who}_input"] = torch.randn((m, h), generator=generator, dtype=torch.float32, device=dev)
        w = torch.randn((v, h), generator=generator, dtype=torch.float32, device=dev)
        out[f"{who}_weight"] = w / h ** 0.5
    return {name: out[name].to(dtype=dtype, device=device) for name in INPUTS}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    d = {name: t.double() for name, t in inputs.items()}
    log_q = (d["student_input"] @ d["student_weight"].T).log_softmax(dim=-1)
    log_p = (d["teacher_input"] @ d["teacher_weight"].T).log_softmax(dim=-1)
    q, p = log_q.exp(), log_p.exp()
    log_mix = (BETA * p + (1.0 - BETA) * q).log()
    per_row = BETA * (p * (log_p - log_mix)).sum(-1) + (1.0 - BETA) * (q * (log_q - log_mix)).sum(-1)
    return per_row.mean()


def peer_returns(inputs: dict, layout: str):
    """torch eager, as Liger's test computes it: each head in the input dtype, the logits cast
    to fp32 and log-softmaxed, then the JSD of `jsd`'s peer; both [M, V] logits written out."""
    import torch
    import torch.nn.functional as F

    log_q = (inputs["student_input"] @ inputs["student_weight"].T).to(torch.float32).log_softmax(dim=-1)
    log_p = (inputs["teacher_input"] @ inputs["teacher_weight"].T).to(torch.float32).log_softmax(dim=-1)
    log_mix = torch.lerp(log_q.exp(), log_p.exp(), BETA).log()
    loss = (BETA * F.kl_div(log_mix, log_p, reduction="none", log_target=True).sum()
            + (1 - BETA) * F.kl_div(log_mix, log_q, reduction="none", log_target=True).sum())
    return loss / log_q.shape[0]


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (student_input, student_weight, teacher_input,
    teacher_weight, loss, M, H, V); loss is one fp32 element."""
    return [*(ctypes.c_void_p(inputs[name].data_ptr()) for name in INPUTS), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["H"]), ctypes.c_int(dims["V"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (*(inputs[name] for name in INPUTS), out)
