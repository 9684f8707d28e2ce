"""Verdicts: is head slower, faster, the same, or can't we tell? Decided from two sample sets of
run times (seconds; lower is better) of one series — independent runs (`compare_samples`:
bootstrap CI of the median ratio + Mann-Whitney U) or pairs timed alternately in one process
(`compare_paired`: median of pair ratios with its order-statistics CI + Wilcoxon signed-rank) —
against a threshold, plus the threshold parser shared by compare, detect, bisect and nightly.

Every function here is pure: it takes samples and returns numbers or a frozen record.
Randomness (the bootstrap) is driven by an explicit seed so that a comparison is
reproducible from the stored samples alone. The median's CI itself lives in `workers.measure.stats`
(the timing loop on the nodes uses it too). scipy is used for the rank tests: a well-kept,
widely reviewed implementation. Methods and the default threshold: docs/statistics.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.measure.stats import median_ci, sorted_samples

SLOWER = "slower"
FASTER = "faster"
# Measured at both commits, no change beyond the threshold. A series measured at neither (no
# device or toolchain here) is not `same`: `pipeline.history.compare.NOT_RUN`.
SAME = "same"
UNSURE = "unsure"
VERDICTS = (SLOWER, FASTER, SAME, UNSURE)

# Below this many samples per side the Mann-Whitney test cannot reach p < 0.05 reliably
# and the bootstrap distribution of a median has too few distinct values to be trusted.
MIN_SAMPLES = 5


@dataclass(frozen=True)
class Comparison:
    """The comparison of head's run times against base's for one kernel and shape.

    Invariants: ratio = median_head / median_base (a time ratio: > 1 means head is slower);
    ratio_lo <= ratio_hi is the bootstrap percentile interval of that ratio at `confidence`;
    change = 1/ratio - 1 is the same result as a fraction of throughput (TFLOP/s), so a 5%
    longer run time shows as change = -0.048; verdict is one of VERDICTS and `reason`
    says in words which rule produced it.
    """

    n_base: int
    n_head: int
    median_base: float
    median_head: float
    ratio: float
    ratio_lo: float
    ratio_hi: float
    p_value: float
    change: float
    change_lo: float
    change_hi: float
    verdict: str
    reason: str
    threshold: float
    confidence: float


def bootstrap_ratio_ci(
    base: Sequence[float],
    head: Sequence[float],
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(head) / median(base).

    Method: resample each side independently with replacement (the two sets are independent
    runs), take the ratio of the resampled medians n_boot times, and return the
    (1-confidence)/2 and (1+confidence)/2 quantiles of those ratios (Efron & Tibshirani 1993,
    ch. 13). Seeded so that the same samples always give the same interval.
    """
    b = np.asarray(base, dtype=float)
    h = np.asarray(head, dtype=float)
    rng = np.random.default_rng(seed)
    med_b = np.median(b[rng.integers(0, b.size, size=(n_boot, b.size))], axis=1)
    med_h = np.median(h[rng.integers(0, h.size, size=(n_boot, h.size))], axis=1)
    ratios = med_h / med_b
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail])
    return float(lo), float(hi)


def _decide(lo: float, hi: float, p: float, threshold: float, alpha: float) -> tuple[str, str]:
    band = f"±{threshold:.1%}"
    if lo > 1.0 + threshold and p < alpha:
        return SLOWER, f"whole CI of the time ratio above +{threshold:.1%} and p={p:.2g} < {alpha:.2g}"
    if hi < 1.0 - threshold and p < alpha:
        return FASTER, f"whole CI of the time ratio below -{threshold:.1%} and p={p:.2g} < {alpha:.2g}"
    if 1.0 - threshold <= lo and hi <= 1.0 + threshold:
        return SAME, f"whole CI of the time ratio within {band}"
    return UNSURE, f"CI of the time ratio [{lo:.4f}, {hi:.4f}] crosses the {band} band or p={p:.2g}"


