"""poly_norm: PolyNorm, the polynomial activation of PolyCom (Zhuo et al., 2024; Liger-Kernel's
`liger_poly_norm(X, W, B, eps)`): with norm(u) = u / sqrt(mean(u²) + eps) over each row,
    Y = W[0]·norm(X³) + W[1]·norm(X²) + W[2]·norm(X) + B.

X and Y are [M, N] row-major, W is [3], B a 0-d tensor (as Liger's PolyNorm holds them), all in
one dtype; eps is one of the op's scalars (1e-6, Liger's default). Memory-bound: bytes = X read
once, Y written once (W and B are four elements); no FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X", "W", "B")
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)
SCALARS = ("eps",)
EPS = 1e-6
# Liger forms X³ and X² in the input dtype before normalising them, and torch eager in fp16/bf16
# rounds each power, each norm and each term of the sum (Liger's own bf16 test allows 2e-1
# absolute); fp32 is as rms_norm.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (1e-2, 3e-2), "bf16": (3e-2, 8e-2)}
PEER_NAME = "torch eager PolyNorm (Liger's test: three rms norms of x³, x², x, weighted, plus bias)"
ENTRY_NAMES = ("poly_norm", "polynorm")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(itemsize * (2 * dims["M"] * dims["N"] + 4))


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def scalars(dims: dict) -> dict:
    return {"eps": EPS}


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal rows; W near 1/3 each and a small B (PolyNorm's initial values are 1/3
    and 1), drawn on the generator's device."""
    import torch

    dev = generator.device
    x = torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=dev)
    w = 1.0 / 3.0 + 0.05 * torch.randn((3,), generator=generator, dtype=torch.float32, device=dev)
    b = 0.1 * torch.randn((), generator=generator, dtype=torch.float32, device=dev)
    return {name: t.to(dtype=dtype, device=device) for name, t in zip(INPUTS, (x, w, b))}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x, w, b = (inputs[name].double() for name in INPUTS)

    def norm(u):
        return u * torch.rsqrt(u.pow(2).mean(dim=-1, keepdim=True) + EPS)

    return w[0] * norm(x.pow(3)) + w[1] * norm(x.pow(2)) + w[2] * norm(x) + b


def peer_returns(inputs: dict, layout: str):
    """torch eager, as Liger's test's NaivePolyNorm writes it (no torch function exists)."""
    import torch

    x, w, b = (inputs[name] for name in INPUTS)

    def norm(u):
        return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + EPS)

    return w[0] * norm(x**3) + w[1] * norm(x**2) + w[2] * norm(x) + b


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, W, B, Y, M, N, eps); W has 3 elements, B one."""
    return [*(ctypes.c_void_p(inputs[name].data_ptr()) for name in INPUTS), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"]), ctypes.c_float(EPS)]


def tensor_args(inputs: dict, out) -> tuple:
    return (*(inputs[name] for name in INPUTS), out)
