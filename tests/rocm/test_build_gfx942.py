"""Builds every kernels/gemm/hip_* variant with a `c` or `raw` binding for gfx942 with the
toolchain found here (the pybind11 one: tests/rocm/test_rocm_pybind.py; the swept one, point by
point: tests/test_sweep_bundled.py)."""
import json
import tomllib
from dataclasses import asdict
from pathlib import Path

import pytest

from workers.rocm.build import build_hip
from workers.rocm.toolchain import ToolchainMissing, find_hip_toolchain

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = sorted(p for p in (ROOT / "kernels" / "gemm").glob("hip_*/variant.toml")
                  if tomllib.loads(p.read_text())["binding"]["kind"] != "pybind11"
                  and "params" not in tomllib.loads(p.read_text()))
TOOLCHAIN = find_hip_toolchain()


def test_variants_exist():
    assert {p.parent.name for p in VARIANTS} >= {"hip_naive", "hip_lds_tiled", "hip_mfma",
                                                  "hip_mfma_dbuf"}


@pytest.mark.skipif(isinstance(TOOLCHAIN, ToolchainMissing),
                    reason=getattr(TOOLCHAIN, "reason", ""))
@pytest.mark.parametrize("mode", ["shared-library", "code-object"])
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda p: p.parent.name)
def test_build_and_analyse(variant: Path, mode: str, tmp_path: Path):
    spec = tomllib.loads(variant.read_text())
    folder = variant.parent
    build = spec["build"]
    result = build_hip([str(folder / s) for s in spec["sources"]],
                       [str(ROOT / "kernels" / "include")],  # the project's shared headers (flopwatch.toml)
                       build["flags"], spec["arches"], str(tmp_path), mode,
                       launch={"*": spec["launch"]})
    assert result.ok, result.first_errors
    assert all(Path(a).is_file() for a in result.artifacts)
    json.dumps(asdict(result))  # plain data all the way down
    kernels = result.kernels["gfx942"]
    assert len(kernels) == 1
    (k,) = kernels.values()
    assert k["remarks"]["vgprs"] > 0
    assert k["code_object"]["vgpr_count"] >= k["remarks"]["vgprs"]
    mfma = k["disassembly"]["mfma_total"]
    if "mfma" in spec["name"]:
        assert mfma > 0
        assert k["remarks"]["agprs"] > 0
    else:
        assert mfma == 0
    occ = k["occupancy"]
    assert 1 <= occ["waves_per_simd"] <= 8
    # no dynamic LDS and the launch size equals __launch_bounds__: the compiler agrees
    assert occ["waves_per_simd"] == k["remarks"]["occupancy_waves_per_simd"]


@pytest.mark.skipif(isinstance(TOOLCHAIN, ToolchainMissing),
                    reason=getattr(TOOLCHAIN, "reason", ""))
def test_compile_error_is_reported(tmp_path: Path):
    src = tmp_path / "broken.hip"
    src.write_text("__global__ void k(int* p) { *p = undefined_name; }\n")
    result = build_hip([str(src)], [], ["-O3"], ["gfx942"], str(tmp_path / "w"), "code-object")
    assert not result.ok
    assert result.first_errors and "undefined_name" in result.first_errors[0]
