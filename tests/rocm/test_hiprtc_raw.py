"""A HIP kernel written for hiprtc (no hip_runtime.h include, <hip_fp16.h> as hiprtc resolves
it, a mangled C++ kernel name) builds for gfx942 from the manifest a user writes — no
include_dirs, no flags — with its resources analysed. Built another way (a `c` binding, as a
plain HIP source), each failure's hint names the manifest line that fixes it, and applying the
hints in turn makes it build."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from pipeline.project.config import ProjectConfig
from pipeline.project.discovery import discover
from pipeline.run.plan import build_plan
from workers.backends.build import build_variant, toolchains
from workers.backends.hip import runtime_compiler_options
from workers.rocm.occupancy import LDS_GRANULE
from workers.toolkit.raw_symbols import SYMBOLS_FILE

ROOT = Path(__file__).resolve().parents[2]
TOOLS = toolchains()
needs_hip = pytest.mark.skipif(not TOOLS["hip"].get("ident"), reason="no HIP toolchain (tools/install-hip-cross.sh)")


def _variant(tmp_path: Path, **changes):
    shutil.copytree(ROOT / "tests" / "rocm" / "hiprtc_gemm", tmp_path / "kernels" / "hiprtc_gemm")
    (variant,), invalid = discover(tmp_path, ProjectConfig())
    assert not invalid
    return dataclasses.replace(variant, **changes), tmp_path


def _build(variant, root: Path):
    plan = build_plan(root, variant, (), TOOLS["hip"]["ident"])
    return build_variant(variant, plan.bundle, plan.build_hash, [])


def test_runtime_compiler_options_add_the_implicit_header_and_hip_folder():
    flags, dirs = runtime_compiler_options(["-O2"], ["/src/inc"], {"HIP_INCLUDE_DIR": "/opt/hip/include/hip"})
    assert flags == ["-include", "hip/hip_runtime.h", "-O2"]
    assert dirs == ["/src/inc", "/opt/hip/include/hip"]  # the variant's own folders first


@needs_hip
def test_a_hiprtc_kernel_builds_from_the_manifest_a_user_writes(tmp_path):
    variant, root = _variant(tmp_path)
    assert variant.flags == () and variant.include_dirs == ()
    build, files = _build(variant, root)
    assert build.ok, build.first_errors
    (name, kernel), = build.analysis["kernels"].items()
    assert name == "gemm_fp16_tiled" and kernel["arch"] == "gfx942"
    assert kernel["vgprs"] > 0 and kernel["sgprs"] > 0 and 1 <= kernel["waves_per_simd"] <= 8
    # two 16×17 fp32 tiles: the compiler's static LDS, and the allocation in 512-byte granules
    static = 2 * 16 * 17 * 4
    assert kernel["lds_static_bytes"] == static
    assert kernel["lds_bytes"] == -(-static // LDS_GRANULE) * LDS_GRANULE == 2560
    # the C++ name resolved to its mangled symbol for the module loader
    symbols = json.loads(files[SYMBOLS_FILE])
    assert list(symbols) == ["gemm_fp16_tiled"] and symbols["gemm_fp16_tiled"].startswith("_Z15gemm_fp16_tiled")


@needs_hip
def test_a_raw_entry_that_names_no_kernel_fails_the_build_listing_the_kernels(tmp_path):
    variant, root = _variant(tmp_path)
    variant = dataclasses.replace(variant, binding=dataclasses.replace(variant.binding, entry="gemm_tiled"))
    build, _ = _build(variant, root)
    assert not build.ok
    assert "binding.entry: 'gemm_tiled' is not a kernel of this build" in build.first_errors
    assert "gemm_fp16_tiled" in build.first_errors


@needs_hip
def test_each_hint_names_the_manifest_line_and_applying_them_builds(tmp_path):
    variant, root = _variant(tmp_path)
    plain = dataclasses.replace(variant, binding=dataclasses.replace(variant.binding, kind="c"))
    first, _ = _build(plain, root)
    assert not first.ok and "'hip_fp16.h' file not found" in first.first_errors
    assert 'hint: hip_fp16.h is in HIP\'s include folder (HIP_INCLUDE_DIR): in variant.toml ' \
           '[build] include_dirs = ["${HIP_INCLUDE_DIR}"]' in first.first_errors
    with_dir = dataclasses.replace(plain, include_dirs=("${HIP_INCLUDE_DIR}",))
    second, _ = _build(with_dir, root)
    assert not second.ok and "use of undeclared identifier 'blockIdx'" in second.first_errors
    assert '[build] flags = ["-include", "hip/hip_runtime.h"]' in second.first_errors
    fixed = dataclasses.replace(with_dir, flags=("-include", "hip/hip_runtime.h"))
    third, _ = _build(fixed, root)
    assert third.ok, third.first_errors
