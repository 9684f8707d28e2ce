"""The dashboard's latest-throughput matrix with swept variants: a family is one row, at each shape
its best point, named and linked to that point's trend page; plain variants stay as they were."""

from __future__ import annotations

import re

from pipeline.history import dashboard
from pipeline.history.series import Point, Series
from reports.history_pages import trend_page_name
from reports.site import SiteInput, write_site
from workers.core.params import point_name

SHAS = [f"{i:x}" * 40 for i in range(1, 4)]
BIG, SMALL = "M=4096,N=4096,K=4096", "M=1024,N=1024,K=1024"


def _series(variant, rates, shape=BIG, statuses=None, shas=SHAS):
    """A series with one point per commit: rates in TFLOP/s (None: not measured)."""
    statuses = statuses or ["ok"] * len(rates)
    points = tuple(Point(sha, "s", "a", f"2026-01-0{i + 1}", st, 1e-3 if r else None, r * 1e12 if r else None,
                         r * 0.99e12 if r else None, r * 1.01e12 if r else None, 10)
                   for i, (sha, r, st) in enumerate(zip(shas, rates, statuses)))
    return Series(variant, shape, "fp16", "cuda:H100", "FLOP/s", points)


def _board(series):
    ops = {s.key: ("gemm", s.variant == "cublas") for s in series}
    return dashboard.build(series, [], {}, SHAS, ops)


def _sweep(shape=BIG, best=(128, 8)):
    out = []
    for m in (64, 128):
        for w in (4, 8):
            top = (m, w) == best
            out.append(_series(point_name("tri", {"BLOCK_M": m, "num_warps": w}),
                               [500, 510, 612 if top else 400 + m / 4 + w], shape))
    return out


def test_a_family_is_one_row_at_its_best_point_per_shape():
    board = _board([*_sweep(), *_sweep(SMALL, best=(64, 4)), _series("cublas", [700, 700, 700]),
                    _series("plain", [300, 300, 300])])
    [m] = board.matrices
    assert [label for label, _ in m.rows] == ["cublas", "plain", "tri"] and m.swept == ("tri",)
    cells = dict(m.rows)["tri"]
    by_shape = dict(zip(m.shapes, cells))
    assert by_shape[BIG].series.variant == "tri[BLOCK_M=128,num_warps=8]"
    assert by_shape[SMALL].series.variant == "tri[BLOCK_M=64,num_warps=4]"
    assert by_shape[BIG].points == 4 and by_shape[BIG].points_failing == 0
    assert round(by_shape[BIG].pct_of_peer) == round(100 * 612 / 700)
    assert m.shapes == (SMALL, BIG) and dict(zip(m.shapes, dict(m.rows)["plain"]))[BIG].points == 1


def test_failing_points_are_counted_and_an_all_failing_family_shows_a_failure():
    sweep = _sweep()
    sweep[0] = _series(sweep[0].variant, [500, 510, None], statuses=["ok", "ok", "crashed"])
    [m] = _board(sweep).matrices
    [cell] = dict(m.rows)["tri"]
    assert cell.series.variant == "tri[BLOCK_M=128,num_warps=8]" and cell.points_failing == 1
    broken = [_series(s.variant, [500, 510, None], statuses=["ok", "ok", "build_failed"]) for s in _sweep()]
    [m] = _board(broken).matrices
    [cell] = dict(m.rows)["tri"]
    assert cell.latest.status == "build_failed" and cell.points_failing == 4
    assert cell.series.variant == "tri[BLOCK_M=128,num_warps=4]"  # the first by name stands for them


def test_a_point_dropped_from_the_sweep_does_not_win_with_an_old_number():
    dropped = _series(point_name("tri", {"BLOCK_M": 256, "num_warps": 8}), [900], shas=SHAS[:1])
    [m] = _board([*_sweep(), dropped]).matrices
    [cell] = dict(m.rows)["tri"]
    assert cell.series.variant == "tri[BLOCK_M=128,num_warps=8]" and cell.points == 4


def test_a_variant_swept_now_but_plain_before_is_one_row():
    old = _series("tri", [450], shas=SHAS[:1])
    [m] = _board([old, *_sweep()]).matrices
    assert [label for label, _ in m.rows] == ["tri"]


def test_the_dashboard_names_the_best_point_and_links_its_trend(tmp_path):
    series = [*_sweep(), _series("cublas", [700, 700, 700])]
    board = _board(series)
    line = [{"sha": s, "subject": "s", "author": "a", "authored_at": "2026"} for s in SHAS]
    write_site(tmp_path, SiteInput([], line, series, board, [], {}))
    index = (tmp_path / "index.html").read_text()
    matrix = index[index.index('id="matrix"'):]
    assert matrix.count("<tr><th>tri") == 1 and "BLOCK_M=64,num_warps=4" not in matrix
    assert "(swept: best point per shape)" in matrix
    assert re.search(r"best BLOCK_M=128,num_warps=8 <span class=\"muted\">of 4 points", matrix)
    best = next(s for s in series if s.variant == "tri[BLOCK_M=128,num_warps=8]")
    assert f'href="{trend_page_name(best)}"' in matrix and (tmp_path / trend_page_name(best)).exists()
    assert "<th>cublas" in matrix and "swept" not in matrix.split("<th>cublas", 1)[1].split("</th>", 1)[0]
