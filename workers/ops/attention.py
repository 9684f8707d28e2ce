"""attention: O = softmax(Q·Kᵀ·scale)·V per batch and head, the forward pass of scaled
dot-product attention without a mask (`attention_causal` is the masked one).

Q, K, V and O are [B, H, S, D] row-major (batch, head, sequence, head dim), in one dtype;
scale = 1/√D. FLOPs are counted as FlashAttention's papers and benchmarks count them: the two
matrix products only, 2·S·S·D each per head, so 4·B·H·S²·D (the softmax is left out; the causal
variant does half the work, and counts half). Bytes: Q, K, V read once and O written once.
"""

from __future__ import annotations

import ctypes
import math

INPUTS = ("Q", "K", "V")
OUTPUT = "O"  # the output tensor's name in raw kernel argument lists
DIMS = ("B", "H", "S", "D")
# A launch floor keeps the head dimension: kernels are written for a few of them
# (`workers.measure.launch_floor`).
FLOOR_KEEP = ("D",)
LAYOUTS = ("bhsd",)
SCALARS = ("scale",)  # values a raw kernel may take by name, computed from the shape
# Relative Frobenius error and max abs error relative to max|ref|. fp16/bf16 kernels round P to
# the input dtype before P·V (FlashAttention does), which costs about one ulp of the dtype.
TOLERANCE = {"fp32": (1e-4, 1e-3), "fp16": (5e-3, 2e-2), "bf16": (3e-2, 6e-2)}
PEER_NAME = "torch.nn.functional.scaled_dot_product_attention"
ENTRY_NAMES = ("attention", "attn", "flash_attention", "flash_attn", "flash_attn_func", "sdpa",
               "scaled_dot_product_attention", "multi_head_attention", "mha")
# The fp64 reference holds one S×S score matrix per head it computes at once: bound its size.
_REFERENCE_BYTES = 256 << 20


def flops(dims: dict) -> float:
    return 4.0 * dims["B"] * dims["H"] * dims["S"] ** 2 * dims["D"]


def bytes_moved(dims: dict, itemsize: int) -> float:
    return float(4 * itemsize * dims["B"] * dims["H"] * dims["S"] * dims["D"])


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int, int, int, int]:
    return (dims["B"], dims["H"], dims["S"], dims["D"])


def scalars(dims: dict) -> dict:
    return {"scale": 1.0 / math.sqrt(dims["D"])}


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal Q, K, V (scores Q·Kᵀ/√D then have unit variance), drawn on the
    generator's device (the job's)."""
    import torch

    shape = output_shape(dims)
    return {name: torch.randn(shape, generator=generator, dtype=torch.float32, device=generator.device)
            .to(dtype=dtype, device=device) for name in INPUTS}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None, causal: bool = False):
    """fp64 attention of the (already rounded) inputs, a few heads at a time."""
    import torch

    q, k, v = (inputs[n] for n in INPUTS)
    b, h, s, d = q.shape
    scale = 1.0 / math.sqrt(d)
    out = torch.empty((b * h, s, d), dtype=torch.float64, device=q.device)
    qf, kf, vf = (t.reshape(b * h, s, d) for t in (q, k, v))
    step = max(1, _REFERENCE_BYTES // (8 * s * s))
    mask = torch.ones((s, s), dtype=torch.bool, device=q.device).tril() if causal else None
    for i in range(0, b * h, step):
        scores = qf[i:i + step].double() @ kf[i:i + step].double().transpose(1, 2) * scale
        if mask is not None:
            scores.masked_fill_(~mask, float("-inf"))
        out[i:i + step] = torch.softmax(scores, dim=-1) @ vf[i:i + step].double()
    return out.view(b, h, s, d)


def peer(inputs: dict, out, layout: str, alpha: float = 1.0, beta: float = 0.0, causal: bool = False) -> None:
    """torch's SDPA (FlashAttention / memory-efficient / cuDNN back ends on a GPU) into `out`.
    SDPA has no `out=`: its result is copied, one extra write of O (about 3% of the time at
    B·H = 64, S = 4096, D = 128; more for short sequences)."""
    import torch.nn.functional as F

    out.copy_(F.scaled_dot_product_attention(inputs["Q"], inputs["K"], inputs["V"], is_causal=causal))


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (Q, K, V, O, B, H, S, D, scale)."""
    return [*(ctypes.c_void_p(inputs[n].data_ptr()) for n in INPUTS), ctypes.c_void_p(out.data_ptr()),
            *(ctypes.c_int(dims[d]) for d in DIMS), ctypes.c_float(scalars(dims)["scale"])]


def tensor_args(inputs: dict, out) -> tuple:
    return (inputs["Q"], inputs["K"], inputs["V"], out)
