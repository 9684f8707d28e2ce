"""Incremental detection: the windows a night did not change are answered from the cache, with
the same regressions as a search from scratch."""

from __future__ import annotations

import numpy as np

from pipeline.history import series
from pipeline.history.caches.window_cache import MemoryCache, WindowCache

FLOPS = 2 * 256**3


def _history(nights: int, seed: int = 3) -> list:
    rng = np.random.default_rng(seed)
    commits = [{"sha": f"{i:040x}", "subject": f"c{i}", "author": "A", "authored_at": ""} for i in range(nights)]
    rows = []
    for v in range(4):
        noise = rng.normal(0.0, 0.01, 400)  # drawn for 400 nights: a longer history adds nights, changes none
        jitter = rng.standard_normal((400, 8))
        for i in range(nights):
            seconds = 1e-3 * (1 + noise[i]) * (1.2 if v == 1 and i >= 150 else 1.0) * (1.08 if v == 2 and i == 90 else 1) \
                * (1.2 if v == 3 and i >= 296 else 1.0)
            rows.append({"commit_sha": f"{i:040x}", "variant": f"v{v}", "shape": "M=256", "dtype": "fp32",
                         "device": "cpu:x", "status": "ok", "flops": FLOPS,
                         "samples": list(seconds * (1 + 0.002 * jitter[i]))})
    return series.build_series(rows, commits)


def test_a_new_night_searches_only_the_windows_it_changed():
    cache = MemoryCache()
    first = series.detect_regressions(_history(300), 0.05, cache=cache)
    assert first.searched > 0 and first.cached == 0
    assert [(r.variant, r.bad_sha) for r in first.regressions] == [("v1", f"{150:040x}"), ("v3", f"{296:040x}")]
    again = series.detect_regressions(_history(300), 0.05, cache=cache)
    assert again.searched == 0 and again.cached == first.searched and again.regressions == first.regressions
    # One more night: only each series' last window holds new points, and only v3's can hold a
    # step (the others are screened out); every other window is known.
    tonight = series.detect_regressions(_history(301), 0.05, cache=cache)
    fresh = series.detect_regressions(_history(301), 0.05)
    assert tonight.regressions == fresh.regressions
    assert tonight.searched == 1 and tonight.cached == fresh.searched - 1
    assert tonight.searched + tonight.cached + tonight.skipped == tonight.windows


def test_the_cache_file_keeps_answers_across_processes(tmp_path):
    with WindowCache(tmp_path / "w.sqlite") as cache:
        first = series.detect_regressions(_history(200), 0.05, cache=cache)
    with WindowCache(tmp_path / "w.sqlite") as cache:
        again = series.detect_regressions(_history(200), 0.05, cache=cache)
        assert cache.get_many(["no such window"]) == {}
    assert again.searched == 0 and again.regressions == first.regressions
