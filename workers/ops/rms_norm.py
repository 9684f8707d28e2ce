"""rms_norm: Y[m, :] = X[m, :] / sqrt(mean(X[m, :]²) + eps) · W, the normalisation of Llama-style
transformer blocks (Liger-Kernel's `liger_rms_norm`, `torch.nn.functional.rms_norm`).

X and Y are [M, N] row-major, W is [N], all in one dtype; eps is one of the op's scalars
(1e-6, as Llama configurations set it). It is memory-bound, so it is reported as bandwidth:
bytes = X read once, W read once, Y written once; no FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X", "W")
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)
SCALARS = ("eps",)
EPS = 1e-6
# The mean of squares is taken in fp32 by every kernel and by torch; fp16/bf16 kernels round the
# normalised row once and the product with W once (Liger's "llama" casting), two ulps at most.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = "torch.nn.functional.rms_norm"
ENTRY_NAMES = ("rms_norm", "rmsnorm", "rms_layernorm", "rms_layer_norm")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(itemsize * (2 * dims["M"] * dims["N"] + dims["N"]))


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def scalars(dims: dict) -> dict:
    return {"eps": EPS}


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal rows and a weight near 1 (as trained norms are), drawn on the
    generator's device."""
    import torch

    x = torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=generator.device)
    w = 1.0 + 0.1 * torch.randn((dims["N"],), generator=generator, dtype=torch.float32, device=generator.device)
    return {"X": x.to(dtype=dtype, device=device), "W": w.to(dtype=dtype, device=device)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x, w = inputs["X"].double(), inputs["W"].double()
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * w


def peer_returns(inputs: dict, layout: str):
    """torch's fused rms_norm, which returns its output (the way Liger's callers get theirs)."""
    import torch.nn.functional as F

    x = inputs["X"]
    return F.rms_norm(x, (x.shape[-1],), inputs["W"], EPS)


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, W, Y, M, N, eps)."""
    return [ctypes.c_void_p(inputs["X"].data_ptr()), ctypes.c_void_p(inputs["W"].data_ptr()),
            ctypes.c_void_p(out.data_ptr()), ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"]), ctypes.c_float(EPS)]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["X"], inputs["W"], out)
