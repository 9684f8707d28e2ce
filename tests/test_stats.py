"""Tests of workers.measure.stats and pipeline.history.verdicts on synthetic lognormal run times with fixed seeds."""

import math

import numpy as np
import pytest
from scipy import stats as sp

from pipeline.history.verdicts import (
    FASTER,
    SAME,
    SLOWER,
    UNSURE,
    compare_samples,
    parse_threshold,
)
from workers.measure.stats import median_ci, relative_ci_halfwidth

# A GEMM that takes 1 ms; GPU run-to-run noise is 0.1%..4% (GUIDE section 3).
BASE_TIME = 1e-3


def lognormal(rng, n, sigma, shift=0.0):
    """n run times whose median is BASE_TIME * (1 + shift) and whose log-sd is sigma."""
    return BASE_TIME * (1.0 + shift) * np.exp(rng.normal(0.0, sigma, n))


@pytest.mark.parametrize("sigma", [0.01, 0.03, 0.05])
def test_identical_distributions_rarely_raise_an_alarm(sigma):
    # Bound: under the rule, a false alarm needs the bootstrap CI to sit entirely beyond
    # ±3% while the true ratio is 1. At n=30 the median ratio's standard error is about
    # 1.25 * sigma * sqrt(2/30) (0.3%..1.6%), so that is a > 3.7-sigma event: expected
    # count over 200 seeds < 0.05. We allow 2. A rule that dropped the threshold (CI
    # excludes 1 and p < 0.05) raises 2.5%..5% false alarms (5 of these 200 seeds), and fails.
    alarms = 0
    verdicts = set()
    for seed in range(200):
        rng = np.random.default_rng(seed)
        result = compare_samples(lognormal(rng, 30, sigma), lognormal(rng, 30, sigma), n_boot=500, seed=seed)
        verdicts.add(result.verdict)
        alarms += result.verdict in (SLOWER, FASTER)
    assert alarms <= 2
    if sigma == 0.01:
        # With 1% noise the CI is tight enough to affirm "no change" nearly always.
        assert SAME in verdicts


def test_ten_percent_slowdown_is_always_slower():
    for seed in range(50):
        rng = np.random.default_rng(1000 + seed)
        result = compare_samples(
            lognormal(rng, 30, 0.02), lognormal(rng, 30, 0.02, shift=0.10), n_boot=500, seed=seed
        )
        assert result.verdict == SLOWER, result
        assert result.ratio_lo <= result.ratio <= result.ratio_hi
        # 3.5 standard errors of the median ratio (about 0.65% here) around the true -9.1%.
        assert result.change == pytest.approx(1 / 1.10 - 1, abs=0.025)
        assert result.change_lo <= result.change <= result.change_hi


def test_ten_percent_speedup_is_faster():
    rng = np.random.default_rng(7)
    result = compare_samples(lognormal(rng, 30, 0.02), lognormal(rng, 30, 0.02, shift=-0.10))
    assert result.verdict == FASTER
    assert result.change > 0.08


def test_five_percent_slowdown_with_fifty_samples_and_one_percent_noise_is_slower():
    for seed in range(20):
        rng = np.random.default_rng(2000 + seed)
        result = compare_samples(lognormal(rng, 50, 0.01), lognormal(rng, 50, 0.01, shift=0.05), seed=seed)
        assert result.verdict == SLOWER, result
        assert result.p_value < 0.05
        # Throughput view: 5% longer run time is about -4.8% TFLOP/s.
        assert result.change == pytest.approx(1 / 1.05 - 1, abs=0.006)


def test_small_change_with_wide_ci_is_unsure():
    # 3% shift at 5% noise: the CI must straddle the +3% edge.
    rng = np.random.default_rng(3)
    result = compare_samples(lognormal(rng, 20, 0.05), lognormal(rng, 20, 0.05, shift=0.03))
    assert result.ratio_lo < 1.03 < result.ratio_hi
    assert result.verdict == UNSURE


def test_too_few_samples_is_unsure_even_for_a_large_change():
    result = compare_samples([1.0, 1.01, 0.99], [2.0, 2.02, 1.98])
    assert result.verdict == UNSURE
    assert "too few" in result.reason
    assert result.ratio == pytest.approx(2.0)


def test_constant_identical_samples_are_same():
    result = compare_samples([1.0] * 10, [1.0] * 10)
    assert result.verdict == SAME
    assert result.p_value == 1.0


