"""attention_causal: `attention` with the causal mask (query i sees keys 0..i), as
`scaled_dot_product_attention(..., is_causal=True)` computes it for equal query and key lengths.

Half the score matrix is masked, so FlashAttention's count halves: 2·B·H·S²·D FLOPs.
Everything else (inputs, layout, tolerances, bytes) is `attention`'s.
"""

from __future__ import annotations

from workers.ops import attention as _attention

INPUTS, OUTPUT, DIMS, LAYOUTS, SCALARS = (_attention.INPUTS, _attention.OUTPUT, _attention.DIMS,
                                          _attention.LAYOUTS, _attention.SCALARS)
TOLERANCE = _attention.TOLERANCE
FLOOR_KEEP = _attention.FLOOR_KEEP
PEER_NAME = "torch.nn.functional.scaled_dot_product_attention(is_causal=True)"
ENTRY_NAMES = ("attention_causal", "causal_attention", "causal_attn", "flash_attention_causal",
               "flash_attn_causal")

bytes_moved = _attention.bytes_moved
output_dtype = _attention.output_dtype
output_shape = _attention.output_shape
scalars = _attention.scalars
make_inputs = _attention.make_inputs
c_args = _attention.c_args
tensor_args = _attention.tensor_args


def flops(dims: dict) -> float:
    return _attention.flops(dims) / 2


def reference(inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
    return _attention.reference(inputs, layout, causal=True)


def peer(inputs: dict, out, layout: str, alpha: float = 1.0, beta: float = 0.0) -> None:
    _attention.peer(inputs, out, layout, causal=True)
