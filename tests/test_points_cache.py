"""The points cache: a history built through it equals one read from the whole store, after new
nights, after a re-run of an old commit, and when the cache belongs to another store."""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa

from pipeline.history import series
from pipeline.history.caches.points_cache import PointsCache
from pipeline.store import Store
from workers.core.records import Result

SHAS = [f"{i:040x}" for i in range(12)]


def _record(store, i, variant, seconds, status="ok", dirty=False, seed=0, sha=None):
    sha = sha or SHAS[i]
    store.record_commit(sha, f"commit {i}", "A <a@x>", f"2025-01-{i + 1:02d}", [])
    run = store.start_run(sha, dirty, "nightly", "", "", "nightly")
    samples = tuple(seconds * (1 + 0.01 * np.random.default_rng(seed + 100 * i).standard_normal(12)))
    ok = status == "ok"
    store.record_result(run, sha, dirty, Result(
        variant=variant, op="gemm", backend="cpp", shape="M=64", dtype="fp32", device="cpu:x", status=status,
        median_s=float(np.median(samples)) if ok else None, ci_low_s=min(samples) if ok else None,
        ci_high_s=max(samples) if ok else None, samples_s=samples if ok else (), flops=1e6,
        diagnostic="" if ok else "error: x", resources={"kernels": {"k": {"vgprs": 64 + 32 * (i >= 6)}}},
        counters={"l2_hit_pct": 50.0 + i}))


def _same(a: series.History, b: series.History) -> None:
    """Equal histories; the number of samples is only counted for the newest commits when read
    from the store, so it is compared where both know it."""
    assert a.ops == b.ops and a.commits == b.commits
    assert [s.key for s in a.series] == [s.key for s in b.series]
    for x, y in zip(a.series, b.series):
        assert x.unit == y.unit and len(x.points) == len(y.points)
        for p, q in zip(x.points, y.points):
            assert p._replace(n_samples=None) == q._replace(n_samples=None)
            assert None in (p.n_samples, q.n_samples) or p.n_samples == q.n_samples


def test_a_history_through_the_cache_equals_the_store_read_night_after_night(tmp_path):
    order = SHAS[:10]
    with Store(tmp_path / "r.db") as store, PointsCache(tmp_path / "p.sqlite") as cache:
        for i in range(8):
            _record(store, i, "a", 1e-3 * (1.3 if i >= 5 else 1.0))
            _record(store, i, "b", 2e-3, status="build_failed" if i == 7 else "ok")
        _record(store, 7, "a", 9e-3, dirty=True)  # a working-tree run: counted, not history
        _record(store, 3, "a", 1e-3, sha="f" * 40)  # another branch: not on the line
        _same(series.scan(store, order, cache=cache), series.scan(store, order))  # built
        _same(series.scan(store, order, cache=cache), series.scan(store, order))  # read back
        # Two more nights, and a re-run of night 2 whose samples pool with the first run's.
        for i in (8, 9):
            _record(store, i, "a", 1.3e-3)
            _record(store, i, "b", 2e-3)
        _record(store, 2, "a", 1e-3, seed=7)
        through = series.scan(store, order, cache=cache)
        _same(through, series.scan(store, order))
        [a] = [s for s in through.series if s.variant == "a"]
        assert a.points[2].n_samples == 24 and a.points[-1].n_samples == 12  # pooled; counted when added
        assert cache.covered()[1:] == store.results_extent()[::-1]


def test_a_cache_of_another_store_or_of_missing_rows_is_rebuilt(tmp_path):
    order = SHAS[:6]
    with Store(tmp_path / "one.db") as one, Store(tmp_path / "two.db") as two, \
            PointsCache(tmp_path / "p.sqlite") as cache:
        for i in range(6):
            _record(one, i, "a", 1e-3)
            _record(two, i, "a", 5e-3)
        series.scan(one, order, cache=cache)
        _same(series.scan(two, order, cache=cache), series.scan(two, order))
        assert cache.covered()[0] == str(two.path)
        with two.writing() as conn:  # rows the cache has seen are gone
            conn.execute(sa.text("DELETE FROM results WHERE id = 2"))
        _same(series.scan(two, order, cache=cache), series.scan(two, order))
