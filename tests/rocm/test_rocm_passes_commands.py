import pytest

from workers.rocm.commands import kernel_trace_command, pmc_input_text, rocprofv3_command
from workers.rocm.metrics import load_metric_table, required_counters
from workers.rocm.passes import BLOCK_LIMITS_GFX942, block_of, pass_usage, plan_passes


def test_block_of():
    assert block_of("TCP_TCC_READ_REQ_sum") == "TCP"
    assert block_of("TCC_HIT[3]") == "TCC"
    assert block_of("SQC_DCACHE_HITS") == "SQ"


def test_every_metric_planned_within_limits():
    table = load_metric_table()
    groups = [required_counters(table, [m]) for m in table.metrics]
    passes = plan_passes(groups)
    needed = {c for g in groups for c in g} | {"SQ_LEVEL_WAVES"}
    assert {c for p in passes for c in p} == needed
    for p in passes:
        assert p[0] == "GRBM_GUI_ACTIVE"
        assert len(p) == len(set(p))
        for block, used in pass_usage(p).items():
            assert used <= BLOCK_LIMITS_GFX942[block], (p, block)
    # the accumulator shares a pass with the level counter it integrates
    (occ_pass,) = [p for p in passes if "SQ_ACCUM_PREV_HIRES" in p]
    assert "SQ_LEVEL_WAVES" in occ_pass


def test_l1_hit_rate_alone_needs_two_passes():
    table = load_metric_table()
    passes = plan_passes([required_counters(table, ["l1_hit_pct"])])
    assert len(passes) == 2  # five TCP counters, four TCP registers per pass


def test_group_kept_together_when_it_fits():
    passes = plan_passes([["TCC_HIT_sum", "TCC_MISS_sum"], ["SQ_WAVES", "TCC_REQ_sum"]])
    assert passes == [["GRBM_GUI_ACTIVE", "TCC_HIT_sum", "TCC_MISS_sum", "SQ_WAVES",
                       "TCC_REQ_sum"]]


def test_unknown_block_rejected():
    with pytest.raises(ValueError):
        plan_passes([["XYZ_SOMETHING"]])


def test_single_pass_command_line():
    inv = rocprofv3_command([["SQ_WAVES", "GRBM_GUI_ACTIVE"]], ["python3", "run.py", "--n", "3"],
                            "/tmp/prof", "gemm", kernel_regex="^gemm_bf16")
    assert inv.shell() == ("rocprofv3 --pmc SQ_WAVES GRBM_GUI_ACTIVE --kernel-trace -f csv "
                           "-d /tmp/prof -o gemm --kernel-include-regex '^gemm_bf16' "
                           "-- python3 run.py --n 3")
    assert inv.input_file is None


def test_multi_pass_command_line_and_input_file():
    inv = rocprofv3_command([["GRBM_GUI_ACTIVE", "TCC_HIT_sum"], ["GRBM_GUI_ACTIVE", "SQ_WAVES"]],
                            ["./bench"], "out", "run", input_file="out/input.txt")
    assert inv.argv == ("rocprofv3", "-i", "out/input.txt", "--kernel-trace", "-f", "csv",
                        "-d", "out", "-o", "run", "--", "./bench")
    assert inv.input_text == "pmc: GRBM_GUI_ACTIVE TCC_HIT_sum\npmc: GRBM_GUI_ACTIVE SQ_WAVES\n"
    with pytest.raises(ValueError):
        rocprofv3_command([["A"], ["B"]], ["./bench"], "out", "run")


def test_trace_only_and_input_validation():
    assert kernel_trace_command(["./b"], "d", "n").shell() == (
        "rocprofv3 --kernel-trace -f csv -d d -o n -- ./b")
    with pytest.raises(ValueError):
        pmc_input_text([["A"], []])
