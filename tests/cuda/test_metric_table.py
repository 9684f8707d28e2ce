"""The metric table, its evaluator and the raw-kernel launch expressions."""

import pytest

from workers.core import formula as expr
from workers.cuda import metrics
from workers.toolkit import launch_expr


def test_table_names_and_required_metrics():
    table = metrics.load_table("sm90")
    assert {"l1_hit_pct", "coalescing_pct", "occupancy_pct", "warps_per_sm", "l2_hit_pct", "tensor_insts",
            "dram_bytes", "duration_ns", "registers_per_thread", "smem_per_block"} <= set(table)
    wanted = metrics.required_metrics(table)
    assert "smsp__sass_data_bytes_mem_global_op_ld.sum" in wanted
    assert "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum" in wanted  # the fallback's
    assert len(wanted) == len(set(wanted))


def test_coalescing_formula_by_hand():
    table = metrics.load_table("sm90")
    # 16-byte vector loads, fully coalesced: 512 bytes per request = 16 sectors, ideal.
    raw = {"smsp__sass_data_bytes_mem_global_op_ld.sum": 512.0 * 100,
           "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 16.0 * 100,
           "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 100.0}
    assert metrics.derive(raw, table)["coalescing_pct"] == 100.0
    raw["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] = 32.0 * 100  # half of each sector wasted
    assert metrics.derive(raw, table)["coalescing_pct"] == 50.0
    raw["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] = 0.0  # no loads: left out, not 0
    assert "coalescing_pct" not in metrics.derive(raw, table)


def test_missing_metrics_are_left_out():
    derived = metrics.derive({"gpu__time_duration.sum": 10.0}, metrics.load_table("sm90"))
    assert derived == {"duration_ns": 10.0}


def test_evaluator_is_safe():
    assert expr.evaluate("a.sum + 2 * b__c.pct / 4", {"a.sum": 1, "b__c.pct": 8}) == 5
    assert expr.names("min(100, x.y / z)") == ["x.y", "z"]
    for bad in ("__import__('os')", "a.sum if 1 else 2", "a[0]", "(1).real", "a ** 2", "f(x=1)"):
        with pytest.raises(expr.ExpressionError):
            expr.evaluate(bad, {"a.sum": 1, "a": 1, "x": 1}, {"f": abs})
    with pytest.raises(expr.ExpressionError, match="unknown name"):
        expr.evaluate("nope + 1", {})


def test_launch_expressions():
    sizes = {"M": 4096, "N": 1000, "K": 128}
    assert launch_expr.dims3(["ceil(N/16)", "ceil(M/16)"], sizes) == (63, 256, 1)
    assert launch_expr.dims3([16, 16], sizes) == (16, 16, 1)
    assert launch_expr.dims3(["min(M // 128, 132)", "max(1, K/256)", 2], sizes) == (32, 1, 2)
    with pytest.raises(expr.ExpressionError, match="whole number"):
        launch_expr.dimension("N/16", sizes)  # 62.5 blocks
    with pytest.raises(expr.ExpressionError):
        launch_expr.dims3([1, 1, 1, 1], sizes)
    with pytest.raises(expr.ExpressionError):
        launch_expr.dimension("os.system", sizes)
