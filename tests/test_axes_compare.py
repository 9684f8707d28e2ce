"""The PR comment of a compare with swept variants: a family's points at one shape are one line
("3 of 12 points slower, 9 same") naming the points that moved; plain variants keep their rows."""

from __future__ import annotations

import numpy as np

from pipeline.history import compare as cmp
from workers.core.params import point_name

FLOPS = 2 * 256**3
SHAPE = "M=256,N=256,K=256"


def _row(variant, seconds, status="ok", shape=SHAPE, seed=0):
    rng = np.random.default_rng(seed)
    samples = list(seconds * (1 + 0.005 * rng.standard_normal(30))) if status == "ok" else []
    return {"variant": variant, "shape": shape, "dtype": "fp32", "device": "cpu:test", "status": status,
            "samples": samples, "flops": FLOPS, "resources": {}, "counters": {},
            "diagnostic": "" if status == "ok" else "error: expected ';'"}


def _report(base_rows, head_rows):
    rows = cmp.compare_sides(cmp.pool(base_rows), cmp.pool(head_rows), 0.03)
    return cmp.Report("a" * 40, "base", "b" * 40, "head", 0.03, 3, tuple(rows))


POINTS = [{"BLOCK_M": m, "STAGES": s} for m in (64, 128, 256) for s in (2, 3, 4, 5)]  # 12 points
SLOWED = {(128, 3): 1.25, (64, 2): 1.10, (256, 5): 1.15}  # head's time over base's


def _sweep(shape=SHAPE):
    base, head = [], []
    for i, p in enumerate(POINTS):
        name = point_name("tri", p)
        base.append(_row(name, 1e-3, shape=shape, seed=i))
        head.append(_row(name, 1e-3 * SLOWED.get((p["BLOCK_M"], p["STAGES"]), 1.0), shape=shape, seed=100 + i))
    return base, head


def test_a_family_is_one_line_saying_how_many_points_are_slower():
    base, head = _sweep()
    md = cmp.render_markdown(_report(base + [_row("plain", 1e-3, seed=50)], head + [_row("plain", 1e-3, seed=51)]))
    table = [line for line in md.splitlines() if line.startswith("| ")][1:]
    assert len(table) == 2, md  # the family and the plain variant: not thirteen rows
    family = next(line for line in table if "tri" in line)
    assert "**3 of 12 points slower, 9 same**" in family
    # the slower points named, largest slowdown first, with their change
    named = family.split(" | ")[-1]
    assert named.index("BLOCK_M=128,STAGES=3 slower -20") < named.index("BLOCK_M=256,STAGES=5 slower -13") \
        < named.index("BLOCK_M=64,STAGES=2 slower -9")
    assert "tri\\[" not in md  # no point row of the family is left
    assert any("| same | plain |" in line for line in table)
    assert "3 slower" in md  # the header still counts series


def test_more_moved_points_than_named_are_counted():
    base, head = _sweep()
    head = [dict(r, samples=[s * 1.2 for s in r["samples"]]) for r in head[:6]] + head[6:]
    md = cmp.render_markdown(_report(base, head))
    family = next(line for line in md.splitlines() if "| tri |" in line)
    slower = sum(1 for r in _report(base, head).rows if r.kind == "slower")
    assert f"**{slower} of 12 points slower" in family
    assert f"and {slower - cmp.NAMED_POINTS} more" in family and family.count(" slower -") == cmp.NAMED_POINTS


def test_a_newly_failing_point_comes_first_with_its_status():
    base, head = _sweep()
    head[0] = _row(head[0]["variant"], 1e-3, status="build_failed")
    family = next(line for line in cmp.render_markdown(_report(base, head)).splitlines() if "| tri |" in line)
    assert family.startswith("| **1 of 12 points newly failing, 2 slower, 9 same** |")  # (64, 2) was a slower one
    assert "BLOCK_M=64,STAGES=2 build_failed" in family.split(" | ")[-1]


def test_a_calm_family_is_not_bold_and_names_nothing():
    base, _ = _sweep()
    head = [_row(r["variant"], 1e-3, seed=200 + i) for i, r in enumerate(base)]
    family = next(line for line in cmp.render_markdown(_report(base, head)).splitlines() if "| tri |" in line)
    assert family.startswith("| 12 of 12 points same |") and family.endswith("|  |  |")
    assert "best " in family  # base and head: the family's fastest point


def test_each_shape_is_its_own_line_and_one_point_stays_a_row():
    base, head = _sweep()
    other = "M=512,N=512,K=512"
    b2, h2 = _sweep(other)
    lone = point_name("solo", {"A": 1})
    md = cmp.render_markdown(_report(base + b2 + [_row(lone, 1e-3)], head + h2 + [_row(lone, 1e-3, seed=9)]))
    assert md.count("of 12 points slower") == 2 and "| same | solo\\[A=1\\] |" in md


def test_grouping_keeps_plain_rows_and_puts_a_family_where_its_first_row_was():
    base, head = _sweep()
    report = _report(base + [_row("fast", 1e-3)], head + [_row("fast", 0.7e-3, seed=3)])
    grouped = cmp.group_points(list(report.rows))
    assert [type(g).__name__ for g in grouped] == ["FamilySummary", "Row"]  # slower before faster
    assert grouped[0].counts == [("slower", 3), ("same", 9)]
