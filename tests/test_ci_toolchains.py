"""Under CI=true a toolchain the CI machine is meant to have fails the run, naming it, instead of
skipping the tests that need it (tests/ci_toolchains.py; tests review, 2026-12-06: with the HIP
cross toolchain's install failed, its tests skipped and the bundled HIP variants lost their VGPR
figures unnoticed). GPU-absent skips stay skips."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import ci_toolchains
import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_ci_machine_has_every_toolchain_it_is_meant_to_have():
    """Once per missing toolchain, whichever tests would have skipped for it."""
    names = ci_toolchains.required()
    if not names:
        pytest.skip("not CI (CI=true), or FLOPWATCH_CI_TOOLCHAINS names none")
    assert ci_toolchains.missing(names) == {}


def test_which_toolchains_are_required():
    assert ci_toolchains.required({}) == ()
    assert ci_toolchains.required({"CI": "false"}) == ()
    assert ci_toolchains.required({"CI": "true"}) == ("gfx942", "nvcc")
    assert ci_toolchains.required({"CI": "true", "FLOPWATCH_CI_TOOLCHAINS": "gfx942"}) == ("gfx942",)
    assert ci_toolchains.required({"CI": "true", "FLOPWATCH_CI_TOOLCHAINS": ""}) == ()
    with pytest.raises(ValueError, match="'gfx942,rocm': rocm is not one of gfx942, nvcc"):
        ci_toolchains.required({"CI": "true", "FLOPWATCH_CI_TOOLCHAINS": "gfx942,rocm"})


def test_a_missing_toolchain_is_named_with_how_to_get_it():
    probes = {"gfx942": lambda: "clang++-19 not found", "nvcc": lambda: None}
    assert ci_toolchains.missing(("gfx942", "nvcc"), probes) == {
        "gfx942": "clang++-19 not found (get it: tools/install-hip-cross.sh, run by scripts/setup.sh as root)"}


@pytest.mark.parametrize("reason, tool", [
    ("no HIP toolchain (tools/install-hip-cross.sh)", "gfx942"),
    ("needs the clang-19 cross toolchain", "gfx942"),
    ("no HIP toolchain (clang with the AMDGPU target)", "gfx942"),
    ("nvcc is not installed: the planted source is not compiled here", "nvcc"),
    ("needs nvcc and the HIP toolchain", "gfx942"),
    ("no CUDA device", None), ("needs an AMD GPU", None), ("a CUDA device is present", None),
    ("PostgreSQL is not installed", None),
])
def test_a_skip_reason_is_told_apart_from_a_missing_gpu(reason, tool):
    assert ci_toolchains.named_in(reason, {"gfx942": "x", "nvcc": "y"}) == tool


def test_every_reason_the_hip_toolchain_finder_gives_is_a_gfx942_skip(tmp_path, monkeypatch):
    """Tests review (2026-12-06, 973e79f): tests/rocm/* skip with the finder's own reason ("no ROCm
    and no clang++-19 on PATH …", "clang++-19 found but …/oclc_isa_version_942.bc is missing …"),
    which the words above did not match: under CI=true they stayed skips."""
    import shutil as shutil_module

    from workers.rocm import toolchain

    monkeypatch.setattr(toolchain, "_find_rocm", lambda env: None)
    reasons = []
    monkeypatch.setattr(shutil_module, "which", lambda name, *a, **kw: None)
    reasons.append(toolchain.find_hip_toolchain({}).reason)  # no clang++-19
    monkeypatch.setattr(shutil_module, "which", lambda name, *a, **kw: f"/usr/bin/{name}")
    reasons.append(toolchain.find_hip_toolchain({"FLOPWATCH_HIP_DEVLIB": str(tmp_path)}).reason)  # no device library
    devlib = tmp_path / "devlib"
    devlib.mkdir()
    (devlib / "oclc_isa_version_942.bc").write_bytes(b"")
    monkeypatch.setattr(toolchain, "_first_line", lambda argv: "clang version 19")
    reasons.append(toolchain.find_hip_toolchain({"FLOPWATCH_HIP_DEVLIB": str(devlib),
                                                 "FLOPWATCH_HIP_INCLUDE": str(tmp_path / "none")}).reason)
    assert len(set(reasons)) == 3, reasons
    for reason in reasons:
        assert ci_toolchains.named_in(reason, {"gfx942": "x", "nvcc": "y"}) == "gfx942", reason


def _pytest(tmp_path: Path, env: dict) -> subprocess.CompletedProcess:
    """A tiny suite under this conftest: one toolchain skip, one GPU skip, one pass."""
    (tmp_path / "test_tiny.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.skipif(True, reason="no HIP toolchain (tools/install-hip-cross.sh)")
        def test_needs_hip():
            pass

        @pytest.mark.skipif(True, reason="no CUDA device")
        def test_needs_a_gpu():
            pass

        def test_plain():
            pass
    """))
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT / "tests"), str(ROOT))), **env},
                          capture_output=True, text=True, timeout=240, cwd=tmp_path, check=False)


def test_under_ci_a_skip_for_a_missing_toolchain_fails_naming_it(tmp_path):
    # No usable cross toolchain: its device libraries are not where it looks (as after a failed
    # tools/install-hip-cross.sh), and no ROCm.
    env = {"CI": "true", "FLOPWATCH_CI_TOOLCHAINS": "gfx942", "FLOPWATCH_HIP_DEVLIB": str(tmp_path / "no-devlib"),
           "ROCM_PATH": str(tmp_path / "no-rocm")}
    done = _pytest(tmp_path, env)
    assert done.returncode == 1, done.stdout[-3000:]
    out = done.stdout
    assert "CI=true: this machine is meant to have gfx942 (FLOPWATCH_CI_TOOLCHAINS), and it is missing" in out, out
    assert "1 passed, 1 skipped" in out and ("1 error" in out or "1 failed" in out), out
    # Outside CI the same skip is a skip.
    quiet = _pytest(tmp_path, {**env, "CI": "false"})
    assert quiet.returncode == 0 and "1 passed, 2 skipped" in quiet.stdout, quiet.stdout[-3000:]
