"""HIP pybind11 modules (HipKittens' `tk_kernel`): command lines, what blocks a host module on
a node, and the bundled `hip_pybind_mfma` built for gfx942 with its static analysis."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipeline.project.config import load_config
from pipeline.project.discovery import discover
from workers.backends import hip as hip_backend
from workers.rocm import pybind_build
from workers.rocm.pybind_build import HostBuildInfo
from workers.rocm.toolchain import (
    HipToolchain,
    ToolchainMissing,
    find_hip_toolchain,
    hip_compile_command,
)
from workers.toolkit.build_hints import with_hints

ROOT = Path(__file__).resolve().parents[2]
CROSS = HipToolchain("clang-cross", "/usr/bin/clang++-19", "Debian clang version 19.1.7",
                     "/cache/amdgcn-bitcode", True, "/usr")
ROCM = HipToolchain("rocm", "/opt/rocm/bin/hipcc", "HIP version: 6.4", None, True, "/opt/rocm")
INFO = HostBuildInfo("/py/include", "/pb/include", ".cpython-312-x86_64-linux-gnu.so")
ROCM_TORCH = dataclasses.replace(INFO, torch_hip="6.4.1", torch_include_dirs=("/t/include",),
                                 torch_library_dir="/t/lib", cxx11_abi=True)
TOOLCHAIN = find_hip_toolchain()
needs_toolchain = pytest.mark.skipif(isinstance(TOOLCHAIN, ToolchainMissing),
                                     reason=getattr(TOOLCHAIN, "reason", ""))


def test_rocm_node_links_the_module_hipkittens_style():
    cmd = pybind_build.host_command(ROCM, ["k.cpp"], ["/hk/include"], ["-DKITTENS_CDNA3"], ["gfx942"],
                                    "tk_kernel", INFO, "tk_kernel.cpython-312-x86_64-linux-gnu.so", link=True)
    assert " ".join(cmd.argv) == (
        "/opt/rocm/bin/hipcc -x hip --offload-arch=gfx942 -DKITTENS_CDNA3 -DTORCH_EXTENSION_NAME=tk_kernel "
        "-I/hk/include -I/pb/include -I/py/include -Rpass-analysis=kernel-resource-usage "
        "-shared -fPIC -o tk_kernel.cpython-312-x86_64-linux-gnu.so k.cpp -lamdhip64")
    assert cmd.env == {"HIP_PLATFORM": "amd"}


def test_rocm_torch_adds_its_headers_abi_and_libraries():
    flags = pybind_build.module_flags("tk_kernel", ROCM_TORCH)
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in flags and "-ltorch_hip" in flags and "-lc10_hip" in flags
    assert "-Wl,-rpath,/t/lib" in flags
    assert pybind_build.header_dirs(ROCM_TORCH) == ["/pb/include", "/py/include", "/t/include"]
    # a CPU or CUDA torch contributes nothing: its headers would not compile for HIP
    assert pybind_build.module_flags("m", INFO) == ["-DTORCH_EXTENSION_NAME=m"]


def test_cross_node_compiles_the_host_code_without_linking():
    cmd = pybind_build.host_command(CROSS, ["k.cpp"], [], ["-O3"], ["gfx942"], "tk_kernel", INFO,
                                    "tk_kernel.host-check.o", link=False)
    argv = list(cmd.argv)
    assert argv[:2] == ["/usr/bin/clang++-19", "-c"]
    assert "-shared" not in argv and "-lamdhip64" not in argv
    assert argv[-3:] == ["-o", "tk_kernel.host-check.o", "k.cpp"]


def test_what_blocks_a_host_module():
    assert "clang-19 cross toolchain" in pybind_build.host_module_blocker(CROSS, INFO)
    assert pybind_build.host_module_blocker(ROCM, INFO) == ""
    no_python = dataclasses.replace(INFO, python_include=None)
    assert "Python.h" in pybind_build.host_module_blocker(ROCM, no_python)
    no_pybind = dataclasses.replace(INFO, pybind11_include=None)
    assert "pip install pybind11" in pybind_build.missing_headers(no_pybind)


def test_include_variables_follow_the_toolchain(tmp_path: Path):
    assert ROCM.include_vars() == {"ROCM_INCLUDE_DIR": "/opt/rocm/include",
                                   "HIP_INCLUDE_DIR": "/opt/rocm/include/hip"}
    newer = dataclasses.replace(CROSS, hip_include=str(tmp_path))
    assert newer.include_vars()["HIP_INCLUDE_DIR"] == str(tmp_path / "hip")


def test_newer_hip_headers_come_first_and_cross_defaults_to_O3(tmp_path: Path):
    newer = dataclasses.replace(CROSS, hip_include="/hip6/include")
    (cmd,) = hip_compile_command(newer, ["k.cpp"], ["/hk"], ["-w"], ["gfx942"], "k.hsaco", "code-object")
    argv = list(cmd.argv)
    # hipcc compiles at -O3 by default; the cross toolchain does the same when no -O is given
    assert argv.index("-O3") < argv.index("-I/hip6/include") < argv.index("-w") < argv.index("-I/hk")
    (cmd,) = hip_compile_command(newer, ["k.cpp"], [], ["-O1"], ["gfx942"], "k.hsaco", "code-object")
    assert "-O3" not in cmd.argv


def test_flopwatch_hip_include_must_hold_hip_runtime(tmp_path: Path, monkeypatch):
    if isinstance(TOOLCHAIN, ToolchainMissing) or TOOLCHAIN.kind != "clang-cross":
        pytest.skip("needs the clang-19 cross toolchain")
    env = {"ROCM_PATH": str(tmp_path / "no-rocm"), "FLOPWATCH_HIP_INCLUDE": str(tmp_path)}
    found = find_hip_toolchain(env)
    assert isinstance(found, ToolchainMissing) and "hip/hip_runtime.h" in found.reason
    (tmp_path / "hip").mkdir()
    (tmp_path / "hip" / "hip_runtime.h").write_text("")
    (tmp_path / "hip" / "hip_version.h").write_text("#define HIP_VERSION_MAJOR 6\n#define HIP_VERSION_MINOR 2\n")
    found = find_hip_toolchain(env)
    assert found.hip_include == str(tmp_path) and "HIP headers 6.2" in found.version


def test_missing_rocm6_header_gets_a_hint():
    log = "base_types.cuh:13:10: fatal error: 'hip_bf16.h' file not found"
    text = with_hints("1 error", log, "hip", "pybind11", {})
    assert text.startswith("1 error\nhint: ") and "FLOPWATCH_HIP_INCLUDE" in text
    assert "FLOPWATCH_HIP_INCLUDE" not in with_hints("1 error", "error: 'foo.h' file not found", "hip", "c", {})


def _bundled(name: str):
    valid, _ = discover(ROOT, load_config(ROOT))
    return next(v for v in valid if v.name == name)


def _build(tmp_path: Path, variant, info: HostBuildInfo, src: Path | None = None):
    out = tmp_path / "out"
    out.mkdir()
    return hip_backend.build_pybind11(variant, src or ROOT / variant.folder, out, [ROOT / "kernels" / "include"],
                                      info), out


@needs_toolchain
def test_bundled_tk_kernel_builds_for_gfx942_with_static_analysis(tmp_path: Path):
    v = _bundled("hip_pybind_mfma")
    assert (v.binding.kind, v.binding.module, v.binding.entry) == ("pybind11", "tk_kernel", "dispatch_micro")
    info = pybind_build.host_build_info()
    if pybind_build.missing_headers(info):
        pytest.skip(f"this machine lacks {pybind_build.missing_headers(info)}")
    result, out = _build(tmp_path, v, info)
    (k,) = result.analysis["kernels"].values()
    assert k["arch"] == "gfx942" and k["vgprs"] > 0 and k["agprs"] > 0
    assert k["v_mfma_f32_32x32x8_bf16"] == 4 == k["mfma_insts"]  # one per 8 K-elements of BK = 32
    assert k["vgpr_spill"] == 0 and k["scratch_bytes"] == 0
    # 10 KiB of dynamic LDS (declared in [launch]) fits 6 blocks of 4 waves per CU
    assert k["lds_bytes"] == 10240 and k["waves_per_simd"] == 6 and k["occupancy_limit"] == "lds"
    if TOOLCHAIN.kind == "rocm":
        assert result.ok and sorted(p.name for p in out.iterdir()) == [f"tk_kernel{info.extension_suffix}"]
    else:
        # device code analysed, host code compiled as a check, nothing shipped, jobs skipped
        assert not result.ok and not result.first_errors and "cross toolchain" in result.skip_reason
        assert list(out.iterdir()) == []


@needs_toolchain
def test_missing_python_headers_skip_instead_of_failing(tmp_path: Path):
    v = _bundled("hip_pybind_mfma")
    info = HostBuildInfo(None, None, ".so")
    result, _ = _build(tmp_path, v, info)
    assert not result.ok and not result.first_errors
    assert "pybind11" in result.skip_reason and "Python.h" in result.skip_reason


@needs_toolchain
def test_error_in_binding_code_is_a_build_failure(tmp_path: Path):
    v = _bundled("hip_pybind_mfma")
    info = pybind_build.host_build_info()
    if pybind_build.missing_headers(info):
        pytest.skip(f"this machine lacks {pybind_build.missing_headers(info)}")
    src = tmp_path / "src"
    src.mkdir()
    text = (ROOT / v.folder / v.sources[0]).read_text()
    (src / v.sources[0]).write_text(text.replace("const int M = a.rows", "const int M = a.rowz"))
    result, _ = _build(tmp_path, v, info, src)
    assert not result.ok and not result.skip_reason
    assert "rowz" in result.first_errors


def test_doctor_line_for_pybind11_modules():
    ok, detail, hint = pybind_build.capability(CROSS, INFO)
    assert ok and "host code compiled" in detail and "FLOPWATCH_HIP_INCLUDE" in hint
    ok, detail, hint = pybind_build.capability(dataclasses.replace(CROSS, hip_include="/h"), INFO)
    assert ok and "/h" in detail and hint == ""
    ok, detail, _ = pybind_build.capability(ROCM, ROCM_TORCH)
    assert ok and "host module linked" in detail and "6.4.1" in detail
    ok, detail, hint = pybind_build.capability(ROCM, dataclasses.replace(INFO, python_include=None))
    assert not ok and "Python.h" in detail and "python3-dev" in hint
    assert pybind_build.capability(None, INFO)[0] is False


def test_missing_dependencies_are_the_nodes_not_the_sources():
    torch_log = "gemm.hip:5:10: fatal error: 'torch/extension.h' file not found"
    assert "ROCm build of torch" in pybind_build.missing_dependency(torch_log, INFO)
    assert pybind_build.missing_dependency(torch_log, ROCM_TORCH) == ""  # there it is the source's problem
    py_log = "pybind11/detail/common.h:274:10: fatal error: 'Python.h' file not found"
    assert "Python.h" in pybind_build.missing_dependency(py_log, dataclasses.replace(INFO, python_include=None))
    assert pybind_build.missing_dependency(py_log, INFO) == ""
    assert pybind_build.missing_dependency("k.cpp:3:5: error: use of undeclared identifier 'x'", INFO) == ""


@needs_toolchain
def test_selftest_module_with_torch_headers_is_skipped_without_rocm_torch(tmp_path: Path):
    info = pybind_build.host_build_info()
    if info.torch_hip:
        pytest.skip("this node has a ROCm torch")
    valid, _ = discover(ROOT / "workers" / "selftest", load_config(ROOT / "workers" / "selftest"))
    v = next(v for v in valid if v.name == "selftest_hip_pybind11")
    out = tmp_path / "out"
    out.mkdir()
    result = hip_backend.build_pybind11(v, ROOT / "workers" / "selftest" / v.folder, out, [], info)
    assert not result.ok and not result.first_errors and "ROCm build of torch" in result.skip_reason
