"""Decides where a per-commit series of one benchmark steps (E-Divisive with means), from the
series' per-commit medians (plain floats, oldest first); `series.find_regressions` turns the
steps into regressions.

Method: E-Divisive (Matteson D. S. & James N. A., "A Nonparametric Approach for Multiple
Change Point Analysis of Multivariate Data", JASA 109(505):334-345, 2014), the algorithm
behind MongoDB's signal-processing-algorithms and Apache Otava (formerly Hunter), applied to
a 1-D series. For a split of a segment into X = x[a:t] and Y = x[t:b] (m and n points) the
energy statistic is

    Q(t) = m n / (m + n) * ( 2/(m n)   sum_{i,j} |X_i - Y_j|
                             - 1/C(m,2) sum_{i<k} |X_i - X_k|
                             - 1/C(n,2) sum_{j<k} |Y_j - Y_k| )

(the divergence with exponent alpha = 1, which detects changes in distribution, mean
included). Like MongoDB's and Otava's implementations, Y always runs to the end of the
segment (the paper also searches that end point; for step changes this loses little and
makes one pass O(n^2)). Multiple change points come by bisection: find the best split in
every current segment, take the one with the largest Q, and keep it only if a permutation
test says it is significant; repeat until a split is not significant.

Significance: shuffle the points within every current segment (which destroys any change
inside a segment but keeps those already found), recompute the largest Q over all segments,
and count how often it reaches the observed one: p = (#{Q_perm >= Q} + 1) / (R + 1) with a
fixed seed and at most R permutations; the shuffling stops early once p must exceed alpha
(the verdict is then known, so the change points are those of the full test). Everything
here is pure.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ChangePoint:
    """A significant split: the series changes between index-1 and index (index is the
    first point of the new segment); q is its energy statistic, p_value its permutation p."""

    index: int
    q: float
    p_value: float


@dataclass(frozen=True)
class Step:
    """A change point large enough to report. values[index] is the first value after the
    step; commit_before/commit_after are the commits of values[index-1] and values[index];
    mean_before/mean_after are the means of the segments on either side (bounded by the
    neighbouring change points); change = mean_after / mean_before - 1."""

    index: int
    commit_before: str
    commit_after: str
    mean_before: float
    mean_after: float
    change: float
    p_value: float


def energy_statistics(values: Sequence[float], min_size: int = 2) -> np.ndarray:
    """Q(t) for every split t of `values` into values[:t] and values[t:].

    Entries where either side has fewer than `min_size` points are -inf. Computed in
    O(n^2) from row sums of the distance matrix |x_i - x_k| instead of re-summing each split,
    so that a permutation test of a few hundred shuffles stays cheap: with lower_t the sum of
    |x_t - x_i| over i < t and row_t over all i, the pairs within x[:t] sum to
    W(t) = lower_0 + ... + lower_{t-1}, the cross pairs to C(t) = row_0 + ... + row_{t-1} - 2 W(t),
    and the pairs within x[t:] to the total minus both.
    """
    return energy_statistics_rows(np.asarray(values, dtype=float)[None, :], min_size)[0]


def energy_statistics_rows(rows: np.ndarray, min_size: int = 2) -> np.ndarray:
    """`energy_statistics` of every row of a 2-D array at once (the shuffles of one
    permutation test are rows: one numpy call for a batch instead of one per shuffle)."""
    x = np.asarray(rows, dtype=float)
    batch, n = x.shape
    q = np.full((batch, n + 1), -np.inf)
    min_size = max(min_size, 2)  # a within-side mean distance needs two points
    if n < 2 * min_size:
        return q
    dist = np.abs(x[:, :, None] - x[:, None, :])
    row = dist.sum(axis=2)
    lower = np.tril(dist).sum(axis=2)
    t = np.arange(min_size, n - min_size + 1)
    zero = np.zeros((batch, 1))
    cum_lower = np.concatenate((zero, np.cumsum(lower, axis=1)), axis=1)[:, t]
    cum_row = np.concatenate((zero, np.cumsum(row, axis=1)), axis=1)[:, t]
    m, k = t.astype(float), (n - t).astype(float)
    within_x = cum_lower
    cross = cum_row - 2.0 * cum_lower
    within_y = row.sum(axis=1, keepdims=True) / 2.0 - within_x - cross
    divergence = 2.0 * cross / (m * k) - within_x / (m * (m - 1) / 2.0) - within_y / (k * (k - 1) / 2.0)
    q[:, t] = m * k / (m + k) * divergence
    return q


def _best_split(x: np.ndarray, bounds: list[int], min_size: int) -> tuple[float, int]:
    """Largest Q over all segments [bounds[i], bounds[i+1]) and the global index of its split."""
    best_q, best_t = -np.inf, -1
    for a, b in itertools.pairwise(bounds):
        q = energy_statistics(x[a:b], min_size)
        t = int(np.argmax(q))
        if q[t] > best_q:
            best_q, best_t = float(q[t]), a + t
    return best_q, best_t


def _best_q_rows(rows: np.ndarray, bounds: list[int], min_size: int) -> np.ndarray:
    """Largest Q over all segments, for every row (one shuffle each)."""
    best = np.full(rows.shape[0], -np.inf)
    for a, b in itertools.pairwise(bounds):
        best = np.maximum(best, energy_statistics_rows(rows[:, a:b], min_size).max(axis=1))
    return best


# Shuffles per numpy call of a permutation test: large enough that numpy, not Python, does the
# work (at 64 points a batch of 16 costs about what 3 single shuffles did), small enough that
# the early stop below still saves most shuffles of a test that fails.
SHUFFLE_BATCH = 16


def e_divisive(
    values: Sequence[float],
    alpha: float = 0.05,
    permutations: int = 199,
    min_size: int = 3,
    seed: int = 0,
    max_change_points: int = 20,
) -> list[ChangePoint]:
    """Significant change points of a 1-D series, in index order (see the module docstring).

    alpha is the significance level of each permutation test; permutations bounds the
    work per test (199 gives p-values in steps of 0.005); min_size is the shortest segment
    considered; seed fixes the shuffles so results are reproducible.
    """
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    bounds = [0, x.size]
    found: list[ChangePoint] = []
    while len(found) < max_change_points:
        q_obs, t_obs = _best_split(x, bounds, min_size)
        if not np.isfinite(q_obs):
            break
        # Stop shuffling as soon as the split can no longer be significant: once
        # (reached + 1) / (permutations + 1) exceeds alpha, more shuffles only raise p. On a
        # series without a step that is after ~2 alpha R shuffles instead of R; the change
        # points found are the same.
        enough = alpha * (permutations + 1) - 1
        reached = done = 0
        while done < permutations and reached <= enough:
            size = min(SHUFFLE_BATCH, permutations - done)
            shuffled = np.empty((size, x.size))
            for a, b in itertools.pairwise(bounds):
                shuffled[:, a:b] = rng.permuted(np.tile(x[a:b], (size, 1)), axis=1)
            reached += int(np.count_nonzero(_best_q_rows(shuffled, bounds, min_size) >= q_obs))
            done += size
        p_value = (reached + 1) / (permutations + 1)
        if p_value > alpha:
            break
        found.append(ChangePoint(index=t_obs, q=q_obs, p_value=p_value))
        bounds = sorted(bounds + [t_obs])
    return sorted(found, key=lambda cp: cp.index)


def segment_mean_bounds(values: Sequence[float], min_size: int = 3) -> tuple[float, float]:
    """The smallest and largest mean any contiguous run of at least `min_size` values can have.

    A run of length >= 2 min_size splits into two runs of length >= min_size, one of which has a
    mean at least (at most) the whole's, so runs of min_size .. 2 min_size - 1 values suffice.
    Every segment between change points is such a run, so a step's two means lie in between.
    Returns (inf, -inf) for too short a series."""
    x = np.asarray(values, dtype=float)
    low, high = np.inf, -np.inf
    csum = np.concatenate(([0.0], np.cumsum(x)))
    for length in range(max(min_size, 1), 2 * max(min_size, 1)):
        if length > x.size:
            break
        means = (csum[length:] - csum[:-length]) / length
        low, high = min(low, float(means.min())), max(high, float(means.max()))
    return low, high


def can_step(values: Sequence[float], threshold: float, min_size: int = 3) -> bool:
    """False when no two runs of at least `min_size` values differ in mean by more than
    `threshold` (relative): then no step in `values` can be reported, whatever the tests say,
    and the search is skipped (`segment_mean_bounds`; a lone busy night does not defeat this, a
    real step does)."""
    low, high = segment_mean_bounds(values, min_size)
    return not (low > 0 and high / low - 1.0 <= threshold)


# Windows: a change point is judged by the WINDOW points around it, not by the whole history.
WINDOW = 64


@dataclass(frozen=True)
class Window:
    """values[start:stop] is searched; change points at indices in [owns_from, owns_to) are
    this window's to report (each index is owned by exactly one window, at least a quarter
    of a window from both of its ends unless the series ends there)."""

    start: int
    stop: int
    owns_from: int
    owns_to: int


def plan_windows(n: int, width: int = WINDOW) -> tuple[Window, ...]:
    """Windows over a series of n points: width points each, starting every width/2 from the
    first point, plus one ending at the last point when the aligned ones do not reach it.

    Aligned windows depend only on the points they hold, so a new point at the end changes
    the last window (and, every width/2 points, completes a new aligned one); every other
    window holds the same points as the night before and need not be searched again
    (`pipeline.history.window_cache`). A series of at most `width` points is one window: the
    whole-series search."""
    if n <= width:
        return (Window(0, n, 0, n),)
    stride = width // 2
    starts = list(range(0, n - width + 1, stride))
    if starts[-1] + width < n:
        starts.append(n - width)
    windows, owns_from = [], 0
    for i, start in enumerate(starts):
        owns_to = n if i == len(starts) - 1 else start + stride + stride // 2
        windows.append(Window(start, start + width, owns_from, owns_to))
        owns_from = owns_to
    return tuple(windows)


def steps_in_window(values: Sequence[float], commits: Sequence[str], window: Window,
                    points: Sequence[ChangePoint], threshold: float) -> list[Step]:
    """The reportable steps among the change points `points` that E-Divisive found in
    values[window.start:window.stop] (indices relative to the window): those the window owns
    whose neighbouring segments differ in mean by more than `threshold`. A segment is
    bounded by the neighbouring change points and the window's ends, so a step is the
    change between the commits around it, not between the averages of years (a slow drift is
    not a step)."""
    x = np.asarray(values, dtype=float)[window.start:window.stop]
    edges = [0] + [cp.index for cp in points] + [x.size]
    steps = []
    for i, cp in enumerate(points):
        at = window.start + cp.index
        if not window.owns_from <= at < window.owns_to:
            continue
        before = float(np.mean(x[edges[i]:cp.index]))
        after = float(np.mean(x[cp.index:edges[i + 2]]))
        change = after / before - 1.0 if before != 0.0 else float("inf")
        if abs(change) > threshold:
            steps.append(Step(index=at, commit_before=commits[at - 1], commit_after=commits[at], mean_before=before,
                              mean_after=after, change=change, p_value=cp.p_value))
    return steps


def window_key(values: np.ndarray, alpha: float, permutations: int, min_size: int, seed: int) -> str:
    """A name for the search of one window: the same points and settings give the same change
    points (the shuffles are seeded), so a search done once is never repeated."""
    digest = hashlib.sha256(f"e-divisive/1 {alpha} {permutations} {min_size} {seed}".encode())
    digest.update(np.ascontiguousarray(values, dtype="<f8").tobytes())
    return digest.hexdigest()[:32]


def detect_steps(
    values: Sequence[float],
    commits: Sequence[str],
    threshold: float = 0.03,
    alpha: float = 0.05,
    permutations: int = 199,
    min_size: int = 3,
    seed: int = 0,
    width: int = WINDOW,
) -> list[Step]:
    """Steps in a per-commit series that are both significant and larger than `threshold`.

    Method: the series is cut into overlapping windows (`plan_windows`); in each window that
    can hold a step (`can_step`), E-Divisive with its permutation test (`e_divisive`) finds
    the change points, and the window reports those it owns whose neighbouring segment
    means differ by more than `threshold` (`steps_in_window`). A statistically real 0.5% drift
    is not worth an alert. The direction is left to the caller (for run times a positive
    change is a slowdown). `pipeline.history.series.find_regressions` does the same with the
    windows' searches cached and spread over a cluster.
    """
    x = np.asarray(values, dtype=float)
    if len(commits) != x.size:
        raise ValueError(f"{x.size} values but {len(commits)} commits")
    steps = []
    for window in plan_windows(x.size, width):
        part = x[window.start:window.stop]
        if can_step(part, threshold, min_size):
            points = e_divisive(part, alpha=alpha, permutations=permutations, min_size=min_size, seed=seed)
            steps += steps_in_window(x, commits, window, points, threshold)
    return steps


def search_windows(parts: Sequence[Sequence[float]], seed: int = 0) -> list[list[dict]]:
    """`e_divisive` of several windows' values, the change points as dicts: a batch of
    windows can be one cluster task with plain data both ways."""
    return [[dataclasses.asdict(cp) for cp in e_divisive(part, seed=seed)] for part in parts]
