"""rope: rotary position embedding of queries and keys, as HF Llama/Mistral apply it (Liger-Kernel's
`liger_rope(q, k, cos, sin)`): each head vector x of length D is split into halves x1, x2 and
rotated by the position's angles θ_i,
    x1' = x1·cos θ - x2·sin θ,   x2' = x2·cos θ + x1·sin θ,
with cos and sin given as tables [1, S, D] whose two halves are equal (HF's
`LlamaRotaryEmbedding`: θ_i = position / 10000^(2i/D)).

q is [B, H, S, D], k is [B, HKV, S, D] (grouped-query attention: HKV divides H), cos and sin
[1, S, D], all in one dtype. The entry returns (q', k'); the output checked is the two
flattened end to end, [B·H·S·D + B·HKV·S·D] (q' first), as a returning entry's tuple is.
Memory-bound: bytes = q and k read and written once, the tables read once; no FLOPs counted.
"""

from __future__ import annotations

import ctypes

INPUTS = ("q", "k", "cos", "sin")
OUTPUT = "out"
DIMS = ("B", "H", "HKV", "S", "D")
# A launch floor keeps the head dimension (the rotary halves are written for it).
FLOOR_KEEP = ("D",)
LAYOUTS = ("bhsd",)
BASE = 10000.0  # Llama's rope_theta
# Two products and a sum per element, in fp32 in Liger's kernel; torch eager in fp16/bf16 rounds
# each of the three (a few ulps).
TOLERANCE = {"fp32": (1e-5, 1e-4), "fp16": (5e-3, 2e-2), "bf16": (2e-2, 5e-2)}
# A backward pass differentiates q and k; cos and sin are tables (Liger's LigerRopeFunction
# returns no gradient for them).
GRAD_INPUTS = ("q", "k")
PEER_NAME = "HF apply_rotary_pos_emb in torch eager (q·cos + rotate_half(q)·sin)"
ENTRY_NAMES = ("rope", "rotary", "rotary_emb", "rotary_embedding", "rope_embedding", "rotary_pos_emb",
               "apply_rotary_pos_emb", "apply_rotary_emb", "apply_rope")


def flops(dims: dict) -> float:
    return 0.0


def _sizes(dims: dict) -> tuple[int, int]:
    """Elements of q and of k."""
    per_head = dims["B"] * dims["S"] * dims["D"]
    return dims["H"] * per_head, dims["HKV"] * per_head


def bytes_moved(dims: dict, itemsize: int) -> float:
    q, k = _sizes(dims)
    return float(itemsize * (2 * (q + k) + 2 * dims["S"] * dims["D"]))


def output_dtype(dtype: str) -> str:
    return dtype


def output_shape(dims: dict) -> tuple[int]:
    return (sum(_sizes(dims)),)


def make_inputs(dims: dict, dtype, layout: str, device: str, generator) -> dict:
    """Standard normal q and k, drawn on the generator's device, and the cos/sin tables of
    positions 0..S-1 computed in fp32 and rounded to the dtype, as HF's rotary embedding does."""
    import torch

    dev, b, s, d = generator.device, dims["B"], dims["S"], dims["D"]
    q = torch.randn((b, dims["H"], s, d), generator=generator, dtype=torch.float32, device=dev)
    k = torch.randn((b, dims["HKV"], s, d), generator=generator, dtype=torch.float32, device=dev)
    inv_freq = 1.0 / BASE ** (torch.arange(0, d, 2, dtype=torch.float32, device=dev) / d)
    angles = torch.arange(s, dtype=torch.float32, device=dev)[:, None] * inv_freq[None, :]
    table = torch.cat((angles, angles), dim=-1)[None]  # [1, S, D], both halves equal
    values = (q, k, table.cos(), table.sin())
    return {name: t.to(dtype=dtype, device=device) for name, t in zip(INPUTS, values)}


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    import torch

    cos, sin = inputs["cos"].double(), inputs["sin"].double()
    half = cos.shape[-1] // 2
    c, s = cos[..., :half].unsqueeze(1), sin[..., :half].unsqueeze(1)  # [1, 1, S, D/2] over heads
    out = []
    for name in ("q", "k"):
        x = inputs[name].double()
        x1, x2 = x[..., :half], x[..., half:]
        out.append(torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).reshape(-1))
    return torch.cat(out)


def peer_returns(inputs: dict, layout: str):
    """HF's apply_rotary_pos_emb, torch eager (torch has no rope function): (q', k')."""
    import torch

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    cos, sin = inputs["cos"].unsqueeze(1), inputs["sin"].unsqueeze(1)
    q, k = inputs["q"], inputs["k"]
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def c_args(inputs: dict, out, dims: dict, alpha: float, beta: float, alpha_beta: bool) -> list:
    """Arguments of the C entry point: (q, k, cos, sin, out, B, H, HKV, S, D); out holds q' then
    k' (B·H·S·D, then B·HKV·S·D elements)."""
    return [*(ctypes.c_void_p(inputs[name].data_ptr()) for name in INPUTS), ctypes.c_void_p(out.data_ptr()),
            *(ctypes.c_int(dims[d]) for d in DIMS)]


def tensor_args(inputs: dict, out) -> tuple:
    return (*(inputs[name] for name in INPUTS), out)
