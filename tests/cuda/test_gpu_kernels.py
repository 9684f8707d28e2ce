"""Run every cuda variant on an NVIDIA GPU and compare with a float64 reference. Needs a CUDA
torch; skipped elsewhere (marker `cuda`)."""

from __future__ import annotations

import ctypes
import importlib.util
from pathlib import Path

import pytest

from workers.bindings import module_api
from workers.toolkit import launch_expr

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.cuda, pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")]

M, N, K = 256, 384, 512


def _gemm_inputs():
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(M, K, generator=g) / 10).to(torch.bfloat16).cuda()
    b = (torch.randn(N, K, generator=g) / 10).to(torch.bfloat16).cuda()
    c = torch.full((M, N), float("nan"), device="cuda")
    return a, b, c


def _rel_error(c, a, b) -> float:
    ref = a.double() @ b.double().T
    return float((c.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("name", ["cuda_naive", "cuda_smem_tiled", "cuda_register_blocked", "cuda_wmma"])
def test_c_gemm_matches_reference(built_variants, name):
    lib = ctypes.CDLL(str(built_variants[name].output))
    entry = getattr(lib, built_variants[name].manifest["binding"]["entry"])
    a, b, c = _gemm_inputs()
    stream = torch.cuda.current_stream().cuda_stream
    entry(ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()), ctypes.c_void_p(c.data_ptr()),
          M, N, K, ctypes.c_void_p(stream))
    torch.cuda.synchronize()
    assert not c.isnan().any()
    assert _rel_error(c, a, b) < 1e-5


def test_raw_gemm_through_the_shared_module_api(built_variants):
    """The launch path ROCm nodes use too, with CUDA's names (workers/bindings/module_api.py)."""
    built = built_variants["cuda_raw_naive"]
    binding = built.manifest["binding"]
    api = module_api.VENDORS["cuda"]
    kernel = module_api.load(api, built.output.read_bytes(), binding["entry"])
    a, b, c = _gemm_inputs()
    sizes = {"M": M, "N": N, "K": K}
    module_api.launch(kernel, launch_expr.dims3(binding["grid"], sizes),
                      launch_expr.dims3(binding["block"], sizes), [a, b, c, M, N, K])
    torch.cuda.synchronize()
    module_api.unload(kernel)
    assert not c.isnan().any()
    assert _rel_error(c, a, b) < 1e-5


@pytest.mark.parametrize("name", ["cuda_coalesced", "cuda_strided"])
def test_copy_is_exact(built_variants, name):
    lib = ctypes.CDLL(str(built_variants[name].output))
    entry = getattr(lib, built_variants[name].manifest["binding"]["entry"])
    n = (1 << 20) + 77  # not a multiple of the strided kernel's 8192-word block: tests the guard
    src = torch.randn(n, device="cuda")
    dst = torch.full((n + 64,), float("nan"), device="cuda")
    entry(ctypes.c_void_p(src.data_ptr()), ctypes.c_void_p(dst.data_ptr()), ctypes.c_longlong(n),
          ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    torch.cuda.synchronize()
    assert torch.equal(dst[:n], src)
    assert dst[n:].isnan().all()  # nothing written past the end


def test_pybind_gemm(build_variant, tmp_path):
    root = Path(__file__).resolve().parents[2]
    built = build_variant(root / "kernels" / "gemm" / "cuda_pybind_tiled")
    module = built.manifest["binding"]["module"]
    spec = importlib.util.spec_from_file_location(module, built.output)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    a, b, c = _gemm_inputs()
    getattr(ext, built.manifest["binding"]["entry"])(a, b, c)
    torch.cuda.synchronize()
    assert _rel_error(c, a, b) < 1e-5
