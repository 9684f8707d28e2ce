"""History series, dashboard movers, change detection into regressions, the JSON feed, pages."""

from __future__ import annotations

import json

import numpy as np

from pipeline.history import series
from pipeline.history.regressions import Regression, RegressionStore
from pipeline.store import Store
from workers.records import Result

FLOPS = 2 * 256**3


def _commit(i):
    return {"sha": f"{i:040x}", "subject": f"commit {i}", "author": "A <a@x>", "authored_at": f"2025-01-{i + 1:02d}"}


def _row(i, variant, seconds, status="ok", seed=0, dirty=0):
    rng = np.random.default_rng(seed + 100 * i)
    samples = list(seconds * (1 + 0.01 * rng.standard_normal(25))) if status == "ok" else []
    return {"commit_sha": f"{i:040x}", "variant": variant, "shape": "M=256,N=256,K=256", "dtype": "fp32",
            "device": "cpu:x", "status": status, "samples": samples, "flops": FLOPS, "dirty": dirty,
            "resources": {"kernels": {"k": {"vgprs": 64 if i < 5 else 96}}}, "counters": {}}


def test_series_follow_the_given_order_and_pool_reruns():
    commits = [_commit(i) for i in (3, 1, 2)]  # first-parent order need not be date order
    rows = [_row(1, "v", 1e-3), _row(2, "v", 2e-3), _row(3, "v", 3e-3), _row(3, "v", 3e-3, seed=7),
            _row(9, "v", 1e-3), _row(2, "v", 9e-3, dirty=1)]
    [s] = series.build_series(rows, commits)
    assert [p.sha for p in s.points] == [c["sha"] for c in commits]  # commit 9 is not on the line
    first = s.points[0]
    assert first.n_samples == 50 and first.rate_lo < first.rate < first.rate_hi
    assert abs(s.points[2].median_s / 2e-3 - 1) < 0.02  # the dirty re-run is not history
    assert s.unit == "FLOP/s" and "/" not in s.slug


def test_dashboard_puts_failing_first_then_biggest_movers():
    commits = [_commit(i) for i in range(6)]
    rows = []
    for i in range(6):
        rows += [_row(i, "steady", 1e-3, seed=1), _row(i, "mover", 1e-3 * (1 + 0.1 * i), seed=2),
                 _row(i, "small_mover", 1e-3 * (1 + 0.02 * i), seed=3)]
        rows.append(_row(i, "broken", 1e-3, status="build_failed" if i == 5 else "ok"))
    rows_by = series.dashboard(series.build_series(rows, commits), last_n=6)
    assert [r.series.variant for r in rows_by] == ["broken", "mover", "small_mover", "steady"]
    assert rows_by[0].failing and not rows_by[1].failing
    assert -0.35 < rows_by[1].change < -0.30  # 1.5x the time over the window is -33% throughput


def test_find_regressions_reports_slowdowns_only():
    commits = [_commit(i) for i in range(12)]
    rows = [_row(i, "slows", 1e-3 if i < 7 else 1.4e-3) for i in range(12)]
    rows += [_row(i, "speeds", 1e-3 if i < 7 else 0.6e-3) for i in range(12)]
    rows += [_row(i, "flat", 1e-3) for i in range(12)]
    found = series.find_regressions(series.build_series(rows, commits), threshold=0.05)
    assert [(r.variant, r.good_sha, r.bad_sha) for r in found] == [("slows", commits[6]["sha"], commits[7]["sha"])]
    assert -0.30 < found[0].change < -0.27 and found[0].rate_before > found[0].rate_after


def test_regressions_table_dedupes_and_feed_is_json(tmp_path):
    with Store(tmp_path / "r.db") as store:
        for c in map(_commit, range(3)):
            store.record_commit(c["sha"], c["subject"], c["author"], c["authored_at"], [])
        table = RegressionStore(store)
        r = Regression("v", "M=1", "fp32", "cpu", _commit(0)["sha"], _commit(2)["sha"], -0.3, 2.0, 1.4, 0.005)
        stored, new = table.record(r)
        again, new_again = table.record(r)
        assert new and not new_again and stored.id == again.id and len(table.all()) == 1
        table.set_culprit(stored.id, _commit(1)["sha"], {"evaluations": 3})
        table.record(Regression("w", "M=1", "fp32", "cpu", _commit(1)["sha"], _commit(2)["sha"],
                                           -0.1, 2.0, 1.8, 0.01))
        from reports.history_pages import write_feed

        feed = json.loads(write_feed(store, tmp_path / "site").read_text())
    assert feed["count"] == 2 and [x["variant"] for x in feed["regressions"]] == ["w", "v"]
    v = feed["regressions"][1]
    assert v["culprit_sha"] == _commit(1)["sha"] and v["culprit_subject"] == "commit 1"
    assert v["bisect"] == {"evaluations": 3} and v["good_subject"] == "commit 0"


def test_site_pages_escape_user_strings(tmp_path):
    from reports.site import write_site

    evil = "<script>alert('x')</script>"
    with Store(tmp_path / "s.db") as store:
        for i in range(7):
            sha = f"{i:040x}"
            store.record_commit(sha, evil if i == 6 else f"c{i}", "A <a@x>", f"2025-01-{i + 1:02d}", [])
            run = store.start_run(sha, False, "run", "", "", "run")
            rng = np.random.default_rng(i)
            store.record_result(run, sha, False, Result(
                variant="v", op="gemm", backend="cpp", shape="M=256,N=256,K=256", dtype="fp32", device="cpu:x",
                status="ok", median_s=1e-3, ci_low_s=0.99e-3, ci_high_s=1.01e-3, samples_s=tuple(1e-3 * (1 + 0.01 * rng.standard_normal(20))),
                flops=FLOPS, resources={"kernels": {"k": {"vgprs": 64 + i}}}))
        write_site(store, tmp_path / "site")
    site = tmp_path / "site"
    trend = next(site.glob("trend-*.html")).read_text()
    assert evil not in trend and "&lt;script&gt;" in trend and "Plotly.newPlot" in trend
    assert "vgprs" in trend  # the resource panel is there because it varied
    index = (site / "index.html").read_text()
    assert "dashboard.html" in index and "regressions.html" in index
    assert (site / "dashboard.html").exists() and json.loads((site / "regressions.json").read_text())["count"] == 0
