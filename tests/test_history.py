"""History series, dashboard movers, change detection into regressions, the JSON feed, pages."""

from __future__ import annotations

import json

import numpy as np

from pipeline.history import dashboard, series
from pipeline.history.regressions import Regression, RegressionStore
from pipeline.store import Store
from workers.core.records import Result

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


def _board(rows, commits, regressions=(), last_n=20):
    all_series = series.build_series(rows, commits)
    ops = {(r["variant"], r["shape"], r["dtype"], r["device"]): ("gemm", r["variant"] == "peer") for r in rows}
    return dashboard.build(all_series, regressions, {c["sha"]: c for c in commits}, [c["sha"] for c in commits], ops,
                           last_n)


def test_dashboard_lists_open_regressions_then_failing_then_the_matrix():
    commits = [_commit(i) for i in range(30)]
    rows = []
    for i in range(30):
        rows += [_row(i, "steady", 1e-3, seed=1), _row(i, "peer", 0.5e-3, seed=2),
                 _row(i, "slowed", 1e-3 if i < 20 else 1.25e-3, seed=3),
                 _row(i, "recovered", 1e-3 if not 10 <= i < 15 else 1.3e-3, seed=4),
                 _row(i, "broken", 1e-3, status="build_failed" if i == 29 else "ok")]
    shas = [c["sha"] for c in commits]
    rate = FLOPS / 1e-3
    stored = [Regression("recovered", "M=256,N=256,K=256", "fp32", "cpu:x", shas[9], shas[10], -0.23, rate,
                         rate / 1.3, 0.005, id=1),
              Regression("slowed", "M=256,N=256,K=256", "fp32", "cpu:x", shas[19], shas[20], -0.2, rate, rate / 1.25,
                         0.005, id=2, culprit_sha=shas[20])]
    board = _board(rows, commits, stored)
    [open_one] = board.regressions  # the recovered series is not an open regression
    assert open_one.regression.variant == "slowed" and open_one.between == 1
    assert open_one.good["sha"] == shas[19] and open_one.culprit["subject"] == "commit 20"
    assert [c.series.variant for c in board.failing] == ["broken"]
    [matrix] = board.matrices
    assert matrix.rows[0][0] == "peer"  # the peer leads its matrix
    cells = {v: c[0] for v, c in matrix.rows}
    assert 45 < cells["steady"].pct_of_peer < 55 and cells["peer"].pct_of_peer is None
    assert len(cells["steady"].spark) == 20 and cells["broken"].rate is None


def test_matrix_colours_a_change_beyond_the_noise_band_only():
    commits = [_commit(i) for i in range(40)]
    rows = []
    for i in range(40):
        rows += [_row(i, "quiet", 1e-3, seed=5), _row(i, "jumps", 1e-3 if i < 39 else 1.1e-3, seed=6),
                 _row(i, "faster", 1e-3 if i < 39 else 0.9e-3, seed=7)]
    cells = {v: c[0] for v, c in _board(rows, commits).matrices[0].rows}
    assert cells["quiet"].move_prev == cells["quiet"].move_median == dashboard.SAME
    assert cells["jumps"].move_prev == cells["jumps"].move_median == dashboard.SLOWER
    assert cells["faster"].move_median == dashboard.FASTER
    assert -0.1 < cells["jumps"].change_median < -0.08 and 0 < cells["quiet"].band < 0.03


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
        from pipeline.commands.publish import write_feed

        feed = json.loads(write_feed(store, tmp_path / "site").read_text())
    assert feed["count"] == 2 and [x["variant"] for x in feed["regressions"]] == ["w", "v"]
    v = feed["regressions"][1]
    assert v["culprit_sha"] == _commit(1)["sha"] and v["culprit_subject"] == "commit 1"
    assert v["bisect"] == {"evaluations": 3} and v["good_subject"] == "commit 0"


def test_site_pages_escape_user_strings(tmp_path):
    from pipeline.commands.publish import write_site

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
    assert evil not in trend and "&lt;script&gt;" in trend and "fwPlot(" in trend
    commits_js = (site / "assets" / "commits.js").read_text()  # subjects for the hovers
    assert evil not in commits_js and "\\u003cscript\\u003ealert" in commits_js
    assert "resources.kernels.k.vgprs" in trend  # the resource panel is there because it varied
    index = (site / "index.html").read_text()
    assert "Open regressions (0)" in index and "regressions.html" in index and "commits.html" in index
    assert json.loads((site / "regressions.json").read_text())["count"] == 0
