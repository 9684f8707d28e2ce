"""A one-file Python GEMM variant for tests that run a job as a slot runs it."""

from __future__ import annotations

from pathlib import Path

from workers.core.records import Shape, Variant
from workers.toolkit.bundle import pack


def python_variant(tmp: Path, body: str, timeout_s: float) -> tuple[Variant, dict]:
    """`body` (defining `gemm(a, b, c)`) as variant "k" in `tmp`, at 64³ fp32 on the CPU, and
    its packed files (what a build hands the runner)."""
    (tmp / "k.py").write_text(body)
    v = Variant(name="k", op="gemm", backend="python", folder="k", sources=("k.py",), dtypes=("fp32",),
                shapes=(Shape({"M": 64, "N": 64, "K": 64}),), devices=("cpu",), timeout_s=timeout_s,
                binding=Variant.from_dict({"name": "x", "op": "gemm", "backend": "python", "folder": "k",
                                           "sources": [], "dtypes": [], "shapes": [],
                                           "binding": {"kind": "python", "entry": "k.py:gemm"}}).binding)
    return v, pack(tmp)
