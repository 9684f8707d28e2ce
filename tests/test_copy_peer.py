"""The copy peer runs as a kernel (so the profilers see it) and copies bit for bit; the profile
stage turns an ncu report without kernels into a note, and a report with kernels into counters."""

from __future__ import annotations

import csv
import importlib.util
import os
import stat
import sys
from pathlib import Path

import pytest
import torch

from workers.measure import profile

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "ncu" / "flopwatch_h100" / "ncu_copy_raw.csv"
# What ncu 2025.3 printed for the old peer on an H100 (docs/gpu-runs/suite_h100.txt): the timed
# range held only a cudaMemcpyAsync, which the copy engine carries out.
NO_KERNEL = ("==WARNING== No kernels were profiled.\n"
             "==WARNING== Note that specified NVTX include expressions match only push/pop ranges.\n")


def _peer():
    spec = importlib.util.spec_from_file_location("torch_copy_ref", ROOT / "kernels/copy/torch_copy/ref.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.copy


def test_peer_copies_every_bit_of_finite_and_special_values():
    src = torch.randn(4099, generator=torch.Generator().manual_seed(3))
    src[:6] = torch.tensor([-0.0, 0.0, float("inf"), float("-inf"), 1e-45, -3.4e38])
    dst = torch.full_like(src, 7.0)
    _peer()(src, dst)
    assert torch.equal(src.view(torch.int32), dst.view(torch.int32))


def test_peer_does_not_go_through_copy_():
    """copy_ of contiguous same-dtype tensors is a copy-engine memcpy on GPUs: no kernel for ncu.
    Whatever op the peer uses, the full-size data must reach dst through an op that is not copy_."""
    src, dst = torch.randn(1024), torch.empty(1024)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        _peer()(src, dst)
    ops = [(e.name, e.input_shapes) for e in prof.events()]
    full_size = [name for name, shapes in ops if [1024] in shapes]
    assert full_size and "aten::copy_" not in full_size, ops
    assert any(name.startswith("aten::") for name in full_size), ops


def _fake_ncu(tmp_path: Path, output: str) -> str:
    """An `ncu` that writes `output` to its --log-file and runs nothing."""
    payload = tmp_path / "payload.txt"
    payload.write_text(output)
    script = tmp_path / "ncu"
    script.write_text(f"#!{sys.executable}\nimport sys\nargv = sys.argv\n"
                      f"open(argv[argv.index('--log-file') + 1], 'w').write(open({str(payload)!r}).read())\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_no_kernel_in_the_range_is_a_note_not_counters(tmp_path, monkeypatch):
    from workers.cuda import toolchain

    monkeypatch.setattr(toolchain, "find_ncu", lambda: _fake_ncu(tmp_path, NO_KERNEL))
    counters, note = profile.profile_cuda(tmp_path, "spec.json", 30, dict(os.environ))
    assert counters == {}
    assert note.startswith("ncu profiled no kernel inside the timed range") and "No kernels were profiled" in note


def _fixture_rows() -> list[dict[str, float]]:
    """The fixture's kernels read with the csv module, numbers without thousands separators."""
    lines = [line for line in FIXTURE.read_text().splitlines() if line.startswith('"')]
    header, _units, *rows = csv.reader(lines)
    wanted = ("smsp__sass_data_bytes_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
              "gpu__time_duration.sum")
    return [{"name": row[header.index("Kernel Name")], **{w: float(row[header.index(w)].replace(",", ""))
                                                          for w in wanted}} for row in rows]


def test_kernels_in_the_range_become_counters(tmp_path, monkeypatch):
    from workers.cuda import toolchain

    monkeypatch.setattr(toolchain, "find_ncu", lambda: _fake_ncu(tmp_path, FIXTURE.read_text()))
    counters, note = profile.profile_cuda(tmp_path, "spec.json", 30, dict(os.environ))
    assert note == ""
    rows = _fixture_rows()
    assert counters["kernels"] == len(rows) == 3 and counters["kernel_names"] == [r["name"] for r in rows]
    # Coalescing per kernel: bytes the loads asked for, in 32-byte sectors, over the sectors
    # fetched. The contiguous copy fetches exactly what it asks (100%); the strided one, one
    # 4-byte word per sector (12.5%); cuBLAS's kernel has no such loads and is left out.
    per_kernel = {r["name"]: 100 * (r["smsp__sass_data_bytes_mem_global_op_ld.sum"] / 32)
                  / r["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
                  for r in rows if r["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]}
    assert sorted(per_kernel.values()) == [12.5, 100.0]
    # One figure for the call: the mean weighted by each kernel's duration.
    weight = {r["name"]: r["gpu__time_duration.sum"] for r in rows}
    expected = sum(v * weight[k] for k, v in per_kernel.items()) / sum(weight[k] for k in per_kernel)
    assert counters["coalescing_pct"] == pytest.approx(expected, abs=1e-3)
    assert counters["duration_ns"] == sum(weight.values())
