"""fused_add_rms_norm: the residual add and the normalisation of a Llama-style block in one pass
(Liger-Kernel's `liger_fused_add_rms_norm(X, R, W, eps)`, vLLM's `fused_add_rms_norm`):
    S = X + R,   Y[m, :] = S[m, :] / sqrt(mean(S[m, :]²) + eps) · W.
The entry returns (Y, S) — the normalised rows and the new residual stream.

X, R, Y and S are [M, N] row-major, W is [N], all in one dtype; eps is one of the op's scalars
(1e-6, as for rms_norm). The output checked is Y and S flattened end to end, [2·M·N] (Y first),
as a returning entry's tuple is; a C entry writes the same into one buffer (it must not write
into X or R: inputs are read-only to flopwatch's checks). Memory-bound: bytes = X, R read once,
W read once, Y and S written once; no FLOPs are counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("X", "R", "W")
OUTPUT = "Y"
DIMS = ("M", "N")
LAYOUTS = ("rows",)
SCALARS = ("eps",)
EPS = 1e-6
# As rms_norm: the mean of squares in fp32, fp16/bf16 outputs rounded once or twice; S is
# rounded to the dtype before it is normalised (Liger's "llama" casting), half an ulp more.
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
PEER_NAME = "X + R, then torch.nn.functional.rms_norm (torch eager)"
ENTRY_NAMES = ("fused_add_rms_norm", "fused_add_rmsnorm", "add_rms_norm", "add_rmsnorm", "residual_rms_norm",
               "rms_norm_add", "fused_residual_rms_norm")


def flops(dims: dict) -> float:
    return 0.0


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(itemsize * (4 * dims["M"] * dims["N"] + dims["N"]))


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int]:
    return (2 * dims["M"] * dims["N"],)


def scalars(dims: dict) -> dict:
    return {"eps": EPS}


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal hidden states and residual, a weight near 1, drawn on the generator's
    device."""
    import torch

    dev, shape = generator.device, (dims["M"], dims["N"])
    x = torch.randn(shape, generator=generator, dtype=torch.float32, device=dev)
    r = torch.randn(shape, generator=generator, dtype=torch.float32, device=dev)
    w = 1.0 + 0.1 * torch.randn((dims["N"],), generator=generator, dtype=torch.float32, device=dev)
    return {name: t.to(dtype=dtype, device=device) for name, t in zip(INPUTS, (x, r, w))}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    s = inputs["X"].double() + inputs["R"].double()
    y = s * torch.rsqrt(s.pow(2).mean(dim=-1, keepdim=True) + EPS) * inputs["W"].double()
    return torch.cat((y.reshape(-1), s.reshape(-1)))


def peer_returns(inputs: dict, layout: str):
    """torch eager: the add, then torch's fused rms_norm; returns (Y, S)."""
    import torch.nn.functional as F

    s = inputs["X"] + inputs["R"]
    return F.rms_norm(s, (s.shape[-1],), inputs["W"], EPS), s


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (X, R, W, Y, M, N, eps); Y holds 2·M·N elements, the
    normalised rows then the sums X + R."""
    return [*(ctypes.c_void_p(inputs[name].data_ptr()) for name in INPUTS), ctypes.c_void_p(out.data_ptr()),
            ctypes.c_int(dims["M"]), ctypes.c_int(dims["N"]), ctypes.c_float(EPS)]


def tensor_args(inputs: dict, out) -> tuple:
    return (*(inputs[name] for name in INPUTS), out)
