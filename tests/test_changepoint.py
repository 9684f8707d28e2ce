"""Tests of pipeline.history.changepoint on synthetic per-commit series with fixed seeds."""

import itertools

import numpy as np
import pytest
from scipy import stats as sp

from pipeline.history import changepoint
from pipeline.history.changepoint import detect_steps, e_divisive, energy_statistics, segment_mean_bounds


def commits(n):
    return [f"c{i:03d}" for i in range(n)]


def brute_force_q(x, t):
    """Q(t) summed pair by pair, straight from the formula in Matteson & James (2014)."""
    left, right = x[:t], x[t:]
    m, n = len(left), len(right)
    cross = sum(abs(a - b) for a in left for b in right)
    within_l = sum(abs(a - b) for a, b in itertools.combinations(left, 2))
    within_r = sum(abs(a - b) for a, b in itertools.combinations(right, 2))
    return (
        m * n / (m + n) * (2 * cross / (m * n) - within_l / (m * (m - 1) / 2) - within_r / (n * (n - 1) / 2))
    )


def test_energy_statistic_matches_the_pairwise_formula():
    x = np.random.default_rng(1).normal(size=13)
    q = energy_statistics(x, min_size=2)
    for t in range(2, 12):
        assert q[t] == pytest.approx(brute_force_q(x, t), rel=1e-9)
    assert np.isneginf(q[[0, 1, 12, 13]]).all()


def test_one_ten_percent_step_is_found_at_the_right_index():
    # 1% noise on a per-commit value (GPU medians vary 0.1%..4% run to run).
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(16, 41))
        k = int(rng.integers(4, n - 3))
        values = np.concatenate([rng.normal(1.0, 0.01, k), rng.normal(1.10, 0.01, n - k)])
        steps = detect_steps(values, commits(n), threshold=0.03, seed=seed)
        assert [s.index for s in steps] == [k], (seed, n, k, steps)
        step = steps[0]
        assert (step.commit_before, step.commit_after) == (f"c{k - 1:03d}", f"c{k:03d}")
        assert step.change == pytest.approx(0.10, abs=0.02)
        assert step.mean_after > step.mean_before
        assert step.p_value <= 0.05


def test_flat_series_raw_false_positives_are_bounded_by_alpha():
    # The permutation test of the first split has level alpha exactly (the max statistic
    # is exchangeable under no change), so over 100 flat series the number with any change
    # point is at most Binomial(100, 0.05): its 99.9% quantile is the bound.
    bound = sp.binom.ppf(0.999, 100, 0.05)
    hits = 0
    for seed in range(100):
        values = np.random.default_rng(seed).lognormal(0.0, 0.02, 24)
        hits += bool(e_divisive(values, alpha=0.05, seed=seed))
    assert hits <= bound


def test_flat_series_yields_no_step_above_the_threshold():
    # With 1% noise, segment means differ by > 3% only by a > 4-sigma fluke even for the
    # shortest segments (3 points), so at most 2 spurious steps in 100 series.
    hits = 0
    for seed in range(100):
        rng = np.random.default_rng(500 + seed)
        n = int(rng.integers(16, 41))
        hits += len(detect_steps(rng.lognormal(0.0, 0.01, n), commits(n), threshold=0.03, seed=seed))
    assert hits <= 2


def test_two_steps_are_both_found():
    for seed in range(20):
        rng = np.random.default_rng(seed)
        values = np.concatenate(
            [rng.normal(1.0, 0.01, 12), rng.normal(1.10, 0.01, 12), rng.normal(0.95, 0.01, 12)]
        )
        steps = detect_steps(values, commits(36), seed=seed)
        assert [s.index for s in steps] == [12, 24], (seed, steps)
        assert steps[0].change > 0.07 and steps[1].change < -0.10
        # Segments are bounded by the neighbouring change point, not the series end.
        assert steps[0].mean_after == pytest.approx(np.mean(values[12:24]))


def test_significant_but_small_step_is_not_reported():
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.normal(1.0, 0.001, 15), rng.normal(1.01, 0.001, 15)])
    assert [cp.index for cp in e_divisive(values)] == [15]
    assert detect_steps(values, commits(30), threshold=0.03) == []
    assert [s.index for s in detect_steps(values, commits(30), threshold=0.005)] == [15]


def test_results_depend_on_the_seed_alone_and_inputs_are_checked():
    rng = np.random.default_rng(9)
    values = np.concatenate([rng.normal(1.0, 0.05, 15), rng.normal(1.06, 0.05, 15)])
    np.random.seed(1)
    first = e_divisive(values, seed=4)
    np.random.seed(2)  # numpy's global state must not leak into the permutations
    assert e_divisive(values, seed=4) == first and len(first) == 1
    # A step near the noise: the permutation p-value is not at its floor, so the seed (which
    # drives the shuffles) moves it, while the split and its statistic stay what the data say.
    other = e_divisive(values, seed=5)
    assert [(cp.index, cp.q) for cp in other] == [(cp.index, cp.q) for cp in first]
    assert other[0].p_value != first[0].p_value
    assert e_divisive([1.0, 2.0, 3.0]) == []  # too short for two segments of min_size
    with pytest.raises(ValueError, match="commits"):
        detect_steps([1.0, 2.0], ["a"])


