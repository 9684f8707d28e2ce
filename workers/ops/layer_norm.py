"""layer_norm: Y[m, :] = (X[m, :] - mean) / sqrt(var + eps) · W + B over the last dimension (the
biased variance), the normalisation of GPT/BERT-style blocks (Liger-Kernel's `liger_layer_norm`,
`torch.nn.functional.layer_norm`).

X and Y are [M, N] row-major, W and B are [N], all in one dtype; eps is one of the op's scalars
(1e-6, as Liger's LayerNorm and its tests set it). Memory-bound: bytes = X read once, W and B
read once, Y written once; no FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X", "W", "B")
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)
SCALARS = ("eps",)
EPS = 1e-6
# Mean and variance are taken in fp32 by Liger's kernel and by torch; fp16/bf16 outputs round
# the fp32 result once (as rms_norm's do).
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = "torch.nn.functional.layer_norm"
ENTRY_NAMES = ("layer_norm", "layernorm")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(itemsize * (2 * dims["M"] * dims["N"] + 2 * dims["N"]))


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def scalars(dims: dict) -> dict:
    return {"eps": EPS}


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Rows with a non-zero mean (a kernel that skips the centring fails), a weight near 1 and a
    small bias (as trained norms have), drawn on the generator's device."""
    import torch

    dev, n = generator.device, dims["N"]
    x = 0.5 + torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=dev)
    w = 1.0 + 0.1 * torch.randn((n,), generator=generator, dtype=torch.float32, device=dev)
    b = 0.1 * torch.randn((n,), generator=generator, dtype=torch.float32, device=dev)
    return {name: t.to(dtype=dtype, device=device) for name, t in zip(INPUTS, (x, w, b))}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x, w, b = (inputs[name].double() for name in INPUTS)
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred * torch.rsqrt(centred.pow(2).mean(dim=-1, keepdim=True) + EPS) * w + b


def peer_returns(inputs: dict, layout: str):
    """torch's fused layer_norm, which returns its output."""
    import torch.nn.functional as F

    x = inputs["X"]
    return F.layer_norm(x, (x.shape[-1],), inputs["W"], inputs["B"], EPS)


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, W, B, Y, M, N, eps)."""
    return [*(ctypes.c_void_p(inputs[name].data_ptr()) for name in INPUTS), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"]), ctypes.c_float(EPS)]


def tensor_args(inputs: dict, out) -> tuple:
    return (*(inputs[name] for name in INPUTS), out)
