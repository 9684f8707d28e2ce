"""Build every kernels/**/cuda_* variant with nvcc for its arches, then check what ptxas and
cuobjdump say about the result. Needs nvcc (skipped without); no GPU."""

import subprocess
import tomllib
from pathlib import Path

import pytest

from workers.cuda import resource_usage, sass

ROOT = Path(__file__).resolve().parents[2]


def test_every_cuda_variant_is_built(built_variants):
    expected = {tomllib.loads(p.read_text())["name"] for p in ROOT.glob("kernels/*/cuda_*/variant.toml")}
    expected -= {"cuda_pybind_tiled"}
    assert {"attention_cuda_rows", "attention_causal_cuda_rows", "softmax_cuda_rows"} <= expected
    assert set(built_variants) == expected
    assert all(b.output.stat().st_size > 0 for b in built_variants.values())


def test_resource_usage_of_built_kernels(built_variants):
    usage = {name: resource_usage.parse_resource_usage(b.ptxas) for name, b in built_variants.items()}
    assert all(len(kernels) >= 1 for kernels in usage.values()), usage
    for kernels in usage.values():
        for k in kernels:
            assert k.arch == "sm_90a" and 0 < k.registers <= 255 and k.spill_stores == 0
    [blocked] = usage["cuda_register_blocked"]
    assert blocked.smem_bytes == 2 * 16 * 64 * 4 and blocked.barriers >= 1  # As + Bs, __syncthreads
    [tiled] = usage["cuda_smem_tiled"]
    assert tiled.smem_bytes == 2 * 32 * 33 * 4
    assert usage["cuda_raw_naive"][0].mangled == "gemm_raw"  # extern "C": the name cuModuleGetFunction uses
    assert usage["cuda_naive"][0].smem_bytes == 0


def test_sass_histograms(built_variants, cuda_tools):
    if not cuda_tools.cuobjdump:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    hist = {name: sass.parse_sass(sass.read_sass(cuda_tools.cuobjdump, str(b.output)))
            for name, b in built_variants.items()}
    assert hist["cuda_wmma"][0].tensor_core > 0 and hist["cuda_wmma"][0].opcodes.get("HMMA", 0) > 0
    for plain in ("cuda_naive", "cuda_smem_tiled", "cuda_register_blocked", "cuda_raw_naive"):
        assert hist[plain][0].tensor_core == 0, plain
    assert hist["cuda_smem_tiled"][0].shared_loads > 0
    assert hist["cuda_coalesced"][0].shared_loads == 0 and hist["cuda_strided"][0].shared_loads > 0


def test_pybind_variant(build_variant):
    built = build_variant(ROOT / "kernels" / "gemm" / "cuda_pybind_tiled")  # skips on CPU torch
    assert built.output.name.startswith("tk_kernel.")
    assert resource_usage.parse_resource_usage(built.ptxas)[0].registers > 0
    symbols = subprocess.run(["nm", "-D", str(built.output)], capture_output=True, text=True, check=True).stdout
    assert "PyInit_tk_kernel" in symbols