def test_the_bootstrap_depends_on_its_seed_alone():
    rng = np.random.default_rng(11)
    base, head = lognormal(rng, 25, 0.03), lognormal(rng, 25, 0.03, shift=0.02)
    np.random.seed(1)
    first = compare_samples(base, head, seed=5)
    np.random.seed(2)  # numpy's global state must not leak into the resampling
    assert compare_samples(base, head, seed=5) == first
    other = compare_samples(base, head, seed=6)
    # the seed drives the resampling: another seed moves the interval, not the point estimate
    assert (other.ratio_lo, other.ratio_hi) != (first.ratio_lo, first.ratio_hi)
    assert other.ratio == first.ratio and other.p_value == first.p_value


def test_median_ci_small_n_is_the_range():
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)
    assert median_ci([5.0, 1.0, 4.0, 2.0, 3.0]) == (1.0, 5.0)


def test_median_ci_order_statistics_match_the_binomial():
    # n = 30 at 95%: P(B <= 9) = 0.0214 <= 0.025 < P(B <= 10), so l = 10: x_(10), x_(21).
    x = np.arange(1.0, 31.0)
    assert median_ci(x) == (10.0, 21.0)
    assert sp.binom.cdf(9, 30, 0.5) <= 0.025 < sp.binom.cdf(10, 30, 0.5)


@pytest.mark.parametrize("n", [10, 30, 101])
def test_median_ci_coverage_by_simulation(n):
    rng = np.random.default_rng(n)
    true_median = BASE_TIME  # median of the lognormal with mu = log(BASE_TIME)
    trials = 2000
    covered = 0
    for _ in range(trials):
        lo, hi = median_ci(lognormal(rng, n, 0.05))
        covered += lo <= true_median <= hi
    rate = covered / trials
    # Nominal 95%; the method guarantees >= 95%, so allow 3 binomial standard errors below.
    se = math.sqrt(0.95 * 0.05 / trials)
    assert rate >= 0.95 - 3 * se
    # and it must not be trivially wide (the exact coverage is <= 0.979 for these n).
    assert rate <= 0.99


def test_relative_ci_halfwidth_shrinks_with_more_samples():
    rng = np.random.default_rng(0)
    wide = relative_ci_halfwidth(lognormal(rng, 10, 0.02))
    tight = relative_ci_halfwidth(lognormal(rng, 400, 0.02))
    assert tight < wide
    assert tight < 0.01  # the timer's stopping rule is met with 400 samples at 2% noise
    assert relative_ci_halfwidth([2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]) == 0.0


@pytest.mark.parametrize("text", ["5%", "5 %", "0.05", " 5% ", 0.05, "5e-2"])
def test_parse_threshold_forms(text):
    assert parse_threshold(text) == pytest.approx(0.05)


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("5", "did you mean"),
        ("abc", "invalid threshold"),
        ("0%", "between"),
        ("-3%", "invalid"),
        ("150%", "between"),
    ],
)
def test_parse_threshold_errors(text, fragment):
    with pytest.raises(ValueError, match=fragment):
        parse_threshold(text)


def test_paired_comparison_sees_a_small_change_through_large_common_drift():
    # Machine drift of ±25% shared by both members of each pair, 1% independent noise, and a
    # real 5% slowdown: unpaired statistics drown in the drift, the pair ratios do not.
    from pipeline.history.verdicts import compare_paired

    rng = np.random.default_rng(3)
    drift = 1.0 + 0.25 * np.sin(np.linspace(0, 20, 300)) + 0.1 * rng.standard_normal(300)
    base = 1e-3 * drift * (1 + 0.01 * rng.standard_normal(300))
    head = 1.05e-3 * drift * (1 + 0.01 * rng.standard_normal(300))
    c = compare_paired(base, head, threshold=0.03)
    assert c.verdict == "slower" and 1.04 < c.ratio < 1.06
    same = compare_paired(base, 1e-3 * drift * (1 + 0.01 * rng.standard_normal(300)), threshold=0.03)
    assert same.verdict == "same"
    assert compare_samples(base, head, threshold=0.03).verdict != "slower"  # why pairing exists


def test_paired_comparison_needs_equal_counts_and_enough_pairs():
    from pipeline.history.verdicts import compare_paired

    with pytest.raises(ValueError, match="equal counts"):
        compare_paired([1.0, 2.0], [1.0])
    assert compare_paired([1.0] * 3, [1.1] * 3).verdict == "unsure"
