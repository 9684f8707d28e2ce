"""modulated_rms_norm: RMSNorm with an AdaLN modulation, as Diffusion Transformers condition
each block on the timestep (Liger-Kernel's `liger_modulated_rms_norm(X, W, scale, shift, eps)`
with its defaults: offset 0, "llama" casting):
    Y[b, t, :] = X[b, t, :] / sqrt(mean(X[b, t, :]²) + eps) · W · (1 + scale[b, :]) + shift[b, :].

X and Y are [B, T, N] (batch, tokens, hidden), W is [N], scale and shift are [B, N] — one
modulation per sample, shared along its tokens (Liger's "batch" mode, as its functional test
draws them) — all in one dtype; eps is one of the op's scalars (1e-6, Liger's default).
Memory-bound: bytes = X read once, W, scale and shift read once, Y written once; no FLOPs are
counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X", "W", "scale", "shift")
OUTPUT = "Y"
DIMS = ("B", "T", "N")
LAYOUTS = ("rows",)
SCALARS = ("eps",)
EPS = 1e-6
# As rms_norm: the mean of squares in fp32 (Liger and torch); fp16/bf16 round the normalised row,
# the product with W, with (1 + scale) and the sum with shift — one rounding more than rms_norm's
# two, each half an ulp. The peer measured on CPU at B = 4, T = 1024, N = 4096 (relative
# Frobenius / max abs over max|ref|): fp32 8e-8 / 2e-7, fp16 4e-4 / 1e-3, bf16 3.4e-3 / 8e-3;
# Liger's own bf16 test allows 1e-1 absolute. rms_norm's tolerances hold with 2.5-6× room.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = "torch eager: F.rms_norm(X, W) * (1 + scale) + shift"
ENTRY_NAMES = ("modulated_rms_norm", "modulated_rmsnorm", "adaln_rms_norm", "adaln_rmsnorm",
               "rms_norm_modulate", "ada_rms_norm")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    b, t, n = dims["B"], dims["T"], dims["N"]
    return float(itemsize * (2 * b * t * n + n + 2 * b * n))


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int, int]:
    return (dims["B"], dims["T"], dims["N"])


def scalars(dims: dict) -> dict:
    return {"eps": EPS}


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal hidden states, a weight near 1, scale and shift of N(0, 0.1²) per sample
    (as Liger's tests draw them), drawn on the generator's device."""
    import torch

    dev, b, n = generator.device, dims["B"], dims["N"]
    x = torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=dev)
    w = 1.0 + 0.1 * torch.randn((n,), generator=generator, dtype=torch.float32, device=dev)
    scale = 0.1 * torch.randn((b, n), generator=generator, dtype=torch.float32, device=dev)
    shift = 0.1 * torch.randn((b, n), generator=generator, dtype=torch.float32, device=dev)
    return {name: t.to(dtype=dtype, device=device) for name, t in zip(INPUTS, (x, w, scale, shift))}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x, w = inputs["X"].double(), inputs["W"].double()
    scale, shift = inputs["scale"].double()[:, None, :], inputs["shift"].double()[:, None, :]
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * w * (1.0 + scale) + shift


def peer_returns(inputs: dict, layout: str):
    """torch eager: the fused rms_norm, then the modulation (two more elementwise kernels)."""
    import torch.nn.functional as F

    x = inputs["X"]
    y = F.rms_norm(x, (x.shape[-1],), inputs["W"], EPS)
    return y * (1 + inputs["scale"][:, None, :]) + inputs["shift"][:, None, :]


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, W, scale, shift, Y, B, T, N, eps)."""
    return [*(ctypes.c_void_p(inputs[name].data_ptr()) for name in INPUTS), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["B"]), ctypes.c_int(dims["T"]), ctypes.c_int(dims["N"]), ctypes.c_float(EPS)]


def tensor_args(inputs: dict, out) -> tuple:
    return (*(inputs[name] for name in INPUTS), out)
