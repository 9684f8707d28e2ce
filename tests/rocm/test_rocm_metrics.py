import csv
from pathlib import Path

import pytest

from workers.rocm.metrics import (
    compute_metrics,
    dispatch_values,
    evaluate,
    load_metric_table,
    required_counters,
    sum_channels,
    system_constants,
)
from workers.rocm.rocprof import parse_counter_collection

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rocm"
VCOPY = FIX / "vcopy_MI300X"


def _rows(name):
    return list(csv.DictReader((VCOPY / name).open()))


def test_vcopy_mi300x_cache_metrics():
    table = load_metric_table("gfx942")
    constants = system_constants((VCOPY / "sysinfo.csv").read_text())
    assert (constants["cu_count"], constants["num_xcd"]) == (304, 8)
    values = sum_channels(_rows("pmc_perf.csv")[0])  # dispatch 0
    m = compute_metrics(table, values, constants)
    # vL1D hit: 100 - 100 * (65536 read + 131072 write + 0 + 0 atomic requests to L2)
    #           / 524288 cache accesses = 100 - 37.5
    assert m["l1_hit_pct"] == pytest.approx(62.5)
    # coalescing: 32768 TA wavefronts * 64 * 100 / (2097152 TCP accesses * 4) = 25
    # (vcopy moves doubles; the formula's ideal assumes 4-byte lanes)
    assert m["coalescing_pct"] == pytest.approx(25.0)
    # L2 hit: 100 * 66160 / (66160 + 131311), the recorded TCC_HIT_sum / TCC_MISS_sum
    assert m["l2_hit_pct"] == pytest.approx(33.5037, abs=1e-4)
    assert m["mfma_insts"] == 0.0
    assert m["lds_bank_conflict_pct"] is None  # 0 / 0: no LDS use


def test_vcopy_mi300x_channel_sums():
    values = sum_channels(_rows("pmc_perf.csv")[0])
    row = _rows("pmc_perf.csv")[0]
    # 16 channels x 8 XCDs = 128 per-channel columns; their sum equals the recorded _sum
    assert sum(float(row[f"TCC_HIT[{i}]"]) for i in range(128)) == values["TCC_HIT_sum"] == 66160
    # The file records a _sum next to every channel group, collected in another pass, so it
    # can differ slightly from the channels (TCC_EA0_RDREQ: 65775 recorded, 65772 summed);
    # the recorded one is kept, and without it the channels are summed.
    assert values["TCC_EA0_RDREQ_sum"] == 65775
    channels_only = {k: v for k, v in row.items() if k != "TCC_EA0_RDREQ_sum"}
    assert sum_channels(channels_only)["TCC_EA0_RDREQ_sum"] == 65772


def test_vcopy_mi300x_waves_per_cu():
    table = load_metric_table()
    constants = system_constants((VCOPY / "sysinfo.csv").read_text())
    values = sum_channels(_rows("SQ_LEVEL_WAVES.csv")[0])
    m = compute_metrics(table, values, constants, ["occupancy_waves", "waves_per_cu"])
    # 155189876 accumulated wave-cycles / (486977 GRBM cycles / 8 XCDs) = 2549.44 waves on
    # the GPU; / 304 CUs = 8.39 waves per CU (of 32)
    assert m["occupancy_waves"] == pytest.approx(2549.44, abs=0.01)
    assert m["waves_per_cu"] == pytest.approx(8.386, abs=0.001)


def test_hipkittens_lds_conflict_metric_from_rocprofv3_dispatch():
    ds = parse_counter_collection(
        (FIX / "rocprofv3" / "hipkittens_mi350x" / "lds_conflict_counter_collection.csv")
        .read_text())
    cijk = next(d for d in ds if d.kernel_name.startswith("Cijk_"))
    m = compute_metrics(load_metric_table(), dispatch_values(cijk))
    assert m["lds_conflict_cycles_per_inst"] == pytest.approx(512 / 224)
    assert m["lds_alloc"] == 26112
    assert m["duration_ns"] == cijk.end_ns - cijk.start_ns


def test_evaluator_rejects_code_and_reports_missing_names():
    assert evaluate("(a + b) * 2 / c - -1", {"a": 1, "b": 3, "c": 4}) == 3.0
    assert evaluate("a / (b - b)", {"a": 1, "b": 2}) is None
    for bad in ["__import__('os').system('true')", "a ** 2", "[a]", "'x'", "min(a, a)"]:
        with pytest.raises((ValueError, SyntaxError)):
            evaluate(bad, {"a": 1})
    with pytest.raises(KeyError):
        evaluate("missing + 1", {})
    with pytest.raises(KeyError):  # a dotted name is one (ncu-style) name, not attribute access
        evaluate("a.b", {"a": 1})


def test_required_counters_exclude_constants_and_dispatch_fields():
    table = load_metric_table()
    assert required_counters(table, ["waves_per_cu", "duration_ns", "l2_hit_pct"]) == [
        "GRBM_GUI_ACTIVE", "SQ_ACCUM_PREV_HIRES", "TCC_HIT_sum", "TCC_MISS_sum"]


def test_vcopy_mi300x_occupancy_same_pass_versus_merged_grbm():
    """docs/amd.md "Wavefront occupancy: which GRBM_GUI_ACTIVE": flopwatch divides the
    accumulated waves by the GRBM_GUI_ACTIVE of the pass that collected them; rocprof-compute's
    analyzer by the GRBM_GUI_ACTIVE column of its merged pmc_perf.csv, another pass's value."""
    table = load_metric_table()
    constants = system_constants((VCOPY / "sysinfo.csv").read_text())
    same_pass = _rows("SQ_LEVEL_WAVES.csv")
    merged = {r["Dispatch_ID"]: r for r in _rows("pmc_perf.csv")}
    assert len(same_pass) == 3 and set(merged) == {r["Dispatch_ID"] for r in same_pass}
    ratios, ours, theirs = [], [], []
    for row in same_pass:
        values = sum_channels(row)
        as_analyzer = dict(values, GRBM_GUI_ACTIVE=float(merged[row["Dispatch_ID"]]["GRBM_GUI_ACTIVE"]))
        ours.append(compute_metrics(table, values, constants, ["waves_per_cu"])["waves_per_cu"])
        theirs.append(compute_metrics(table, as_analyzer, constants, ["waves_per_cu"])["waves_per_cu"])
        ratios.append(as_analyzer["GRBM_GUI_ACTIVE"] / values["GRBM_GUI_ACTIVE"])
    # dispatch 0: 155189876 / (486977 / 8) / 304 = 8.386 waves/CU;
    #             155189876 / (2572147 / 8) / 304 = 1.588 waves/CU; 2572147 / 486977 = 5.28
    assert ours[0] == pytest.approx(8.386, abs=0.001) and theirs[0] == pytest.approx(1.588, abs=0.001)
    assert [round(r, 2) for r in ratios] == [5.28, 5.50, 6.08]
    for o, t, r in zip(ours, theirs, ratios):
        assert o / t == pytest.approx(r)  # the occupancies differ by exactly the GRBM ratio
