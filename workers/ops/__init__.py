"""Op contracts: what a variant computes, how much work it is, and the torch reference.

Each op is a module exposing the same functions (see `gemm.py`); the table below is the
whole registry, written out so a newcomer sees every op in one place.
"""

from __future__ import annotations

from types import ModuleType

from workers.ops import copy, gemm

OPS: dict[str, ModuleType] = {"gemm": gemm, "copy": copy}

DTYPES = ("fp32", "fp16", "bf16")


def get_op(name: str) -> ModuleType:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known ops: {sorted(OPS)}") from None


def torch_dtype(name: str):
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]
