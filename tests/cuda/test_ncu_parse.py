"""ncu --csv --page raw parsing and derived metrics on recorded H100 output, and ncu_command."""

import csv
from pathlib import Path

import pytest

from workers.cuda import metrics, ncu

NCU = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"
PROBE_RAW = sorted((NCU / "h100_probe").glob("ncu_probe_raw*.csv"))


def test_probe_fixtures_are_present():
    assert [p.name for p in PROBE_RAW] == ["ncu_probe_raw.csv", "ncu_probe_raw_baseunits.csv"]


def _raw(path: Path, kernel: str, metric: str) -> tuple[float, str]:
    """(value, unit) of one metric of one kernel, read with the csv module (not the parser)."""
    lines = [line for line in path.read_text().splitlines() if line.startswith('"')]
    header, units, *rows = csv.reader(lines)
    row = next(r for r in rows if r[header.index("Kernel Name")] == kernel)
    return float(row[header.index(metric)].replace(",", "")), units[header.index(metric)]


@pytest.mark.parametrize("path", PROBE_RAW, ids=lambda p: p.name)
def test_probe_launches(path):
    launches = ncu.parse_raw_csv(path.read_text())
    assert [(l.launch_id, l.kernel) for l in launches] == [(0, "copy_coalesced"), (1, "copy_strided"), (2, "gemm_naive")]
    coalesced, strided, gemm = launches
    sectors = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
    requests = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
    # probe_kernels.cu: n = 2^24 floats, one 4-byte load a thread. A warp's load is one request;
    # contiguous lanes fill 4 sectors of 32 bytes, lanes 33 words apart touch 32 sectors.
    n = 1 << 24
    assert coalesced.metrics[requests] == strided.metrics[requests] == n // 32
    assert coalesced.metrics[sectors] == n * 4 // 32
    assert strided.metrics[sectors] == 32 * (n // 32)
    assert gemm.info["Block Size"] == "(16, 16, 1)"  # dim3(16, 16) in the source
    assert gemm.info["launch__cluster_scheduling_policy"] == "PolicySpread"

    table = metrics.load_table("sm90")
    c, s, g = (metrics.derive(l.metrics, table) for l in launches)
    # These files lack the requested-bytes metric: the 4-byte fallback formula is used,
    # 100 * 4 * requests / sectors.
    assert c["coalescing_pct"] == pytest.approx(100.0) and s["coalescing_pct"] == pytest.approx(12.5)
    # The rest is read as recorded: compare with the raw text, parsed here independently.
    assert g["l1_hit_pct"] == _raw(path, "gemm_naive", "l1tex__t_sector_hit_rate.pct")[0]
    assert g["registers_per_thread"] == _raw(path, "gemm_naive", "launch__registers_per_thread")[0]
    assert g["smem_per_block"] == 0  # the naive GEMM declares no shared memory
    assert gemm.units["dram__bytes_read.sum"] == _raw(path, "gemm_naive", "dram__bytes_read.sum")[1] == "byte"
    assert c["dram_bytes"] == (_raw(path, "copy_coalesced", "dram__bytes_read.sum")[0]
                               + _raw(path, "copy_coalesced", "dram__bytes_write.sum")[0])
    duration, unit = _raw(path, "gemm_naive", "gpu__time_duration.sum")
    assert g["duration_ns"] == duration * {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6}[unit]


def test_sections_page_is_refused():
    text = (NCU / "h100_probe" / "ncu_probe_sections.csv").read_text()
    with pytest.raises(ValueError, match="--page raw"):
        ncu.parse_raw_csv(text)


def test_flopwatch_capture_uses_requested_bytes():
    launches = ncu.parse_raw_csv((NCU / "flopwatch_h100" / "ncu_copy_raw.csv").read_text())
    names = [l.kernel for l in launches]
    assert names[0].startswith("copy_coalesced_kernel") and names[1].startswith("copy_strided_kernel")
    assert names[2].startswith("nvjet_")  # cuBLAS, found by NVTX range not by name
    table = metrics.load_table("sm90")
    c, s, mm = (metrics.derive(l.metrics, table) for l in launches)
    assert launches[0].metrics["smsp__sass_data_bytes_mem_global_op_ld.sum"] == 4 * (1 << 24)
    assert c["coalescing_pct"] == pytest.approx(100.0) and s["coalescing_pct"] == pytest.approx(12.5)
    assert s["smem_per_block"] == 33792 and s["registers_per_thread"] == 39
    assert mm["tensor_insts"] > 0 and "coalescing_pct" not in mm  # TMA loads: no LSU global loads


def test_unit_scaling_and_numbers():
    assert ncu.parse_number('1,234,567.5') == 1234567.5
    assert ncu.parse_number("(256, 1, 1)") is None and ncu.parse_number("n/a") is None
    text = ('"ID","Kernel Name","dram__bytes_read.sum","gpu__time_duration.sum"\n'
            '"","","Mbyte","usecond"\n"0","k","1.50","2,000.5"\n')
    [launch] = ncu.parse_raw_csv("==PROF== Connected\nprogram output\n" + text)
    assert launch.metrics == {"dram__bytes_read.sum": 1.5e6, "gpu__time_duration.sum": 2_000_500.0}
    assert launch.units == {"dram__bytes_read.sum": "byte", "gpu__time_duration.sum": "nsecond"}


def test_ncu_command():
    cmd = ncu.ncu_command("/cuda/bin/ncu", ["a.sum", "b.pct"], ["python3", "child.py"], output_csv="r.csv")
    assert " ".join(cmd) == (
        "/cuda/bin/ncu --target-processes all --nvtx --nvtx-include flopwatch:timed/ "
        "--metrics a.sum,b.pct --csv --page raw --print-units base --log-file r.csv python3 child.py")
    cmd = ncu.ncu_command("ncu", ["a.sum"], ["x"], nvtx_range=None, kernel_regex="gemm.*", launch_count=3)
    assert "--nvtx" not in cmd
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:gemm.*" and cmd[cmd.index("--launch-count") + 1] == "3"
    with pytest.raises(ValueError):
        ncu.ncu_command("ncu", [], ["x"])
