"""elementwise_add: Y = A + B elementwise (FlagGems' `add`, KernelBench's elementwise additions, the first kernel of every CUDA tutorial).

A, B and Y are vectors of N elements in one dtype (a kernel for tensors of any shape reads
them as one vector, as elementwise kernels do: `numel()` elements). Memory-bound: bytes = A
and B read once, Y written once; no FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("A", "B")
OUTPUT = "Y"
DIMS = ("N",)
LAYOUTS = ("rows",)
# one rounding of the sum: an fp32 kernel equals torch bit for bit, fp16/bf16 round the sum once.
TOLERANCE = {"fp32": (1e-6, 1e-6), "fp16": (2e-3, 1e-2), "bf16": (1e-2, 5e-2)}
PEER_NAME = "torch.add(A, B)"
ENTRY_NAMES = ("elementwise_add", "add", "vector_add", "vec_add", "add_tensor")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(3 * itemsize * dims["N"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int]:
    return (dims["N"],)


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    import torch

    return {name: torch.randn(output_shape(dims), generator=generator, dtype=torch.float32, device=generator.device)
            .to(dtype=dtype, device=device) for name in INPUTS}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    a, b = inputs["A"].double(), inputs["B"].double()
    return a + b


def peer_returns(inputs: dict, layout: str):
    import torch

    return torch.add(inputs["A"], inputs["B"])


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (A, B, Y, N)."""
    return [ctypes.c_void_p(inputs["A"].data_ptr()), ctypes.c_void_p(inputs["B"].data_ptr()),
            ctypes.c_void_p(out.data_ptr()), ctypes.c_int(dims["N"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["A"], inputs["B"], out)
