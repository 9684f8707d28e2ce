"""Raw kernels: parameters in the manifest's order (the packing: tests/test_module_api.py)."""

from __future__ import annotations

import pytest
import torch

from pipeline.project.config import load_config
from pipeline.project.discovery import discover
from workers.bindings.raw import argument_names, arguments, raw_entry
from workers.ops import gemm


def _variant(repo_root, name):
    valid, _ = discover(repo_root, load_config(repo_root))
    return next(v for v in valid if v.name == name)


def test_tutorial_signature_order_comes_from_the_manifest(repo_root):
    v = _variant(repo_root, "hip_raw_tutorial")
    a, b, c = torch.ones(2, 3), torch.ones(3, 4), torch.zeros(2, 4)
    names = argument_names(v, gemm)
    assert names == ["M", "N", "K", "A", "B", "C", "alpha", "beta"]
    values = arguments(names, {"A": a, "B": b}, c, {"M": 2, "N": 4, "K": 3}, gemm, 1.5, 0.5)
    assert values[:3] == [2, 4, 3] and values[3] is a and values[5] is c and values[6:] == [1.5, 0.5]


def test_default_order_is_inputs_output_sizes(repo_root):
    v = _variant(repo_root, "cuda_raw_naive")
    assert argument_names(v, gemm) == ["A", "B", "C", "M", "N", "K"]


def test_raw_entry_picks_the_vendor_row_and_names_missing_device_code(repo_root, tmp_path):
    v = _variant(repo_root, "cuda_raw_naive")
    (tmp_path / "libvariant.so").write_bytes(b"")
    with pytest.raises(ValueError, match="GPUs only"):
        raw_entry(v, tmp_path, gemm, "cpu", {"M": 1, "N": 1, "K": 1})
    with pytest.raises(FileNotFoundError, match="no device code for this GPU.*libvariant.so"):
        raw_entry(v, tmp_path, gemm, "cuda", {"M": 1, "N": 1, "K": 1})
