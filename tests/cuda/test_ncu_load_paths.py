"""Coalescing over every global-load path, on ncu output recorded on an H200
(tests/fixtures/ncu/load_paths_h200): a kernel moving its tiles with asynchronous copies (LDGSTS)
is judged on them, not on its handful of scalar loads; kernels of plain loads keep their figures;
a kernel loading through TMA only gets "n/a" with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.cuda import metrics, ncu
from workers.measure import profile

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ncu" / "load_paths_h200"


def _counters(case: str, table=None) -> dict:
    launches = ncu.parse_raw_csv((FIXTURES / f"{case}.csv").read_text())
    table = table or metrics.load_table("sm90")
    return profile.explain_missing(profile.combine([metrics.derive(x.metrics, table) for x in launches]))


@pytest.mark.parametrize("case, async_bytes", [("flash_b2_s4096", 1_073_741_824), ("flash_b4_s1024", 134_217_728)])
def test_flash_attention_is_judged_on_its_asynchronous_copies(case, async_bytes):
    c = _counters(case)
    assert c["coalescing_pct"] == pytest.approx(100.0) and c["async_copy_bytes"] == async_bytes
    assert c["tma_load_bytes"] == 0


def test_counting_plain_loads_alone_reads_the_figure_the_issue_found():
    """The former formula (LDG bytes against the sectors of LDG and LDGSTS): 1.5% and 5.9%."""
    table = metrics.load_table("sm90")
    old = {"coalescing_pct": metrics.MetricFormula("coalescing_pct", table["coalescing_pct"].expressions[1], None, "%")}
    assert _counters("flash_b2_s4096", old)["coalescing_pct"] == pytest.approx(1.54, abs=0.01)
    assert _counters("flash_b4_s1024", old)["coalescing_pct"] == pytest.approx(5.88, abs=0.01)


@pytest.mark.parametrize("case, pct", [("torch_copy", 100.0), ("strided_copy", 12.5), ("triton_gemm", 100.0)])
def test_plain_load_kernels_keep_their_figures(case, pct):
    c = _counters(case)
    assert c["coalescing_pct"] == pytest.approx(pct, abs=0.01) and "coalescing_na" not in c


def test_a_kernel_loading_through_tma_only_is_not_applicable_with_the_reason():
    c = _counters("torch_matmul")
    assert "coalescing_pct" not in c and c["tma_load_bytes"] == 1_610_612_736
    assert c["coalescing_na"].startswith("n/a: global loads through TMA only")


def test_a_report_without_the_async_metric_falls_back_to_plain_loads():
    launches = ncu.parse_raw_csv((FIXTURES / "strided_copy.csv").read_text())
    raw = {k: v for k, v in launches[0].metrics.items() if "ldgsts" not in k}
    assert metrics.derive(raw, metrics.load_table("sm90"))["coalescing_pct"] == pytest.approx(12.5)
