"""A HipKittens checkout, built the way a user's repository would be: its bf16 GEMM for
gfx942 (MI325X), source unchanged, a manifest, headers found through `${HIPKITTENS_ROOT}`.

HipKittens is in no package registry, so this runs only where `HIPKITTENS_ROOT` names a
checkout (its `cdna3` branch for MI300X/MI325X); with the cross toolchain it also needs
`FLOPWATCH_HIP_INCLUDE` (ROCm 6 HIP headers, docs/amd.md). The result is recorded in
docs/verification.md."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pipeline.project.config import load_config
from pipeline.project.discovery import discover
from pipeline.run.plan import build_plan
from workers.backends.build import build_variant
from workers.rocm.toolchain import ToolchainMissing, find_hip_toolchain

HK = os.environ.get("HIPKITTENS_ROOT")
TOOLCHAIN = find_hip_toolchain()
GEMM = "kernels/gemm/bf16fp32/mi325x"

pytestmark = [
    pytest.mark.skipif(not HK, reason="HIPKITTENS_ROOT is not set: no HipKittens checkout to build"),
    pytest.mark.skipif(isinstance(TOOLCHAIN, ToolchainMissing), reason=getattr(TOOLCHAIN, "reason", "")),
]

MANIFEST = """
name = "hk_bf16_gemm_mi325x"
op = "gemm"
backend = "hip"
sources = ["256_256_64_16.cpp"]
layout = "nt"
dtypes = ["bf16"]
output_dtype = "bf16"
shapes = [[8192, 8192, 8192]]
arches = ["gfx942"]
[binding]
kind = "pybind11"
module = "tk_kernel"
entry = "dispatch_micro"
[build]
flags = ["-DKITTENS_CDNA3", "-std=c++20", "-w"]
include_dirs = ["${HIPKITTENS_ROOT}/include", "${ROCM_INCLUDE_DIR}", "${HIP_INCLUDE_DIR}"]
[launch]
block_threads = 512
dynamic_lds_bytes = 65536
"""


def _source() -> Path:
    found = sorted(Path(HK, GEMM).rglob("256_256_64_16.cpp"))
    if not found:
        pytest.fail(f"{HK}/{GEMM}/**/256_256_64_16.cpp not found: is HIPKITTENS_ROOT a HipKittens checkout "
                    f"(branch cdna3)?")
    return found[0]


def test_hipkittens_bf16_gemm_builds_for_gfx942_with_static_analysis(tmp_path: Path):
    if TOOLCHAIN.kind == "clang-cross" and not TOOLCHAIN.hip_include:
        pytest.skip("the cross toolchain needs FLOPWATCH_HIP_INCLUDE (ROCm 6 HIP headers) for HipKittens")
    repo = tmp_path / "repo"
    folder = repo / "kernels" / "hk"
    folder.mkdir(parents=True)
    shutil.copy2(_source(), folder / "256_256_64_16.cpp")  # unchanged
    (folder / "variant.toml").write_text(MANIFEST)
    (repo / "flopwatch.toml").write_text('kernels = ["kernels"]\n')
    config = load_config(repo)
    (variant,), invalid = discover(repo, config)
    assert not invalid
    plan = build_plan(repo, variant, config.include_dirs, "test")
    record, _ = build_variant(variant, plan.bundle, plan.build_hash, list(plan.include_dirs))
    assert not record.first_errors, record.first_errors
    k = record.analysis["kernels"]["micro_tk"]
    print(record.toolchain, k)  # the figures docs/verification.md records (pytest -s)
    assert k["arch"] == "gfx942" and k["vgprs"] > 128 and k["sgprs"] > 0
    assert k["vgpr_spill"] == 0 and k["sgpr_spill"] == 0 and k["scratch_bytes"] == 0
    # 64 KiB of dynamic LDS and 512 threads: one block, 8 waves, per CU = 2 waves/SIMD
    assert k["lds_bytes"] == 65536 and k["waves_per_simd"] == 2 and k["waves_per_cu"] == 8
    assert k["mfma_insts"] > 0 and all(name.startswith("v_mfma_f32_") for name in k
                                       if name.startswith("v_mfma"))
    if TOOLCHAIN.kind == "rocm":
        assert record.ok
    else:
        assert "cross toolchain" in record.skip_reason