def test_segment_mean_bounds_are_the_extreme_run_means():
    rng = np.random.default_rng(4)
    for n in (6, 7, 11, 25):
        x = rng.normal(1.0, 0.2, n)
        runs = [x[a:b].mean() for a in range(n) for b in range(a + 3, n + 1)]
        assert segment_mean_bounds(x, 3) == pytest.approx((min(runs), max(runs)))


def test_the_bound_skips_only_series_that_cannot_show_a_step():
    # A lone spike (a busy night) widens min..max but not the run means: no test is run...
    quiet = np.concatenate([np.full(20, 1.0), [1.08], np.full(20, 1.0)]) * (1 + 0.001 * np.sin(np.arange(41)))
    calls = []
    real = changepoint.e_divisive
    changepoint.e_divisive = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        assert detect_steps(quiet, commits(41), threshold=0.03) == []
        assert calls == []
        # ...while a real step goes through the full search and is found where it is.
        step = np.concatenate([np.full(20, 1.0), np.full(21, 1.05)]) * (1 + 0.001 * np.sin(np.arange(41)))
        assert [s.index for s in detect_steps(step, commits(41), threshold=0.03)] == [20] and calls
    finally:
        changepoint.e_divisive = real


def test_permutations_stop_once_the_split_cannot_be_significant(monkeypatch):
    # A flat series: the first test fails, and it fails long before 199 shuffles.
    shuffles = []
    real = changepoint._best_q_rows
    monkeypatch.setattr(changepoint, "_best_q_rows", lambda rows, *a: shuffles.append(len(rows)) or real(rows, *a))
    assert e_divisive(np.random.default_rng(2).normal(1.0, 0.01, 60), permutations=199) == []
    assert 10 < sum(shuffles) < 80
    # A clear step: the p-value still comes from every shuffle (1 / 200 when none reaches it).
    shuffles.clear()
    values = np.concatenate([np.full(30, 1.0), np.full(30, 1.2)]) + np.random.default_rng(3).normal(0, 0.01, 60)
    first = e_divisive(values, permutations=199)[0]
    assert first.index == 30 and first.p_value == pytest.approx(1 / 200) and sum(shuffles) >= 199


def test_batched_statistics_equal_one_row_at_a_time():
    rows = np.random.default_rng(6).normal(size=(5, 17))
    batched = changepoint.energy_statistics_rows(rows, 3)
    for row, q in zip(rows, batched):
        np.testing.assert_allclose(q, energy_statistics(row, 3), rtol=1e-12)


def test_windows_cover_every_index_once_with_a_margin():
    for n in (6, 64, 65, 96, 97, 130, 1095):
        windows = changepoint.plan_windows(n, 64)
        owned = [i for w in windows for i in range(w.owns_from, w.owns_to)]
        assert owned == list(range(n)), n
        for w in windows:
            assert 0 <= w.start < w.stop <= n and w.stop - w.start == min(n, 64)
            if n > 64:  # an owned index has a quarter window on each side, unless the series ends there
                assert w.owns_from - w.start >= 16 or w.start == 0
                assert w.stop - w.owns_to >= 16 or w.stop == n
    # Aligned windows do not move when the series grows: only the last one is new.
    assert set(changepoint.plan_windows(1095)) - set(changepoint.plan_windows(1096)) <= {
        w for w in changepoint.plan_windows(1095) if w.stop == 1095 or w.owns_to == 1095}


def test_a_step_in_a_long_series_is_judged_by_its_window():
    rng = np.random.default_rng(11)
    values = np.concatenate([rng.normal(1.0, 0.01, 700), rng.normal(1.06, 0.01, 395)])
    [step] = detect_steps(values, commits(1095), threshold=0.03)
    assert step.index == 700 and step.change == pytest.approx(0.06, abs=0.01)
    # Its segments end at the window's edges: at most a window's worth of points on each side.
    window = next(w for w in changepoint.plan_windows(1095) if w.owns_from <= 700 < w.owns_to)
    assert step.mean_before == pytest.approx(np.mean(values[window.start:700]))
    assert step.mean_after == pytest.approx(np.mean(values[700:window.stop]))


def test_a_slow_drift_is_not_a_step():
    # 8% over three years, 1% noise: every window sees less than 1% of it.
    rng = np.random.default_rng(12)
    values = np.linspace(1.0, 1.08, 1095) * rng.normal(1.0, 0.01, 1095)
    assert detect_steps(values, commits(1095), threshold=0.03) == []


def test_search_windows_is_e_divisive_per_window_as_plain_dicts():
    rng = np.random.default_rng(8)
    a = np.concatenate([rng.normal(1.0, 0.01, 15), rng.normal(1.2, 0.01, 15)])
    b = rng.normal(1.0, 0.01, 30)
    got = changepoint.search_windows([list(a), list(b)])
    assert got[1] == [] and 15 in [cp["index"] for cp in got[0]]
    assert got[0] == [vars(cp) for cp in e_divisive(a)]
