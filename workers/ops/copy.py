"""copy: dst[n] = src[n]. Memory-bound; its coalescing has a known answer (100% when
contiguous threads read contiguous words), so it calibrates the profiler metrics."""

from __future__ import annotations

import ctypes

INPUTS = ("src",)
OUTPUT = "dst"  # the output tensor's name in raw kernel argument lists
DIMS = ("n",)
LAYOUTS = ("nt",)
TOLERANCE = {"fp32": (0.0, 0.0), "fp16": (0.0, 0.0), "bf16": (0.0, 0.0)}
# torch elementwise kernel, not copy_ (a copy-engine memcpy that profilers cannot see): kernels/copy/torch_copy/ref.py
PEER_NAME = "torch.mul(src, 1, out=dst)"
ENTRY_NAMES = ("copy", "memcpy")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(2 * itemsize * dims["n"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int]:
    return (dims["n"],)


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    import torch

    src = torch.randn((dims["n"],), generator=generator, dtype=torch.float32, device=generator.device)
    return {"src": src.to(dtype=dtype, device=device)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    return inputs["src"].double()


def peer(inputs: dict, out, layout: str, alpha: float = 1.0, beta: float = 0.0) -> None:
    import torch

    torch.mul(inputs["src"], 1, out=out)


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (src, dst, n)."""
    return [
        ctypes.c_void_p(inputs["src"].data_ptr()),
        ctypes.c_void_p(out.data_ptr()),
        ctypes.c_longlong(dims["n"]),
    ]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["src"], out)
