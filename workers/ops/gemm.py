"""gemm: C[M,N] = α·A·op(B) + β·C with fp32 output.

Layouts: `nt` (the default, HipKittens convention) — A is M×K row-major, B is stored N×K,
C = A·Bᵀ; `nn` — A is M×K, B is K×N, both row-major, as tutorial CUDA/HIP kernels are written.
Inputs may be bf16, fp16 or fp32; the output is always fp32.
"""

from __future__ import annotations

import ctypes

INPUTS = ("A", "B")
OUTPUT = "C"  # the output tensor's name in raw kernel argument lists
DIMS = ("M", "N", "K")
LAYOUTS = ("nt", "nn")
# Default tolerances per input dtype: relative Frobenius error and max abs error relative to
# max|ref|. fp32 differs from the fp64 reference only by accumulation order; bf16/fp16 kernels
# may round partial results, which lands around 1e-3..1e-2 (GUIDE §3).
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = "torch.matmul"
ENTRY_NAMES = ("gemm", "matmul", "mm", "sgemm", "hgemm")


def flops(dims: dict) -> float:
    return 2.0 * dims["M"] * dims["N"] * dims["K"]


def bytes_moved(dims: dict, itemsize: int) -> float:
    """Inputs read once plus the fp32 output written once."""
    m, n, k = dims["M"], dims["N"], dims["K"]
    return float(itemsize * (m * k + n * k) + 4 * m * n)


def output_dtype(dtype: str) -> str:
    return "fp32"


def output_shape(dims: dict) -> tuple[int, int]:
    return (dims["M"], dims["N"])


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Random inputs scaled like randn/10 (never zeros: zeros time faster than real data),
    drawn on the generator's device (the job's device: an 8192² draw on the host took longer
    than the check it feeds)."""
    import torch

    m, n, k = dims["M"], dims["N"], dims["K"]
    b_shape = (n, k) if layout == "nt" else (k, n)
    a = torch.randn((m, k), generator=generator, dtype=torch.float32, device=generator.device) / 10
    b = torch.randn(b_shape, generator=generator, dtype=torch.float32, device=generator.device) / 10
    return {"A": a.to(dtype=dtype, device=device), "B": b.to(dtype=dtype, device=device)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    """fp64 result of the exact op on the (already rounded) inputs."""
    a = inputs["A"].double()
    b = inputs["B"].double()
    out = alpha * (a @ (b.T if layout == "nt" else b))
    if beta and c_init is not None:
        out = out + beta * c_init.double()
    return out


def peer(inputs: dict, out, layout: str, alpha: float = 1.0, beta: float = 0.0) -> None:
    """The vendor-library peer: torch.matmul (cuBLAS / hipBLASLt / CPU BLAS) into `out`."""
    import torch

    b = inputs["B"].T if layout == "nt" else inputs["B"]
    res = torch.matmul(inputs["A"], b)
    if alpha != 1.0 or beta != 0.0:
        out.mul_(beta).add_(res.float(), alpha=alpha)
    else:
        out.copy_(res)


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (A, B, C, M, N, K[, alpha, beta])."""
    args = [
        ctypes.c_void_p(inputs["A"].data_ptr()),
        ctypes.c_void_p(inputs["B"].data_ptr()),
        ctypes.c_void_p(out.data_ptr()),
        ctypes.c_int(dims["M"]),
        ctypes.c_int(dims["N"]),
        ctypes.c_int(dims["K"]),
    ]
    if alpha_beta:
        args += [ctypes.c_float(alpha), ctypes.c_float(beta)]
    return args


def tensor_args(inputs: dict, out) -> tuple:
    """Arguments of a tensor-taking entry point: (A, B, C), like tk_kernel.dispatch_micro."""
    return (inputs["A"], inputs["B"], out)
