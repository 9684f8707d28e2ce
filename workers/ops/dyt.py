"""dyt: Y = Gamma · tanh(Alpha · X) + Beta, Dynamic Tanh, the normalisation-free replacement of
LayerNorm (Zhu et al., 2025; Liger-Kernel's `liger_dyt(x, alpha, gamma, beta)`).

X and Y are [M, N] row-major; Alpha is a one-element tensor [1] (a learned scalar), Gamma and
Beta are [N]; all in one dtype. The inputs are named Alpha, Gamma, Beta (capitalised) because
`alpha` and `beta` are the harness's own scalars in `binding.args` and raw kernel arguments.
Memory-bound: bytes = X read once, the parameters read once, Y written once; no FLOPs counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X", "Alpha", "Gamma", "Beta")
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)
# tanh is computed in fp32 by Liger's kernel; torch eager in fp16/bf16 rounds alpha·x, tanh,
# the product and the sum (four roundings, a few ulps).
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = "Gamma * torch.tanh(Alpha * X) + Beta (torch eager)"
ENTRY_NAMES = ("dyt", "dynamic_tanh", "dyn_tanh")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(itemsize * (2 * dims["M"] * dims["N"] + 2 * dims["N"] + 1))


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal rows; Alpha near 0.5 (DyT's initial value, so tanh is not saturated),
    Gamma near 1 and a small Beta, as trained layers have; drawn on the generator's device."""
    import torch

    dev, n = generator.device, dims["N"]
    x = torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=dev)
    alpha = 0.5 + 0.1 * torch.randn((1,), generator=generator, dtype=torch.float32, device=dev)
    gamma = 1.0 + 0.1 * torch.randn((n,), generator=generator, dtype=torch.float32, device=dev)
    beta = 0.1 * torch.randn((n,), generator=generator, dtype=torch.float32, device=dev)
    return {name: t.to(dtype=dtype, device=device) for name, t in zip(INPUTS, (x, alpha, gamma, beta))}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    x, a, g, b = (inputs[name].double() for name in INPUTS)
    return g * torch.tanh(a * x) + b


def peer_returns(inputs: dict, layout: str):
    """torch eager, as Liger's test writes DyT (four kernels)."""
    import torch

    return inputs["Gamma"] * torch.tanh(inputs["Alpha"] * inputs["X"]) + inputs["Beta"]


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, Alpha, Gamma, Beta, Y, M, N)."""
    return [*(ctypes.c_void_p(inputs[name].data_ptr()) for name in INPUTS), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (*(inputs[name] for name in INPUTS), out)
