"""group_norm: X [M, C, N] (batch, channels, the rest of a channel's elements) is split into G
groups of C/G channels; each group of (C/G)·N elements is normalised by its own mean and
(biased) variance, then scaled and shifted per channel: Y = (X - mean) / sqrt(var + eps) · W[c]
+ B[c] (Liger-Kernel's `liger_group_norm`, `torch.nn.functional.group_norm`).

X and Y are [M, C, N] row-major, W and B are [C], all in one dtype. The scalars are Liger's
arguments after the tensors, in its order: num_channels (= C), num_groups (= G), eps (1e-6, as
Liger's tests set it); C must be a multiple of G. Memory-bound: bytes = X read once, W and B
read once, Y written once; no FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X", "W", "B")
OUTPUT = "Y"
DIMS = ("M", "C", "N", "G")
# A launch floor keeps the channels and groups: the kernel's grid is per group, its rows per
# channel of a group.
FLOOR_KEEP = ("C", "G")
LAYOUTS = ("rows",)
SCALARS = ("num_channels", "num_groups", "eps")
EPS = 1e-6
# Group statistics are taken in fp32 by Liger's kernel (as E[x²] - E[x]², which loses digits
# only for groups with a large mean) and by torch; fp16/bf16 outputs round once.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = "torch.nn.functional.group_norm"
ENTRY_NAMES = ("group_norm", "groupnorm")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(itemsize * (2 * dims["M"] * dims["C"] * dims["N"] + 2 * dims["C"]))


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int, int]:
    return (dims["M"], dims["C"], dims["N"])


def scalars(dims: dict) -> dict:
    """Ints for the counts (Liger reshapes with them), a float for eps."""
    return {"num_channels": int(dims["C"]), "num_groups": int(dims["G"]), "eps": EPS}


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal activations offset per channel (groups then have a mean to remove), a
    weight near 1 and a small bias, drawn on the generator's device."""
    import torch

    dev, c = generator.device, dims["C"]
    offset = 0.5 * torch.randn((c, 1), generator=generator, dtype=torch.float32, device=dev)
    x = offset + torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=dev)
    w = 1.0 + 0.1 * torch.randn((c,), generator=generator, dtype=torch.float32, device=dev)
    b = 0.1 * torch.randn((c,), generator=generator, dtype=torch.float32, device=dev)
    inputs = {name: t.to(dtype=dtype, device=device) for name, t in zip(INPUTS, (x, w, b))}
    inputs["X"].flopwatch_groups = _GROUPS[output_shape(dims)] = int(dims["G"])
    return inputs


# G is no tensor's size, and reference/peer_returns are given the inputs only: make_inputs marks
# X with it, and remembers it per X shape for a copy of X (the harness's snapshot of the inputs,
# which the reference reads when an entry wrote into them).
_GROUPS: dict[tuple, int] = {}


def groups(inputs: dict) -> int:
    x = inputs["X"]
    return getattr(x, "flopwatch_groups", None) or _GROUPS[tuple(x.shape)]


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x, w, b = (inputs[name].double() for name in INPUTS)
    m, c, n = x.shape
    g = x.reshape(m, groups(inputs), -1)
    centred = g - g.mean(dim=-1, keepdim=True)
    normed = (centred * torch.rsqrt(centred.pow(2).mean(dim=-1, keepdim=True) + EPS)).reshape(m, c, n)
    return normed * w[:, None] + b[:, None]


def peer_returns(inputs: dict, layout: str):
    """torch's group_norm, which returns its output."""
    import torch.nn.functional as F

    return F.group_norm(inputs["X"], groups(inputs), inputs["W"], inputs["B"], EPS)


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, W, B, Y, M, C, N, G, eps)."""
    return [*(ctypes.c_void_p(inputs[name].data_ptr()) for name in INPUTS), ctypes.c_void_p(out.data_ptr()),
            *(ctypes.c_int(dims[d]) for d in DIMS), ctypes.c_float(EPS)]


def tensor_args(inputs: dict, out) -> tuple:
    return (*(inputs[name] for name in INPUTS), out)
