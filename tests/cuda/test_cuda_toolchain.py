"""nvcc command lines as strings, version parsing and tool discovery."""

import os
import stat

import pytest

from workers.cuda import toolchain


def test_shared_library_command():
    cmd = toolchain.nvcc_command("/cuda/bin/nvcc", ["k.cu"], ["inc"], ["-O3"], ["sm_90a", "sm_80"],
                                 "out.so", "shared-library")
    assert " ".join(cmd) == (
        "/cuda/bin/nvcc -O3 -shared -Xcompiler -fPIC --resource-usage "
        "-gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=sm_80 -Iinc -o out.so k.cu")


def test_fatbin_and_cubin_commands():
    fatbin = toolchain.nvcc_command("nvcc", ["r.cu"], [], [], ["sm_90a"], "r.fatbin", "fatbin")
    assert " ".join(fatbin) == "nvcc -fatbin --resource-usage -gencode arch=compute_90a,code=sm_90a -o r.fatbin r.cu"
    cubin = toolchain.nvcc_command("nvcc", ["r.cu"], [], [], ["sm_100a"], "r.cubin", "cubin")
    assert "-cubin" in cubin and "arch=compute_100a,code=sm_100a" in cubin
    with pytest.raises(ValueError, match="exactly one arch"):
        toolchain.nvcc_command("nvcc", ["r.cu"], [], [], ["sm_90a", "sm_80"], "r.cubin", "cubin")


def test_bad_mode_and_arch_are_rejected():
    with pytest.raises(ValueError, match="unknown build mode"):
        toolchain.nvcc_command("nvcc", ["k.cu"], [], [], ["sm_90a"], "o", "exe")
    with pytest.raises(ValueError, match="not an NVIDIA arch"):
        toolchain.gencode_flags(["gfx942"])


def test_parse_nvcc_version():
    text = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
            "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n")
    assert toolchain.parse_nvcc_version(text) == "13.0.88"
    assert toolchain.parse_nvcc_version("clang version 19") is None


def _fake_tool(path, name):
    path.mkdir(parents=True, exist_ok=True)
    tool = path / name
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return tool


def test_cuda_home_wins_over_path(tmp_path):
    tool = _fake_tool(tmp_path / "cuda" / "bin", "nvcc")
    assert toolchain.find_nvcc({"CUDA_HOME": str(tmp_path / "cuda")}) == str(tool)


def test_wheel_bin_dirs_cover_cuda12_and_cuda13_layouts(tmp_path):
    _fake_tool(tmp_path / "nvidia" / "cu13" / "bin", "cuobjdump")
    _fake_tool(tmp_path / "nvidia" / "cuda_nvdisasm" / "bin", "nvdisasm")
    (tmp_path / "nvidia" / "cublas" / "lib").mkdir(parents=True)
    dirs = toolchain.wheel_bin_dirs([str(tmp_path)])
    assert dirs == [tmp_path / "nvidia" / "cu13" / "bin", tmp_path / "nvidia" / "cuda_nvdisasm" / "bin"]


def test_found_nvcc_reports_a_version():
    nvcc = toolchain.find_nvcc(os.environ)
    if nvcc is None:
        pytest.skip("nvcc not installed")
    assert toolchain.nvcc_version(nvcc).split(".")[0].isdigit()
