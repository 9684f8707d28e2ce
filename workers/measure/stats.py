"""Statistics of one sample set of run times (seconds): the median's confidence interval and
the stopping rule of the timer.

Pure functions over samples, shared by the node side (the timing loop stops when the median's
CI is tight) and the driver (series medians, comparisons). They live on the lower floor so that
the driver may import them and the workers never climb into the driver. scipy is deliberately
not imported here: every sandboxed job imports this module.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np


def sorted_samples(samples: Sequence[float]) -> np.ndarray:
    values = np.sort(np.asarray(samples, dtype=float).ravel())
    if values.size == 0:
        raise ValueError("no samples")
    if not np.all(np.isfinite(values)):
        raise ValueError("samples must be finite numbers")
    return values


@functools.lru_cache(maxsize=256)
def _binomial_half_cdf(n: int) -> np.ndarray:
    """P(B <= k) for k = 0..n-1, B ~ Binomial(n, 1/2), in log space (no overflow at large n).

    Written out instead of scipy.stats.binom so that the timing loop of every sandboxed job
    does not pay scipy's import time. Cached: a year of history asks for the same few n tens of
    thousands of times (callers only read the array)."""
    k = np.arange(1, n + 1)
    log_comb = np.concatenate(([0.0], np.cumsum(np.log(n - k + 1) - np.log(k))))
    pmf = np.exp(log_comb - n * math.log(2.0))
    return np.cumsum(pmf)[:n]


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median by order statistics.

    Method: for n independent samples of a continuous distribution, the number B of samples
    below the true median is Binomial(n, 1/2). The interval [x_(l), x_(n-l+1)] of the sorted
    samples (1-based) covers the median with probability 1 - 2 P(B <= l-1). We take the
    largest l with P(B <= l-1) <= (1 - confidence)/2, so the coverage is at least
    `confidence` (exactly the binomial value; it is conservative because B is discrete).
    When even l = 1 cannot reach the confidence (n <= 5 at 95%), the whole range
    (min, max) is returned: it is the widest interval the data can support.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = sorted_samples(samples)
    n = x.size
    tail = (1.0 - confidence) / 2.0
    cdf = _binomial_half_cdf(n)
    # A tiny tolerance so that an exact tail of (1-confidence)/2 is not lost to rounding.
    l = int(np.count_nonzero(cdf <= tail * (1.0 + 1e-12)))
    if l == 0:
        return float(x[0]), float(x[-1])
    return float(x[l - 1]), float(x[n - l])


def relative_ci_halfwidth(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Half the width of the median's confidence interval, relative to the median.

    Used as the stopping rule of the timer: keep sampling until this is at most 0.01
    ("the 95% CI of the median lies within about 1%") or the budget is spent.
    Returns inf when the median is zero.
    """
    lo, hi = median_ci(samples, confidence)
    med = float(np.median(sorted_samples(samples)))
    if med == 0.0:
        return math.inf
    return (hi - lo) / (2.0 * abs(med))
