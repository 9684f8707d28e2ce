"""Counters and resources under the names kernel developers use, with units and precision."""

from __future__ import annotations

import pytest

from reports import format as fmt
from reports import metric_names as mn


@pytest.mark.parametrize(("shown", "want"), [
    (mn.counter("l1_hit_pct", 50.432081340809916, "amd"), "vL1D hit 50.4%"),
    (mn.counter("l1_hit_pct", 50.432081340809916, "nvidia"), "L1 hit 50.4%"),
    (mn.counter("coalescing_pct", 75.0, "amd"), "coalescing 75%"),
    (mn.counter("waves_per_cu", 8.0, "amd"), "waves/CU 8.0"),
    (mn.counter("mfma_insts", 4194304.0, "amd"), "MFMA 4.2 M"),
    (mn.counter("tensor_insts", 33554432.0, "nvidia"), "tensor insts 33.6 M"),
    (mn.counter("dram_bytes", 3 * 2**30, "nvidia"), "DRAM traffic 3 GiB"),
    (mn.counter("duration_ns", 196123.4, "nvidia"), "duration 196 µs"),
    (mn.resource("vgprs", 128, "k"), "VGPR 128"),
    (mn.resource("lds_bytes", 65536, "k"), "LDS allocated 64 KiB"),
    (mn.resource("smem_bytes", 33792, "k"), "smem static 33 KiB"),
    (mn.resource("lds_bytes", 512, "k"), "LDS allocated 512 B"),
    (mn.resource("registers", 39, "k"), "registers 39"),
    (mn.counter("a_new_counter", 0.123456789), "a new counter 0.1235"),
])
def test_readable_names_units_and_precision(shown, want):
    assert str(shown) == want


def test_tooltips_name_the_flopwatch_metric_and_the_formula_source():
    amd = mn.counter("l1_hit_pct", 50.4, "amd")
    assert amd.name == "counters.l1_hit_pct"
    assert "TCP_TOTAL_CACHE_ACCESSES_sum" in amd.tooltip and "counters_gfx942.toml" in amd.tooltip
    nv = mn.counter("coalescing_pct", 75.0, "nvidia")
    assert "l1tex__t_sectors_pipe_lsu_mem_global_op_ld" in nv.tooltip and "ncu_metrics_sm90.toml" in nv.tooltip
    res = mn.resource("vgprs", 128, "gemm")
    assert res.name == "resources.kernels.gemm.vgprs" and "compiler remarks" in res.tooltip


def test_flattened_names_and_vendors():
    assert str(mn.flat("kernels.gemm.lds_bytes", 32768)) == "gemm: LDS allocated 32 KiB"
    assert str(mn.flat("l1_hit_pct", 66.0, "amd")) == "vL1D hit 66%"
    assert mn.vendor_of("rocm:AMD Instinct MI300X") == "amd" and mn.vendor_of("cuda:H100") == "nvidia"
    assert mn.vendor_of("cpu:x", {"vendor": "nvidia"}) == "nvidia" and mn.vendor_of("cpu:x") == ""


def test_result_rows_skip_text_and_nested_values():
    resources = {"vendor": "amd", "kernels": {"k": {"arch": "gfx942", "vgprs": 96, "occupancy": {"limit": "lds"},
                                                   "vgpr_spill": 0, "ok": True}}}
    [(name, items)] = mn.kernels(resources)
    assert name == "k" and [str(m) for m in items] == ["VGPR 96", "VGPR spill 0"]
    assert [str(m) for m in mn.counters({"kernel_names": ["a"], "l2_hit_pct": 81.0}, "amd")] == ["L2 hit 81%"]
    legend = mn.legend([{"device": "rocm:x", "resources": resources, "counters": {"l2_hit_pct": 81.0}}])
    assert [m.name for m in legend] == ["resources.kernels.<kernel>.vgprs", "resources.kernels.<kernel>.vgpr_spill",
                                        "counters.l2_hit_pct"]


@pytest.mark.parametrize(("value", "want"), [
    (50.432081340809916, "50.43"), (0.00012345678, "0.0001235"), (123456.789, "123.5 k"), (9999.5, "10 k"),
    (1.5e7, "15 M"), (2.5e16, "2.5e+16"), (1.5e-6, "1.5e-06"), (None, "—"), (float("nan"), "—"),
    (float("inf"), "∞"), (3.0, "3"), (-42.123456, "-42.12"),
])
def test_sig_never_prints_more_than_four_significant_digits(value, want):
    assert fmt.sig(value) == want


def test_throughput_units():
    assert fmt.throughput(697.5e12, "FLOP/s") == "698 TFLOP/s"
    assert fmt.throughput(54.21e12, "FLOP/s") == "54.2 TFLOP/s"
    assert fmt.throughput(2953e9, "B/s") == "2.95 TB/s"
    assert fmt.throughput(0.0, "B/s") == "—"
    assert fmt.seconds(1.2345e-3) == "1.234 ms" and fmt.seconds(5.6e-8) == "56 ns"
    assert fmt.shape_label("M=512,N=256,K=64") == "512×256×64" and fmt.pct(-0.0804) == "-8.0%"


def test_static_and_allocated_sizes_are_one_labelled_figure():
    """The compiler's static LDS and the occupancy model's allocation side by side (4160 B of
    tiles take 4608 B in 512-byte granules), and CUDA's static shared memory with its allocation."""
    amd = {"kernels": {"k": {"vgprs": 64, "lds_static_bytes": 4160, "lds_bytes": 4608}}}
    [(_, shown)] = mn.kernels(amd)
    assert [str(m) for m in shown] == ["VGPR 64", "LDS 4160 B, 4608 B allocated"]
    assert "group_segment_fixed_size" in shown[1].source and "512-byte granules" in shown[1].source
    nv = {"kernels": {"k": {"smem_bytes": 16384, "smem_alloc_bytes": 17408}}}
    [(_, [smem])] = mn.kernels(nv)
    assert str(smem) == "smem 16384 B, 17408 B allocated" and "reserved 1 KiB" in smem.source
    same = {"kernels": {"k": {"lds_static_bytes": 4096, "lds_bytes": 4096}}}
    assert [str(m) for m in mn.kernels(same)[0][1]] == ["LDS 4096 B"]
