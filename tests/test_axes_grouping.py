"""The axes view's grouping (reports/axes.py): which rows form a sweep, how its points lie over
one, two and three axes, the best point, failed and missing points; and the commit page that
renders it."""

from __future__ import annotations

import dataclasses

from pipeline.run.summary import sort_rows, with_peer
from reports import axes
from reports.site import write_commit_page
from workers.core.params import point_name
from workers.core.records import Result

SHAPE = "M=4096,N=4096,K=4096"
FLOPS = 2 * 4096**3


def result(variant: str, tflops: float | None, status: str = "ok", shape: str = SHAPE, peer: bool = False) -> dict:
    """A stored result row as the commit page gets it: `tflops` None for a point that did not time."""
    seconds = FLOPS / (tflops * 1e12) if tflops else None
    return dataclasses.asdict(Result(
        variant=variant, op="gemm", backend="triton", shape=shape, dtype="fp16", device="cuda:NVIDIA H100",
        status=status, median_s=seconds, ci_low_s=seconds, ci_high_s=seconds, flops=FLOPS, peer=peer,
        diagnostic="" if status == "ok" else f"{status}: see the log"))


def page_rows(rows: list[dict]) -> list[dict]:
    return sort_rows(with_peer(rows))


def grid(family: str, tflops: dict[tuple, float | None], axes_names: tuple[str, ...], failed: str = "") -> list[dict]:
    """One row per point: {(value, value, ...): TFLOP/s or None (then status `failed`)}."""
    return [result(point_name(family, dict(zip(axes_names, values))), rate, "ok" if rate else failed)
            for values, rate in tflops.items()]


def test_two_axes_are_rows_by_columns_with_the_best_point_marked():
    rows = page_rows(grid("tri", {(64, 2): 300, (64, 3): 350, (128, 2): 400, (128, 3): 612},
                          ("BLOCK_M", "STAGES")) + [result("cublas", 700, peer=True)])
    [t] = axes.tables(rows)
    assert (t.family, t.row_axis, t.col_axes) == ("tri", "BLOCK_M", ("STAGES",))
    assert t.row_labels == ("64", "128") and t.col_labels == ("2", "3")
    assert [[c.text for c in line] for line in t.cells] == [["300", "350"], ["400", "612"]]
    best = [c for line in t.cells for c in line if c.best]
    assert [c.point for c in best] == ["BLOCK_M=128,STAGES=3"] and t.best is best[0]
    assert t.caption == "best: BLOCK_M=128,STAGES=3 — 612 TFLOP/s" and t.unit == "TFLOP/s"
    assert round(t.best.pct_of_peer) == 87 and t.cells[0][0].share == 300 / 612


def test_numbers_are_ordered_as_numbers_not_text():
    rows = page_rows(grid("tri", {(128,): 2, (64,): 1, (256,): 3}, ("BLOCK_M",)))
    [t] = axes.tables(rows)
    assert t.col_labels == ("64", "128", "256")


def test_one_axis_is_a_single_row():
    rows = page_rows(grid("tri", {(2,): 500, (4,): 450, (8,): 520}, ("num_warps",)))
    [t] = axes.tables(rows)
    assert t.row_axis is None and t.col_axes == ("num_warps",) and len(t.cells) == 1
    assert [c.text for c in t.cells[0]] == ["500", "450", "520"]
    assert t.best.point == "num_warps=8"


def test_three_axes_put_the_first_in_rows_and_the_product_of_the_rest_in_columns():
    values = {(m, s, w): 100 + m / 2 + 10 * s + w for m in (64, 128) for s in (2, 3) for w in (4, 8)}
    rows = page_rows(grid("tri", values, ("BLOCK_M", "STAGES", "num_warps")))
    [t] = axes.tables(rows)
    assert t.row_axis == "BLOCK_M" and t.col_axes == ("STAGES", "num_warps")
    assert t.col_labels == ("STAGES=2,num_warps=4", "STAGES=2,num_warps=8", "STAGES=3,num_warps=4",
                            "STAGES=3,num_warps=8")
    assert t.cells[1][3].point == "BLOCK_M=128,STAGES=3,num_warps=8" and t.cells[1][3].best
    assert sum(c.best for line in t.cells for c in line) == 1 and t.n_points == 8


def test_a_failed_point_shows_its_status_and_is_never_the_best():
    rows = page_rows(grid("tri", {(64, 2): 300, (64, 3): None, (128, 2): None, (128, 3): 280},
                          ("BLOCK_M", "STAGES"), failed="build_failed"))
    [t] = axes.tables(rows)
    failed = t.cells[0][1]
    assert failed.failed and failed.text == "build_failed" and failed.share is None and not failed.best
    assert t.best.point == "BLOCK_M=64,STAGES=2" and t.n_failed == 2
    assert axes.heat_colour(failed.share) == ""


