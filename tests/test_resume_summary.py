"""`flopwatch run --resume --json` lists the commit's whole result set: what the run measured and
the stored results it skipped, marked `resumed`, so a script reading the summary after an
interrupted run sees every result (issue: it saw 12 of 99)."""

from __future__ import annotations

import json

from pipeline.commands.run import _resumed_rows
from pipeline.run.summary import with_peer
from pipeline.store import Store
from workers.core.records import Result


def _result(variant: str, shape: str, median: float, peer: bool = False, status: str = "ok") -> Result:
    timed = {"median_s": median, "ci_low_s": median, "ci_high_s": median, "samples_s": (median,)} if median else {}
    return Result(variant=variant, op="gemm", backend="cpp", shape=shape, dtype="fp32", device="cpu:x86",
                  status=status, flops=2e9, peer=peer, **timed)


def test_the_resumed_summary_has_every_result_of_the_commit(tmp_path):
    with Store(tmp_path / "results.db") as store:
        store.record_commit("c1", "s", "a", "t", [])
        first = store.start_run("c1", False, "run", "/repo", "host", "run")
        for r in (_result("ref", "M=1", 1e-3, peer=True), _result("v", "M=1", 2e-3), _result("v", "M=2", 4e-3),
                  _result("w", "M=1", 0.0, status="lost")):
            store.record_result(first, "c1", False, r)
        store.finish_run(first)
        measured = [_result("w", "M=1", 5e-3).to_dict()]  # the resumed run measured only the lost one
        stored = _resumed_rows(store, "c1", measured)
    rows = with_peer([*measured, *stored])
    by = {(r["variant"], r["shape"]): r for r in rows}
    assert set(by) == {("ref", "M=1"), ("v", "M=1"), ("v", "M=2"), ("w", "M=1")}
    assert by[("w", "M=1")]["resumed"] is False and by[("w", "M=1")]["status"] == "ok"  # the new one, not the lost
    assert all(by[k]["resumed"] is True for k in (("ref", "M=1"), ("v", "M=1"), ("v", "M=2")))
    assert by[("v", "M=1")]["pct_of_peer"] == 50.0 and by[("w", "M=1")]["pct_of_peer"] == 20.0
    json.dumps(rows)  # what --json prints
