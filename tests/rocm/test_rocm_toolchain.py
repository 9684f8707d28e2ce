from pathlib import Path

import pytest

from workers.rocm.toolchain import (
    HipToolchain,
    ToolchainMissing,
    code_object_path,
    find_hip_toolchain,
    hip_compile_command,
)

CROSS = HipToolchain("clang-cross", "/usr/bin/clang++-19", "Debian clang version 19.1.7",
                     "/cache/amdgcn-bitcode", True, "/usr")
ROCM = HipToolchain("rocm", "/opt/rocm/bin/hipcc", "HIP version: 6.4", None, True, "/opt/rocm")


def test_cross_shared_library_command():
    (cmd,) = hip_compile_command(CROSS, ["k.hip"], ["inc"], ["-O3"], ["gfx942"], "libk.so",
                                 "shared-library")
    assert " ".join(cmd.argv) == (
        "/usr/bin/clang++-19 -x hip --offload-arch=gfx942 --rocm-path=/usr "
        "--rocm-device-lib-path=/cache/amdgcn-bitcode -O3 -Iinc "
        "-Rpass-analysis=kernel-resource-usage -shared -fPIC -o libk.so k.hip -lamdhip64")
    assert cmd.env == {}


def test_rocm_code_object_one_command_per_arch_and_hip_platform():
    cmds = hip_compile_command(ROCM, ["k.hip"], [], ["-O3"], ["gfx942", "gfx950"], "out/k.hsaco",
                               "code-object")
    assert [" ".join(c.argv) for c in cmds] == [
        "/opt/rocm/bin/hipcc -x hip --offload-arch=gfx942 -O3 "
        "-Rpass-analysis=kernel-resource-usage --cuda-device-only --no-gpu-bundle-output "
        "-o out/k-gfx942.hsaco k.hip",
        "/opt/rocm/bin/hipcc -x hip --offload-arch=gfx950 -O3 "
        "-Rpass-analysis=kernel-resource-usage --cuda-device-only --no-gpu-bundle-output "
        "-o out/k-gfx950.hsaco k.hip",
    ]
    assert all(c.env == {"HIP_PLATFORM": "amd"} for c in cmds)


def test_code_object_path_template():
    assert code_object_path("w/{arch}/k.hsaco", "gfx942") == "w/gfx942/k.hsaco"
    assert code_object_path("w.d/kernel", "gfx942") == "w.d/kernel-gfx942"


def test_bad_mode_and_no_arch_rejected():
    with pytest.raises(ValueError):
        hip_compile_command(CROSS, ["k.hip"], [], [], ["gfx942"], "x", "executable")
    with pytest.raises(ValueError):
        hip_compile_command(CROSS, ["k.hip"], [], [], [], "x", "code-object")


def test_missing_isa_bitcode_names_the_install_script(tmp_path: Path, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/clang++-19"
                        if name == "clang++-19" else None)
    env = {"ROCM_PATH": str(tmp_path / "no-rocm"), "FLOPWATCH_HIP_DEVLIB": str(tmp_path)}
    found = find_hip_toolchain(env)
    assert isinstance(found, ToolchainMissing)
    assert "oclc_isa_version_942.bc" in found.reason
    assert "tools/install-hip-cross.sh" in found.reason


def test_rocm_preferred_when_present(tmp_path: Path):
    hipcc = tmp_path / "bin" / "hipcc"
    hipcc.parent.mkdir()
    hipcc.write_text("#!/bin/sh\necho 'HIP version: 6.4.0'\n")
    hipcc.chmod(0o755)
    found = find_hip_toolchain({"ROCM_PATH": str(tmp_path)})
    assert isinstance(found, HipToolchain)
    assert (found.kind, found.compiler, found.version) == ("rocm", str(hipcc),
                                                           "HIP version: 6.4.0")