def compare_samples(
    base: Sequence[float],
    head: Sequence[float],
    threshold: float = 0.03,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Compare head's run times against base's and give a verdict.

    Statistics: the ratio of medians, its bootstrap percentile interval
    (`bootstrap_ratio_ci`), and the two-sided Mann-Whitney U p-value
    (scipy.stats.mannwhitneyu), with alpha = 1 - confidence.

    Decision rule (an interval test against a band of ±threshold around "no change"):
      - slower: the whole CI lies above 1 + threshold AND p < alpha;
      - faster: the whole CI lies below 1 - threshold AND p < alpha;
      - same:   the whole CI lies within [1 - threshold, 1 + threshold];
      - unsure: anything else (the CI straddles an edge of the band), or fewer than
        MIN_SAMPLES samples on either side.
    Why: a false alarm needs the interval to miss the true ratio by more than the threshold
    and the rank test to agree, so comparing a commit with itself almost never says
    slower/faster; a change is only claimed when even its most favourable plausible size
    exceeds the threshold, and an honest "unsure" is preferred over a guess when the
    samples are too noisy to tell a 2% change from a 4% one.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be a fraction in (0, 1), got {threshold}")
    b = sorted_samples(base)
    h = sorted_samples(head)
    med_b, med_h = float(np.median(b)), float(np.median(h))
    if med_b <= 0.0 or med_h <= 0.0:
        raise ValueError("run times must be positive")
    ratio = med_h / med_b
    alpha = 1.0 - confidence
    if min(b.size, h.size) < MIN_SAMPLES:
        lo, hi, p = float(min(h) / max(b)), float(max(h) / min(b)), math.nan
        verdict, reason = UNSURE, f"too few samples ({b.size} base, {h.size} head; need {MIN_SAMPLES})"
    else:
        lo, hi = bootstrap_ratio_ci(b, h, confidence, n_boot, seed)
        from scipy.stats import mannwhitneyu  # imported here: the timing loop needs no scipy

        p = float(mannwhitneyu(b, h, alternative="two-sided").pvalue)
        # Identical constant samples leave the rank test undefined; they are no evidence of change.
        p = 1.0 if math.isnan(p) else p
        verdict, reason = _decide(lo, hi, p, threshold, alpha)
    return Comparison(
        n_base=int(b.size),
        n_head=int(h.size),
        median_base=med_b,
        median_head=med_h,
        ratio=ratio,
        ratio_lo=lo,
        ratio_hi=hi,
        p_value=p,
        change=1.0 / ratio - 1.0,
        # Throughput is 1/time, so the interval's ends swap.
        change_lo=1.0 / hi - 1.0,
        change_hi=1.0 / lo - 1.0,
        verdict=verdict,
        reason=reason,
        threshold=threshold,
        confidence=confidence,
    )


def compare_paired(
    base: Sequence[float],
    head: Sequence[float],
    threshold: float = 0.03,
    confidence: float = 0.95,
) -> Comparison:
    """Compare samples taken in pairs: base[i] and head[i] ran back to back in one process.

    Method: the pair ratios r_i = head[i] / base[i] carry the change while the machine's drift,
    common to both members of a pair, cancels. The ratio is the median of r_i with the
    order-statistics CI of that median (`median_ci`), and the p-value is the Wilcoxon
    signed-rank test of log r_i against 0 (scipy.stats.wilcoxon). The verdict rule is the one
    of `compare_samples`. With fewer than MIN_SAMPLES pairs the verdict is unsure.
    """
    if len(base) != len(head):
        raise ValueError(f"paired samples need equal counts ({len(base)} base, {len(head)} head)")
    b, h = sorted_samples(base), sorted_samples(head)  # validates; the pairs use the original order
    ratios = np.asarray(head, dtype=float) / np.asarray(base, dtype=float)
    ratio = float(np.median(ratios))
    alpha = 1.0 - confidence
    if ratios.size < MIN_SAMPLES:
        lo, hi, p = float(ratios.min()), float(ratios.max()), math.nan
        verdict, reason = UNSURE, f"too few pairs ({ratios.size}; need {MIN_SAMPLES})"
    else:
        from scipy.stats import wilcoxon  # imported here: the timing loop needs no scipy

        lo, hi = median_ci(ratios, confidence)
        logs = np.log(ratios)
        p = 1.0 if np.all(logs == 0) else float(wilcoxon(logs).pvalue)
        verdict, reason = _decide(lo, hi, p, threshold, alpha)
        reason = f"{ratios.size} pairs: {reason}"
    return Comparison(
        n_base=int(b.size), n_head=int(h.size), median_base=float(np.median(b)), median_head=float(np.median(h)),
        ratio=ratio, ratio_lo=lo, ratio_hi=hi, p_value=p, change=1.0 / ratio - 1.0,
        change_lo=1.0 / hi - 1.0, change_hi=1.0 / lo - 1.0, verdict=verdict, reason=reason,
        threshold=threshold, confidence=confidence)


_THRESHOLD = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(%?)\s*$")


def parse_threshold(text: str | float) -> float:
    """Parse a regression threshold: "5%", "5 %" and "0.05" all give 0.05.

    A bare number is a fraction and must lie in (0, 1); a number with % is a percentage and
    must lie in (0, 100). Anything else raises ValueError with the accepted forms.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, percent = float(text), False
    else:
        match = _THRESHOLD.match(str(text))
        if not match:
            raise ValueError(
                f"invalid threshold {text!r}: write a percentage like '5%' or a fraction like '0.05'"
            )
        value, percent = float(match.group(1)), match.group(2) == "%"
    if percent:
        value /= 100.0
    if not 0.0 < value < 1.0:
        hint = " (did you mean a percentage? write '5%')" if not percent and value >= 1.0 else ""
        raise ValueError(f"invalid threshold {text!r}: must be between 0% and 100% exclusive{hint}")
    return value
