"""The `launch_bound` mark as `run --json`, the run table and compare read it from a result row:
`with_peer` (what `run --json` prints as "results") marks a row whose median is within 2× its
launch floor, its % of peer is shown with the mark, and the table's note counts them."""

from __future__ import annotations

from pipeline.run.summary import launch_bound_line, pct_cell, with_peer


def _row(variant, median_s, floor_s, peer=False):
    return {"variant": variant, "op": "softmax", "shape": "M=4,N=8", "dtype": "fp32", "device": "cuda:H100",
            "status": "ok", "median_s": median_s, "launch_floor_s": floor_s, "peer": peer, "flops": 0,
            "bytes_moved": 256, "samples_s": []}


def test_a_row_within_twice_its_floor_is_launch_bound_and_its_peer_share_says_so():
    rows = with_peer([_row("liger_softmax", 30e-6, 20e-6), _row("peer.softmax", 10e-6, 8e-6, peer=True),
                      _row("big_softmax", 4e-3, 20e-6)])
    by = {r["variant"]: r for r in rows}
    assert by["liger_softmax"]["launch_bound"] is True and by["big_softmax"]["launch_bound"] is False
    assert abs(by["liger_softmax"]["pct_of_peer"] - 100 / 3) < 1e-9
    assert pct_cell(by["liger_softmax"]) == "33% launch-bound"
    assert pct_cell(by["big_softmax"]) == "0%"  # 10 µs against 4 ms, shown plainly
    line = launch_bound_line(rows)
    assert line.startswith("2 result(s) launch-bound")  # the row and its peer, both on their floors


def test_a_row_without_a_floor_is_never_marked():
    (row,) = with_peer([_row("cpu_softmax", 1e-6, None)])
    assert row["launch_bound"] is False and launch_bound_line([row]) == ""
