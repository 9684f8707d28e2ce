"""gelu: Y = GELU(X) elementwise in its tanh approximation, 0.5·x·(1 + tanh(√(2/π)·(x +
0.044715·x³))) — HF's "gelu_pytorch_tanh" (Gemma, GPT-2's "gelu_new"), the form of Liger-Kernel's
GEGLU kernel and of `torch.nn.functional.gelu(x, approximate="tanh")`. An erf GELU (torch's
default) differs from it by up to 5e-4 absolute: such a kernel is another op.

X and Y are [M, N] row-major in one dtype. Memory-bound: bytes = X read once, Y written once; no
FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X",)
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)
# tanh is computed in fp32 by Liger-style kernels and by torch; fp16/bf16 outputs round once.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = 'torch.nn.functional.gelu(X, approximate="tanh")'
ENTRY_NAMES = ("gelu", "gelu_tanh", "gelu_pytorch_tanh", "gelu_new", "gelu_approx", "gelu_fast")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(2 * itemsize * dims["M"] * dims["N"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal activations (both tails of GELU matter), drawn on the generator's device."""
    import torch

    x = torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=generator.device)
    return {"X": x.to(dtype=dtype, device=device)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x = inputs["X"].double()
    return 0.5 * x * (1.0 + torch.tanh((2.0 / torch.pi) ** 0.5 * (x + 0.044715 * x.pow(3))))


def peer_returns(inputs: dict, layout: str):
    """torch's GELU with the tanh approximation, returning Y."""
    import torch.nn.functional as F

    x = inputs["X"]
    return F.gelu(x, approximate="tanh")


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, Y, M, N)."""
    return [ctypes.c_void_p(inputs["X"].data_ptr()), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["X"], out)
