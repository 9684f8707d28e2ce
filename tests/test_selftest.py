"""`flopwatch selftest` on this node: exit 0, the expected rows, and a failing path exits 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.commands.selftest import variants
from workers.core.records import Result
from workers.measure import device
from workers.selftest import paths

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "selftest", "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_every_binding_and_backend_has_rows(rows):
    by_path = {r["path"]: r for r in rows}
    for binding, backend in [("c", "cpp"), ("c", "cuda"), ("raw", "cuda"), ("pybind11", "cuda"), ("c", "hip"),
                             ("raw", "hip"), ("pybind11", "hip"), ("python", "python"), ("triton", "triton")]:
        assert f"{binding} · {backend} · build" in by_path
    assert "device identity (cpu)" in by_path
    assert any(p.startswith("profiler") for p in by_path)
    assert not [r for r in rows if r["result"] == "FAIL"]


def test_cpu_paths_ran_and_were_timed(rows):
    by_path = {r["path"]: r for r in rows}
    for path in ("c · cpp · run on cpu", "python · python · run on cpu"):
        assert by_path[path]["result"] == "ok", by_path[path]
        assert by_path[path]["seconds"] > 0
        assert "correct" in by_path[path]["detail"]
    assert by_path["c · cpp · build"]["result"] == "ok"
    assert by_path["device identity (cpu)"]["result"] == "ok"


@pytest.mark.skipif(device.gpu_kind() is not None, reason="checks the CPU-only rows")
def test_gpu_paths_are_na_with_a_reason_on_a_cpu_node(rows):
    gpu_rows = [r for r in rows if "run on cuda" in r["path"] or "run on rocm" in r["path"]
                or r["path"].startswith("profiler")]
    assert gpu_rows and all(r["result"] == "n/a" and r["detail"] for r in gpu_rows)


def test_triton_build_is_analysed_for_both_vendors_when_installed(rows):
    row = {r["path"]: r for r in rows}["triton · triton · build"]
    pytest.importorskip("triton")
    assert row["result"] == "ok", row
    assert "sm_90a: regs=" in row["detail"] and "gfx942" in row["detail"]


def test_a_failed_run_is_a_failure_row_with_what_to_check():
    v = next(v for v in variants() if v.name == "selftest_cpp_c")
    bad = Result(variant=v.name, op="gemm", backend="cpp", shape="M=64,N=64,K=64", dtype="fp32", device="cpu",
                 status="incorrect", diagnostic="seed 1: 4096 of 4096 elements wrong")
    row = paths._run_row("c · cpp · run on cpu", v, bad, 1.0)
    assert row.result == paths.FAIL and "4096 of 4096" in row.detail and row.check
    assert paths.failed([row]) and not paths.failed([paths.Row("x", paths.NA)])


def test_profiler_row_needs_a_formula_metric():
    base = dict(variant="v", op="gemm", backend="cuda", shape="s", dtype="fp32", device="cuda", status="ok",
                median_s=1e-5, samples_s=(1e-5,))
    raw_only = paths.profiler_row("cuda", Result(**base, counters={"duration_ns": 3000.0}))
    assert raw_only.result == paths.FAIL
    good = paths.profiler_row("cuda", Result(**base, counters={"duration_ns": 3000.0, "coalescing_pct": 25.0}))
    assert good.result == paths.OK and "coalescing_pct=25" in good.detail
    broken = paths.profiler_row("cuda", Result(**base, counters={"profile_error": "ncu: ERR_NVGPUCTRPERM"}))
    assert broken.result == paths.FAIL and "ERR_NVGPUCTRPERM" in broken.detail


def test_a_cross_target_without_its_analysis_tool_is_a_note_not_a_failure():
    """An NVIDIA node has no llvm-readelf for the gfx942 half of a Triton build: that target is
    not a path this node offers. A kernel problem, or no target analysed at all, still fails."""
    v = next(v for v in variants() if v.backend == "triton")
    nv = {"arch": "sm_90a", "registers": 30, "smem_bytes": 0}
    amd = {"arch": "gfx942", "analysis_error": "no llvm-readelf (apt-get install llvm-19) to read the notes"}
    summary, problem = paths._analysis_summary(v, {"kernels": {"k@sm_90a": nv, "k@gfx942": amd}})
    assert problem == "" and "sm_90a: regs=30" in summary and "not analysed here" in summary
    _, problem = paths._analysis_summary(v, {"kernels": {"k@gfx942": amd}})
    assert "no llvm-readelf" in problem
    spilled = {"arch": "gfx942", "analysis_error": "needs 96 KiB of LDS, a CU has 64 KiB"}
    _, problem = paths._analysis_summary(v, {"kernels": {"k@sm_90a": nv, "k@gfx942": spilled}})
    assert "64 KiB" in problem