def test_every_point_failing_leaves_no_best_and_says_so():
    rows = page_rows(grid("tri", {(1,): None, (2,): None}, ("A",), failed="crashed"))
    [t] = axes.tables(rows)
    assert t.best is None and t.caption == "no point measured: 2 of 2 failed"
    assert [c.text for c in t.cells[0]] == ["crashed", "crashed"]


def test_a_point_not_run_is_an_empty_cell():
    rows = page_rows(grid("tri", {(64, 2): 300, (128, 3): 400}, ("BLOCK_M", "STAGES")))
    [t] = axes.tables(rows)
    assert t.cells[0][1] is None and t.cells[1][0] is None


def test_plain_variants_and_single_points_are_no_sweep():
    rows = page_rows([result("cuda_naive", 10), result("cuda_tiled", 20),
                      result(point_name("one", {"A": 1}), 30),
                      *grid("tri", {(1,): 40, (2,): 50}, ("A",))])
    assert [t.family for t in axes.tables(rows)] == ["tri"]


def test_one_table_per_shape_and_families_apart():
    small = "M=1024,N=1024,K=1024"
    rows = page_rows([result("b[A=1]", 1), result("b[A=2]", 2), result("a[A=1]", 3, shape=small),
                      result("a[A=2]", 4, shape=small), result("a[A=1]", 5), result("a[A=2]", 6)])
    assert [(t.family, t.shape) for t in axes.tables(rows)] == [("a", small), ("a", SHAPE), ("b", SHAPE)]


def test_heat_grows_with_the_share_of_the_best():
    low, high = axes.heat_colour(0.5), axes.heat_colour(1.0)
    alpha = [float(c.rsplit(",", 1)[1].rstrip(")")) for c in (low, high)]
    assert alpha[0] < alpha[1]


def test_point_label_names_the_point_and_nothing_for_a_plain_variant():
    assert axes.point_label("tri[BLOCK_M=128,USE_TMA=true]") == "BLOCK_M=128,USE_TMA=true"
    assert axes.point_label("cuda_tiled") == ""


def test_the_commit_page_shows_the_axes_table(tmp_path):
    rows = page_rows(grid("tri", {(64, 2): 300, (64, 3): None, (128, 2): 400, (128, 3): 612},
                          ("BLOCK_M", "STAGES"), failed="invalid") + [result("cublas", 700, peer=True)])
    page = write_commit_page(tmp_path, {"sha": "a" * 40, "subject": "s", "author": "a", "authored_at": "2026"}, rows,
                             trend_page=lambda *key: f"trend-{key[0]}.html")
    html = page.read_text()
    view = html[html.index('<h2 id="axes">'):]
    assert view.count('class="axes-cell') == 4 and view.count('class="axes-cell best"') == 1
    assert "best: BLOCK_M=128,STAGES=3 — 612 TFLOP/s" in view and "★" in view
    assert 'href="trend-tri[BLOCK_M=128,STAGES=3].html"' in view
    assert ">invalid<" in view and 'href="#fail-tri_BLOCK_M_64_STAGES_3' in view  # to its failure panel
    assert "87% of peer" in view


def test_a_commit_without_sweeps_has_no_axes_view(tmp_path):
    page = write_commit_page(tmp_path, {"sha": "b" * 40, "subject": "s", "author": "a", "authored_at": "2026"},
                             page_rows([result("cuda_tiled", 20)]))
    assert 'id="axes"' not in page.read_text()


def test_a_cell_says_what_limits_its_point():
    from reports.axes import resource_line

    nvidia = {"vendor": "nvidia", "kernels": {
        "k<(bool)0>": {"registers": 200, "smem_bytes": 1024, "spill_stores": 0, "spill_loads": 0},
        "k<(bool)1>": {"registers": 255, "smem_bytes": 147456, "spill_stores": 5300, "spill_loads": 5168}}}
    assert resource_line(nvidia) == "255 regs · smem 144 KiB · spills 5300 B"
    amd = {"vendor": "amd", "kernels": {"g": {"vgprs": 128, "agprs": 64, "lds_bytes": 65536, "waves_per_cu": 16,
                                              "occupancy_limit": "lds", "vgpr_spill": 0}}}
    assert resource_line(amd) == "VGPR 128 + AGPR 64 · LDS 64 KiB · 16 waves/CU (lds)"
    assert resource_line(None) == "" and resource_line({"kernels": {}}) == ""
