"""Decides where a per-commit series of one benchmark steps, from the series' per-commit medians
(plain floats, oldest first); `series.find_regressions` turns the steps into regressions.

The series is cut into overlapping windows (`plan_windows`: WINDOW points every WINDOW/2, each
index owned by one window), so that a new night changes only the last window and the others'
searches are cached (`pipeline.history.caches.window_cache`). Inside a window (`search_window`):

- **Rank scan.** The values are replaced by their ranks, and for every split t of a segment the
  rank sum of the points before t is standardised (Wilcoxon-Mann-Whitney; `rank_scan`). Under
  no change every order of the ranks is equally likely whatever the noise (normal, heavy
  tailed, busy nights, two clock states), so the test's level holds for all of them. The
  largest |Z| over the splits gets its p from the boundary-crossing probability of a
  standardised Brownian bridge (`scan_p_value`); a few nights at an end all above or below the
  rest get an exact count instead (`exact_split_p`), so a step three nights before the newest
  is seen.
- **Seeded intervals.** Besides the segments between the change points found so far, the
  halves and quarters of the window offer their best splits (`seeded_intervals`), their p
  multiplied by how many of them fit side by side: a step that is reverted 10-60 commits later
  shows in an interval that holds one edge of it. The smallest p is kept if it is at most
  ALPHA, the search repeats without the intervals that hold it, and stops when nothing is
  significant (seeded binary segmentation).
- **Short runs.** When no split is left, each segment is asked for a run of 3-10 points inside
  it lying nearly all above or below the rest (`block_p`, the exact count of the ends times the
  runs tried): a bump, or the middle level of two steps close together, is two change points
  (`_best_block`, checked against the segment's trend by `block_z` and at both ends by
  `is_sharp`).
- **Steps close together.** When nothing else is left, the splits 3-12 points beside a change
  point found are asked for a second step (`_beside_step`), counted against those splits only;
  where the window's noise looks Gaussian (`near_gaussian`) runs of 4-10 points also get the t
  test (`value_runs_p`), which the rank arrangements do not bound; elsewhere the short side of
  a split beside a change point found or at the window's end gets the t test of the values
  clipped at Huber's psi (`huber_clip`: a busy night or a tail draw counts as at most 1.345
  standard deviations, a step moves every night beside it); a change point with another
  within 12 commits is placed again between its neighbours at the end (`settle_places`).
- **Drift.** A slow wander is a change of distribution too. Where a polynomial trend beside the
  step(s) is significant (`drift_p_value`), a split must stand out from that trend
  (`trend_scan`, `drifts_at`); everywhere, a kept split must stand STAND_Z standard errors
  above a smooth trend through its segment (`stands_out`) and change at the split, not over
  the segment (`is_sharp`).
- **Where.** The ranks place a change only up to the ranks it moves; the split is moved by up
  to REFINE_REACH commits to where the two sides, read within the interval that offered the
  split, lie closest to their medians (`refine_split`).

`steps_in_window` then keeps the owned change points whose height (means of at most SIDE points
each side, bounded by the neighbouring change points) exceeds the threshold; `merge_close` makes
one step of two that neighbouring windows placed a commit apart. The search is
deterministic and O(n^2) per window in numpy: no permutations, no seed.

E-Divisive with its permutation test (Matteson & James, JASA 109(505):334-345, 2014; `e_divisive`,
`energy_statistics`), which this module used before, is kept as the reference the tests and
benchmarks/detector_noise.py compare against; `detect_steps` no longer calls it. For a split of a
segment into X = x[a:t] and Y = x[t:b] (m and n points) its energy statistic is

    Q(t) = m n / (m + n) * ( 2/(m n)   sum_{i,j} |X_i - Y_j|
                             - 1/C(m,2) sum_{i<k} |X_i - X_k|
                             - 1/C(n,2) sum_{j<k} |Y_j - Y_k| )

with Y running to the end of the segment, change points by bisection, and significance from
shuffling the points within every current segment: p = (#{Q_perm >= Q} + 1) / (R + 1) with a
fixed seed, the shuffling stopping early once p must exceed alpha. Everything here is pure.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
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


# -- The window search ---------------------------------------------------------------------------

# Level of a window's search (a window of WINDOW points): each split kept has p <= ALPHA, the p of
# a seeded interval multiplied by the intervals of its length that fit in the window. On pure
# noise of independent nights (any distribution) a window reports a change about that often.
ALPHA = 0.002
# A window shorter than WINDOW (a young history) is searched at a higher level, at most this
# (`window_level`).
SHORT_ALPHA = 0.05
# The shortest seeded interval.
SHORTEST_INTERVAL = 32
# Splits with at most SMALL_SIDE points on one side also get an exact p (`exact_split_p`) when
# at most EXACT_INVERSIONS pairs are out of order and the normal z is at least EDGE_Z (below it
# the exact p is well above any level used here).
SMALL_SIDE = 10
EXACT_INVERSIONS = 60
# A second step is looked for at most BESIDE commits from a change point found (`_beside_step`).
BESIDE = 12
EDGE_Z = 2.0
# Drift: the level of the test for a polynomial trend beside the steps (`drift_p_value`): the
# cubic for segments up to 64 points, degree 5 above (a wander of a few months bends more than
# a cubic does over 128 nights); the shortest segment tested.
DRIFT_ALPHA = 0.01
TREND_DEGREE = 3
TREND_DEGREE_LONG = 5
DRIFT_MIN = 16
# A split found in a short interval of a drifting segment must stand JUMP_Z standard errors above
# the segment's trend (`drifts_at`); any split kept, STAND_Z (`stands_out`).
JUMP_Z = 4.0
STAND_Z = 1.0
# Points either side of a split that `is_sharp` compares.
SHARP_NEAR = 8
# How far `refine_split` may move a split.
REFINE_REACH = 4
# Gaussian noise (`near_gaussian`): at most TAIL_COUNT points of a window more than TAIL_Z robust
# standard deviations from their running median.
TAIL_Z = 4.5
TAIL_COUNT = 0
# The shortest run (or short side of a split) the t test of `value_runs_p` is asked about.
VALUE_RUN = 4
# Elsewhere the short side of a split beside a change point found or at a window's end gets the
# t test on values clipped at the segment's median +- HUBER_K noise standard deviations
# (`huber_clip`: Huber's psi with his constant, 95% efficient on Gaussian noise).
HUBER_K = 1.345
# Below this |t| the t test of a split beside a bound is not worth its p (`_end_t_p`): even as a
# normal z its p (0.005) times the 16 splits counted is above SHORT_ALPHA.
END_T = 2.8
# A step's height is read from at most this many points on each side (`steps_in_window`).
SIDE = 32
# Names the search and its settings in the window cache's keys.
SEARCH = "rank-scan/5"


def _median(a: np.ndarray) -> float:
    """The median of a short array (np.median's checks cost more than the sort here)."""
    s = np.sort(a)
    return float(s[(s.size - 1) // 2] + s[s.size // 2]) / 2.0


def _ndtr(x):
    from scipy.special import ndtr
    return ndtr(x)


@functools.lru_cache(maxsize=256)
def _scan_terms(n: int, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(min_size, n - min_size + 1, dtype=float)
    return np.sqrt(n / (t * (n - t))), n / (2.0 * t * (n - t))


def scan_p_value(z: float, n: int, min_size: int) -> float:
    """P(max over splits t of |Z(t)| >= z) for the standardised two-sample statistic of a
    segment of n exchangeable points, t from min_size to n - min_size (James, James & Siegmund,
    "Tests for a change-point", Biometrika 74(1):71-83, 1987: the standardised Brownian bridge with
    Siegmund's correction for discrete steps). For the rank statistic here it is conservative
    (tests/test_changepoint.py compares it with simulation)."""
    scale, weight = _scan_terms(n, min_size)
    if scale.size == 0 or not z > 0:
        return 1.0
    x = np.maximum(z * scale, 1e-9) / 2.0  # Siegmund's nu(2x): the overshoot of a discrete walk
    cdf = _ndtr(x)
    nu = (cdf - 0.5) / x / (x * cdf + np.exp(-x * x / 2.0) / np.sqrt(2.0 * np.pi))
    density = z * np.exp(-z * z / 2.0) / np.sqrt(2.0 * np.pi)
    return float(min(1.0, 2.0 * density * float(nu @ weight)))


@functools.lru_cache(maxsize=512)
def _split_terms(n: int, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(min_size, n - min_size + 1)
    return t, t * (n - t) / (n * (n - 1.0))


def _rank_scan(ranks: np.ndarray, min_size: int) -> tuple[int, float, np.ndarray | None]:
    n = ranks.size
    if n < 2 * min_size:
        return -1, 0.0, None
    dev = ranks - (n + 1) / 2.0
    spread = float(dev @ dev)
    if spread <= 0.0:
        return -1, 0.0, None
    t, share = _split_terms(n, min_size)
    csum = np.cumsum(dev)
    z = csum[t - 1] / np.sqrt(share * spread)
    k = int(np.argmax(np.abs(z)))
    return int(t[k]), float(z[k]), csum


def _z_floor(n: int, min_size: int) -> float:
    """A rank statistic below which a segment of n points is never significant at any level
    used here (its scan p is above SHORT_ALPHA): the p-value is not computed for it. The scan p
    grows with n, so the floor of the power of two at or below n serves for n."""
    below = 1 << (n.bit_length() - 1)
    return _z_floor_at(below if below >= 2 * min_size else n, min_size)


@functools.lru_cache(maxsize=64)
def _z_floor_at(n: int, min_size: int) -> float:
    lo, hi = 0.5, 12.0
    for _ in range(40):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if scan_p_value(mid, n, min_size) > SHORT_ALPHA else (lo, mid)
    return lo


def _hopeless(x: np.ndarray, rank_of: _Ranks, intervals: list[tuple[int, int]], min_size: int) -> set:
    """The intervals, all of one length, whose best split cannot be significant: neither the
    rank scan (below `_z_floor`) nor an end (`_edge_split`'s screen). One numpy pass for all of
    them, so that a window of noise costs a few calls per scale, not a few per interval."""
    length = intervals[0][1] - intervals[0][0]
    if length < 2 * min_size:
        return set(intervals)
    starts = np.array([a for a, _ in intervals])
    rows = starts[:, None] + np.arange(length)[None, :]
    ranks = rank_of.below[rows, (starts + length)[:, None]] - rank_of.below[rows, starts[:, None]] + 0.5
    dev = ranks - (length + 1) / 2.0
    spread = np.einsum("ij,ij->i", dev, dev)
    csum = np.cumsum(dev, axis=1)
    t, share = _split_terms(length, min_size)
    with np.errstate(divide="ignore", invalid="ignore"):
        top = np.nanmax(np.abs(csum[:, t - 1]) / np.sqrt(share[None, :] * spread[:, None]), axis=1)
    hopeless = ~(top >= _z_floor(length, min_size))
    et, m, _, sd = _edge_terms(length, min_size)
    if et.size:
        d = np.abs(csum[:, et - 1])  # |short side's rank sum - its mean|, either end
        k = m * (length - m) / 2.0 - d
        hopeless &= ~((k <= EXACT_INVERSIONS) & (k <= length - m) & (d >= EDGE_Z * sd)).any(axis=1)
    return {iv for iv, h in zip(intervals, hopeless) if h}


def rank_scan(ranks: np.ndarray, min_size: int) -> tuple[int, float]:
    """The split t of a segment whose two sides differ most in rank, and its standardised
    rank-sum statistic Z(t) (Wilcoxon-Mann-Whitney: the sum of the first t ranks against its mean
    under exchangeability, over its standard deviation, t (n - t) / (n (n - 1)) sum (r - mean)^2,
    which counts ties). `ranks` are the segment's values' ranks within the segment (`ranks`).
    (-1, 0.0) when no split has min_size points on both sides or all values are equal. Ranks make
    the test the same for every noise distribution: a busy night or a second clock state moves
    one rank, not the mean."""
    t, z, _ = _rank_scan(ranks, min_size)
    return t, z


@functools.lru_cache(maxsize=64)
def _partitions(parts: int, most: int) -> np.ndarray:
    """counts[j] = the number of partitions of j into at most `parts` parts, j = 0 .. most."""
    counts = np.zeros(most + 1)
    counts[0] = 1.0
    for size in range(1, parts + 1):  # partitions into parts of size <= `parts` (conjugate)
        for j in range(size, most + 1):
            counts[j] += counts[j - size]
    return counts


@functools.lru_cache(maxsize=1)
def _arrangements() -> np.ndarray:
    """[m, k]: the arrangements of a short side of m points with at most k pairs out of order
    (k <= the other side's length), for m <= SMALL_SIDE and k <= EXACT_INVERSIONS."""
    return np.array([np.cumsum(_partitions(m, EXACT_INVERSIONS)) for m in range(max(SMALL_SIDE, BESIDE) + 1)])


@functools.lru_cache(maxsize=512)
def _combinations(n: int) -> np.ndarray:
    return np.array([float(math.comb(n, m)) for m in range(max(SMALL_SIDE, BESIDE) + 1)])


def exact_split_p(ranks: np.ndarray, t: int) -> float:
    """Two-sided p of the rank-sum test at the split t alone, exact where the shorter side has
    at most max(SMALL_SIDE, BESIDE) points and is nearly all above or all below the other (the
    normal approximation of the scan is far too cautious there: three nights above 125 others is a
    1 in 341,376 arrangement, not a z of 3). With m points on the shorter side, n on the other
    and k pairs out of order (k <= n), the arrangements with at most k are the partitions of
    0 .. k into at most m parts; each of C(m + n, m) arrangements is equally likely under
    exchangeability. 1.0 where it does not apply."""
    total = ranks.size
    m = min(t, total - t)
    if m > max(SMALL_SIDE, BESIDE) or m < 1:
        return 1.0
    side = ranks[:t] if t == m else ranks[t:]
    n = total - m
    u = float(side.sum()) - m * (m + 1) / 2.0  # pairs where the short side is higher
    k = int(np.ceil(min(u, m * n - u) - 1e-9))
    if k > n or k > EXACT_INVERSIONS:
        return 1.0
    return float(min(1.0, 2.0 * _arrangements()[m, k] / _combinations(total)[m]))


class _Ranks:
    """Ranks of any run of a window's values within that run, from one pass over the window:
    below[i, j] counts the values before j lower than value i (ties a half)."""

    def __init__(self, x: np.ndarray):
        s = np.sort(x)
        if (s[1:] == s[:-1]).any():
            lower = (x[None, :] < x[:, None]) + 0.5 * (x[None, :] == x[:, None])
        else:  # no ties: a value equals only itself
            lower = np.less(x[None, :], x[:, None]).astype(float)
            np.fill_diagonal(lower, 0.5)
        self.below = np.zeros((x.size, x.size + 1))
        np.cumsum(lower, axis=1, out=self.below[:, 1:])

    def __call__(self, a: int, b: int) -> np.ndarray:
        """Average ranks (1 .. b - a) of values a .. b-1 among themselves."""
        return self.below[a:b, b] - self.below[a:b, a] + 0.5


def ranks(values: Sequence[float]) -> np.ndarray:
    """Average ranks (1 .. n) of values, ties sharing the mean of their ranks."""
    x = np.asarray(values, dtype=float)
    return _Ranks(x)(0, x.size)


def _degree(n: int) -> int:
    return TREND_DEGREE if n <= 64 else TREND_DEGREE_LONG


@functools.lru_cache(maxsize=256)
def _trend_basis(n: int) -> np.ndarray:
    """An orthonormal basis of the polynomials in the commit index over n points (`_degree`)."""
    u = (np.arange(n) - (n - 1) / 2.0) / (n / 2.0)
    q, _ = np.linalg.qr(np.vander(u, _degree(n) + 1))
    return q


def _tail_sums(a: np.ndarray) -> np.ndarray:
    """Sums of a[t:] along the first axis for t = 0 .. len(a)."""
    return np.concatenate((np.cumsum(a[::-1], axis=0)[::-1], np.zeros((1,) + a.shape[1:])))


def _second_step(csum: np.ndarray, sq: float, t: int, min_size: int = 3) -> int:
    """Where a second step beside the one at t fits a segment best (least squares with three
    levels; csum: its cumulative sums from 0, sq: its sum of squares), or -1 when there is no
    room for one."""
    n = csum.size - 1
    best, best_fit = -1, -np.inf
    for lo, hi in ((min_size, t - min_size), (t + min_size, n - min_size)):
        if lo > hi:
            continue
        s = np.arange(lo, hi + 1)
        a, b = np.minimum(s, t), np.maximum(s, t)
        fit = csum[a] ** 2 / a + (csum[b] - csum[a]) ** 2 / (b - a) + (csum[n] - csum[b]) ** 2 / (n - b)
        k = int(np.argmax(fit))
        if fit[k] > best_fit:
            best, best_fit = int(s[k]), float(fit[k])
    return best


def drift_p_value(values: np.ndarray, t: int) -> float:
    """p of the F test for a smooth trend in a segment beside its steps: the residuals of levels
    with a step at t and a second step where it fits best (`_second_step`) against those of a
    polynomial in the commit index (`_trend_basis`) with the same steps. Small when the segment
    drifts (a slow wander, a ramp, a bulge), about uniform when it is one or two steps on
    independent noise (two steps in one segment are not a trend)."""
    from scipy.special import fdtrc

    n = values.size
    csum = np.concatenate(([0.0], np.cumsum(values)))
    sq = float(values @ values)
    second = _second_step(csum, sq, t)
    edges = sorted({0, t, n} | ({second} if second > 0 else set()))
    rss0 = sq - sum((csum[b] - csum[a]) ** 2 / (b - a) for a, b in itertools.pairwise(edges))
    q = _trend_basis(n)
    steps = (np.arange(n)[:, None] >= np.array(edges[1:-1])[None, :]).astype(float)
    xr = values - q @ (q.T @ values)
    dr = steps - q @ (q.T @ steps)
    gram, cross = dr.T @ dr, dr.T @ xr
    rss1 = float(xr @ xr - cross @ np.linalg.solve(gram, cross))
    extra, rest = q.shape[1] - 1, n - q.shape[1] - steps.shape[1]
    if rss1 <= 0.0 or rest <= 0:
        return 0.0 if rss0 > 0.0 else 1.0
    return float(fdtrc(extra, rest, max(rss0 - rss1, 0.0) / extra / (rss1 / rest)))


def noise_scale(values: np.ndarray) -> float:
    """The night-to-night noise of a series, robust to steps, busy nights and slow drift: the
    median absolute deviation of consecutive differences, scaled to a normal standard deviation
    (x 1.4826, / sqrt 2)."""
    d = np.diff(values)
    return float(1.4826 * _median(np.abs(d - _median(d))) / np.sqrt(2.0)) if d.size else 0.0


def trend_scan(values: np.ndarray, min_size: int, sigma: float) -> tuple[int, float]:
    """The split t where a step on top of a polynomial trend (`_trend_basis`) stands out most,
    and its z: the step's least-squares height in the model trend + step at t, over its standard
    error with noise sigma. A drift bends the trend, not the step."""
    n = values.size
    q = _trend_basis(n)
    t = np.arange(min_size, n - min_size + 1)
    qd = _tail_sums(q)[t]  # q' step_t for every t
    num = _tail_sums(values)[t] - qd @ (q.T @ values)
    den = (n - t) - np.sum(qd * qd, axis=1)
    z = num / (sigma * np.sqrt(np.maximum(den, 1e-12)))
    k = int(np.argmax(np.abs(z)))
    return int(t[k]), float(z[k])


def jump_z(values: np.ndarray, t: int, sigma: float) -> float:
    """z of a step at t on top of a polynomial trend (`trend_scan` at one split)."""
    n = values.size
    q = _trend_basis(n)
    qd = q[t:].sum(axis=0)
    num = values[t:].sum() - qd @ (q.T @ values)
    den = (n - t) - qd @ qd
    return float(num / (sigma * np.sqrt(max(den, 1e-12))))


def is_sharp(values: np.ndarray, t: int, near: int = SHARP_NEAR) -> bool:
    """Whether the change at t happens at t: the medians of the `near` points on either side
    differ by at least half as much, in the same direction, as the medians of the two whole
    sides. A step passes (both differences are its height); a bulge that the rank test takes
    for a change fails (it builds up over the segment, so `near` points either side of t are
    about level)."""
    whole = _median(values[t:]) - _median(values[:t])
    local = _median(values[t:t + near]) - _median(values[max(t - near, 0):t])
    return bool(local * whole > 0 and abs(local) >= 0.5 * abs(whole))


def drifts_at(values: np.ndarray, t: int) -> bool:
    """Whether a segment with a change at t drifts and the change does not stand out from the
    drift: a polynomial trend beside the steps is significant (`drift_p_value` < DRIFT_ALPHA)
    and the step on top of it is not (`jump_z` below JUMP_Z with the night-to-night noise)."""
    if values.size < DRIFT_MIN or drift_p_value(values, t) >= DRIFT_ALPHA:
        return False
    sigma = noise_scale(values)
    return sigma <= 0.0 or abs(jump_z(values, t, sigma)) < JUMP_Z


@functools.lru_cache(maxsize=512)
def _edge_terms(n: int, min_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For the splits with at most SMALL_SIDE points on one side: the splits, the short side's
    length, whether it is the left one, and the rank-sum standard deviation."""
    t = np.arange(min_size, n - min_size + 1)
    m = np.minimum(t, n - t)
    t, m = t[m <= SMALL_SIDE], m[m <= SMALL_SIDE]
    return t, m, t == m, np.sqrt(m * (n - m) * (n + 1) / 12.0)


def _edge_split(ranks: np.ndarray, csum: np.ndarray, min_size: int) -> tuple[int, float]:
    """Among the splits with at most SMALL_SIDE points on one side, nearly all above or below
    the rest, the one with the smallest exact p (`exact_split_p`), and that p; (-1, 1.0) when
    there is none. csum: cumulative sums of ranks - (n + 1) / 2."""
    n = ranks.size
    t, m, left, sd = _edge_terms(n, min_size)
    if t.size == 0:
        return -1, 1.0
    # The short side's rank sum less its mean: u - m (n - m) / 2, u its pairs above the other side.
    d = np.where(left, csum[t - 1], -csum[t - 1])
    k = m * (n - m) / 2.0 - np.abs(d)  # pairs out of order
    # (below EDGE_Z the exact p is above 1% whatever the counts: not worth counting)
    near = np.flatnonzero((k <= EXACT_INVERSIONS) & (k <= n - m) & (np.abs(d) >= EDGE_Z * sd))
    if near.size == 0:
        return -1, 1.0
    # The least likely arrangement (where exactly the change lies is `refine_split`'s to say):
    # `exact_split_p` of every such split at once.
    mm, kk = m[near], np.ceil(k[near] - 1e-9).astype(int)
    p = 2.0 * _arrangements()[mm, kk] / _combinations(n)[mm]
    best = int(np.argmin(p))
    return int(t[near[best]]), float(min(1.0, p[best]))


def _z_of(p: float) -> float:
    """The two-sided normal z of a p-value (the statistic reported for an exact p)."""
    from scipy.special import ndtri
    return float(-ndtri(max(p, 1e-300) / 2.0))


def stands_out(values: np.ndarray, t: int) -> bool:
    """Whether a step at t stands at least STAND_Z standard errors above a smooth trend through
    the segment (`jump_z`, noise from `noise_scale`): a wander that happens to look level on
    both sides of t over a short segment does not."""
    if values.size < DRIFT_MIN:
        return True
    sigma = noise_scale(values)
    return sigma <= 0.0 or abs(jump_z(values, t, sigma)) >= STAND_Z


def _candidate(x: np.ndarray, rank_of: _Ranks, a: int, b: int, min_size: int,
               limit: float) -> tuple[int, float, float] | None:
    """(split, statistic, p) of the best split of x[a:b] by its ranks (split relative to a), or
    None when it has none with p <= limit (the scan p is only computed for statistics that may
    reach it). `_settle` then checks it against drift."""
    r = rank_of(a, b)
    t, z, csum = _rank_scan(r, min_size)
    if t < 0:
        return None
    p = scan_p_value(abs(z), b - a, min_size) if abs(z) >= _z_floor(b - a, min_size) else 1.0
    # A few nights at an end of the interval that are all above (below) the rest: the scan's
    # normal approximation cannot see them, the exact count can (Bonferroni over the splits it
    # counts: those with at most SMALL_SIDE points on one side). They also lift the scan's statistic at splits far from them: where both are
    # significant, the split that leaves its two sides closer to their medians is the change.
    edge, p_edge = _edge_split(r, csum, min_size)
    p_edge = min(1.0, _edge_terms(b - a, min_size)[0].size * p_edge)
    if p_edge <= limit and (p > limit or (edge != t and _spread(x[a:b], edge) < _spread(x[a:b], t))):
        t, p = edge, p_edge
        z = float(np.sign(np.mean(r[edge:]) - np.mean(r[:edge])) * _z_of(p_edge))
    elif p > limit:
        return None
    return t, z, p


def _settle(part: np.ndarray, t: int, z: float, p: float, min_size: int,
            limit: float) -> tuple[int, float, float, bool] | None:
    """A rank split of `part` checked against drift: (split, statistic, p, level) or None.
    Where a polynomial trend is significant the split must stand out from it (`trend_scan`,
    level False); elsewhere it must change at the split (`is_sharp`, level True)."""
    if part.size >= DRIFT_MIN and drift_p_value(part, t) < DRIFT_ALPHA:
        # The segment drifts: the rank test only says that its two sides differ. A step must
        # also stand out from a polynomial trend, at a level corrected for the splits tried.
        sigma = noise_scale(part)
        if sigma <= 0.0:
            return None
        t, z = trend_scan(part, min_size, sigma)
        tried = part.size - 2 * min_size + 1
        p = max(p, float(min(1.0, 2.0 * tried * _ndtr(-abs(z)))))
        return (t, z, p, False) if p <= limit else None
    return (t, z, p, True) if is_sharp(part, t) else None


def _spread(values: np.ndarray, t: int) -> float:
    """How far the two sides of a split lie from their medians: the total absolute deviation
    (a busy night counts by its distance, not its square)."""
    left, right = values[:t], values[t:]
    return float(np.abs(left - _median(left)).sum() + np.abs(right - _median(right)).sum())


def refine_split(values: np.ndarray, t: int, min_size: int, reach: int = REFINE_REACH) -> int:
    """The split within `reach` of t whose two sides lie closest to the medians of the sides at
    t (least total absolute deviation). Ranks place a change only up to the ranks it moves: the
    night before a step may be the highest of its side and still far below the step, and the
    rank statistic cannot tell it apart from one after the step; the values can. Medians and
    absolute deviations keep a busy night beside the step from pulling the split to it."""
    n = values.size
    lo, hi = max(min_size, t - reach), min(n - min_size, t + reach)
    if lo >= hi:
        return t
    before, after = _median(values[:t]), _median(values[t:])
    # cost(u) = sum_{i<u} |x_i - before| + sum_{i>=u} |x_i - after|, less cost(lo)
    moved = values[lo:hi]
    cost = np.concatenate(([0.0], np.cumsum(np.abs(moved - before) - np.abs(moved - after))))
    u = np.arange(lo, hi + 1)
    best = np.flatnonzero(cost <= cost.min() + 1e-12 * max(abs(cost.min()), 1e-300))
    return int(t if t in u[best] else u[best[0]])


def window_level(alpha: float, n: int) -> float:
    """The level of the search of a window of n points: alpha for a full window, rising as
    (WINDOW / n)^2 up to SHORT_ALPHA for a short one. A window shorter than WINDOW is a young
    history (the whole series): few commits to judge a change by, and few to raise false alarms
    on. Ranks cannot be surer than their arrangements: the 6 nights before and 5 after a step
    in an 11-night history are one of C(11, 5) = 462 orders, p = 0.026 for the best split of
    six, so a young history is judged at about the former permutation test's 0.05."""
    return min(SHORT_ALPHA, alpha * max(1.0, WINDOW / n) ** 2)


def seeded_intervals(n: int, shortest: int = SHORTEST_INTERVAL) -> list[tuple[int, int]]:
    """The intervals a window's search looks into besides its segments: the whole window, then
    halves, quarters, ... down to `shortest` points, each scale overlapping by half (seeded binary
    segmentation: Kovacs, Li, Buehlmann & Munk, "Seeded binary segmentation", Biometrika
    110(1):249-256, 2023). A bump (a step and its revert a few commits later) shows in an interval
    that holds it and little else, where the whole window's best single split is weak."""
    out = [(0, n)]
    length = n // 2
    while length >= shortest:
        starts = list(range(0, n - length + 1, length // 2))
        if starts[-1] + length < n:
            starts.append(n - length)
        out += [(a, a + length) for a in starts]
        length //= 2
    return out


@functools.lru_cache(maxsize=512)
def _block_terms(n: int, min_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runs of min_size .. SMALL_SIDE points inside a segment of n points with at least
    min_size points of the segment on either side (a run at an end is a split, `_edge_split`):
    their starts, lengths and rank-sum standard deviations."""
    m = np.arange(min_size, SMALL_SIDE + 1)
    start = [np.arange(min_size, n - k - min_size + 1) for k in m if n - k - min_size >= min_size]
    if not start:
        return np.zeros(0, int), np.zeros(0, int), np.zeros(0)
    length = np.concatenate([np.full(s.size, k) for s, k in zip(start, m)])
    start = np.concatenate(start)
    return start, length, np.sqrt(length * (n - length) * (n + 1) / 12.0)


def block_p(ranks: np.ndarray, min_size: int) -> tuple[int, int, float]:
    """The run of min_size .. SMALL_SIDE consecutive points inside a segment (at least min_size
    points from either end) whose points lie nearly all above (below) all the others, as (start, stop, p), p
    the exact rank-sum p of the run against the rest times the number of runs tried
    (Bonferroni); (-1, -1, 1.0) when none is near. Under exchangeability the ranks of any m
    given points are a random m-subset wherever they lie, so the count of `exact_split_p`
    holds for a run in the middle as for one at an end."""
    n = ranks.size
    start, length, sd = _block_terms(n, min_size)
    if start.size == 0:
        return -1, -1, 1.0
    csum = np.concatenate(([0.0], np.cumsum(ranks - (n + 1) / 2.0)))
    d = csum[start + length] - csum[start]  # the run's rank sum less its mean
    k = length * (n - length) / 2.0 - np.abs(d)
    near = np.flatnonzero((k <= EXACT_INVERSIONS) & (k <= n - length) & (np.abs(d) >= EDGE_Z * sd))
    if near.size == 0:
        return -1, -1, 1.0
    mm, kk = length[near], np.ceil(k[near] - 1e-9).astype(int)
    p = 2.0 * _arrangements()[mm, kk] / _combinations(n)[mm]
    best = int(np.argmin(p))
    s = int(start[near[best]])
    return s, s + int(mm[best]), float(min(1.0, start.size * p[best]))


def block_z(values: np.ndarray, s: int, e: int, sigma: float) -> float:
    """z of a run values[s:e] standing apart from a polynomial trend through its segment
    (`_trend_basis`): its least-squares height in the model trend + run, over its standard error
    with noise sigma. The crest of a slow wave is the highest run of its segment, and the trend
    takes it."""
    q = _trend_basis(values.size)
    qd = q[s:e].sum(axis=0)
    num = values[s:e].sum() - qd @ (q.T @ values)
    den = (e - s) - qd @ qd
    return float(num / (sigma * np.sqrt(max(den, 1e-12))))


def near_gaussian(values: np.ndarray) -> bool:
    """Whether a window's noise looks Gaussian: at most TAIL_COUNT of its points lie more than
    TAIL_Z robust standard deviations (median absolute deviation) from the median of the 5
    points around them. A running median follows steps, bumps of 3 nights or more and slow
    drift, so what is left is the night-to-night noise: Gaussian noise has a point that far
    in about 1 window in 25, heavy-tailed, skewed, bursty and contaminated noise in most."""
    if values.size < 16:
        return False
    w = np.lib.stride_tricks.sliding_window_view(values, 5)
    res = values[2:-2] - np.partition(w, 2, axis=1)[:, 2]
    res = res - _median(res)
    s = 1.4826 * _median(np.abs(res))
    return bool(s > 0.0 and np.count_nonzero(np.abs(res) > TAIL_Z * s) <= TAIL_COUNT)


def value_runs_p(values: np.ndarray, start: np.ndarray, length: np.ndarray) -> tuple[int, float]:
    """Among the runs values[start:start + length], the one whose mean differs most from that of
    the rest of the segment by the two-sample t test (pooled variance, n - 2 degrees of freedom),
    as (its position in `start`, its two-sided p). For Gaussian noise (`near_gaussian`), where a
    run's p is not bounded below by its rank arrangements: four nights at the bottom of 61 are 1
    in 521,855 arrangements however far below they lie, and their values say how far."""
    from scipy.special import stdtr

    n = values.size
    c1 = np.concatenate(([0.0], np.cumsum(values)))
    c2 = np.concatenate(([0.0], np.cumsum(values * values)))
    s1 = c1[start + length] - c1[start]
    s2 = c2[start + length] - c2[start]
    r1, r2, m, k = c1[n] - s1, c2[n] - s2, length.astype(float), (n - length).astype(float)
    within = np.maximum(s2 - s1 * s1 / m + r2 - r1 * r1 / k, 1e-300)
    t = (s1 / m - r1 / k) / np.sqrt(within / (n - 2) * (1.0 / m + 1.0 / k))
    t[length < VALUE_RUN] = 0.0  # three nights' mean leans on the noise's tails, not its centre
    best = int(np.argmax(np.abs(t)))
    return best, float(2.0 * stdtr(n - 2, -abs(t[best])))


def _best_block(x: np.ndarray, rank_of: _Ranks, bounds: list[int], blocks: dict, min_size: int,
                alpha: float, gaussian: bool = False) -> tuple[int, int, float, float] | None:
    """The most significant run (`block_p`) of the segments between `bounds`, as (start, stop,
    z, p) in window indices, or None when none has p <= alpha (times window / segment length, as
    for a seeded interval), stands JUMP_Z standard errors apart from the segment's trend
    (`block_z`) and differs from the SHARP_NEAR points on each side (`is_sharp` at both ends).
    `blocks` keeps each segment's answer."""
    n = x.size
    best = None
    for a, b in itertools.pairwise(bounds):
        if (a, b) not in blocks:
            blocks[(a, b)] = None
            if b - a >= DRIFT_MIN:
                s, e, p = block_p(rank_of(a, b), min_size)
                part = x[a:b]
                if gaussian:
                    start, length, _ = _block_terms(b - a, min_size)
                    if start.size:
                        k, pv = value_runs_p(part, start, length)
                        pv = min(1.0, start.size * pv)
                        if pv < p:
                            s, e, p = int(start[k]), int(start[k] + length[k]), pv
                p = min(1.0, p * n / (b - a))
                sigma = noise_scale(part)
                if p <= alpha and sigma > 0.0:
                    z = block_z(part, s, e, sigma)
                    if abs(z) >= JUMP_Z and is_sharp(part[:e], s) and is_sharp(part[s:], e - s):
                        blocks[(a, b)] = (a + s, a + e, z, p)
        offer = blocks[(a, b)]
        if offer is not None and (best is None or offer[3] < best[3]):
            best = offer
    return best


def huber_clip(values: np.ndarray) -> np.ndarray | None:
    """The values clipped at their median +- HUBER_K night-to-night standard deviations
    (`noise_scale`): Huber's psi, so that a busy night, a tail of slow nights or a contaminating
    draw counts as at most HUBER_K standard deviations, while a step of a few nights moves every
    one of them. None when the noise scale is 0."""
    sigma = noise_scale(values)
    if sigma <= 0.0:
        return None
    centre = _median(values)
    return np.clip(values, centre - HUBER_K * sigma, centre + HUBER_K * sigma)


def _near_bound_p(part: np.ndarray, r: np.ndarray, d: np.ndarray, left: bool,
                  tvalues: np.ndarray | None) -> tuple[int, float]:
    """Among the splits of a segment that leave d points beside one of its ends (the left one
    when `left`), the one with the smallest exact p (`exact_split_p`; also the t test of
    `value_runs_p` on `tvalues`, the segment's values on Gaussian noise, else `huber_clip`'s),
    as (split, p), p not yet multiplied by the splits tried."""
    size = part.size
    csum = np.concatenate(([0.0], np.cumsum(r)))
    splits = d if left else size - d
    # `exact_split_p` of each split, the short side the d points beside the end
    u = (csum[d] if left else csum[size] - csum[size - d]) - d * (d + 1) / 2.0
    k = np.ceil(np.minimum(u, d * (size - d) - u) - 1e-9).astype(int)
    ok = (k <= size - d) & (k <= EXACT_INVERSIONS)
    p = np.ones(d.size)
    p[ok] = np.minimum(1.0, 2.0 * _arrangements()[d[ok], k[ok]] / _combinations(size)[d[ok]])
    k = int(np.argmin(p))
    if tvalues is not None:
        kv, pv = _end_t_p(tvalues if left else tvalues[::-1], d)
        if pv < p[k]:
            k, p[k] = kv, pv
    return int(splits[k]), float(p[k])


@functools.lru_cache(maxsize=512)
def _end_weights(n: int, first: int, last: int) -> np.ndarray:
    """n / (d (n - d)) for d = first .. last, 0 below VALUE_RUN: the between-sides sum of
    squares of a split leaving d points beside an end is (their sum less d means)^2 times this."""
    d = np.arange(first, last + 1, dtype=float)
    return np.where(d >= VALUE_RUN, n / (d * (n - d)), 0.0)


def _end_t_p(values: np.ndarray, d: np.ndarray) -> tuple[int, float]:
    """`value_runs_p` of the runs values[:d] (the first d points of a segment against the
    rest, d consecutive), from the sums of the first max(d) points: the pooled t of each split
    is t^2 = (n - 2) B / (S - B), B its between-sides and S the total sum of squares. p is 1.0
    where |t| < END_T, which times the at least 16 splits counted is above any level used here."""
    from scipy.special import stdtr

    n = values.size
    dev = values - float(values.sum()) / n
    between = np.cumsum(dev[:d[-1]])[d - 1] ** 2 * _end_weights(n, int(d[0]), int(d[-1]))
    best = int(np.argmax(between))
    t2 = (n - 2) * float(between[best]) / max(float(dev @ dev) - float(between[best]), 1e-300)
    if t2 < END_T * END_T:
        return best, 1.0
    return best, float(2.0 * stdtr(n - 2, -math.sqrt(t2)))


def _beside_step(x: np.ndarray, rank_of: _Ranks, bounds: list[int], min_size: int, alpha: float,
                 gaussian: bool = False, ends: dict | None = None) -> tuple[int, float, float] | None:
    """A second step within BESIDE commits of a change point found, or within SMALL_SIDE
    commits of the window's first or last point: among the splits of the segments beside the
    window's inner bounds that leave min_size .. BESIDE points between the bound and the split,
    and of its first and last segments that leave min_size .. SMALL_SIDE points between the
    window's end and the split, the one with the smallest exact p (`exact_split_p`) or t test
    (`value_runs_p`: of the values on Gaussian noise, else of `huber_clip`'s), that p multiplied by the splits of these kinds in the
    window (not by window length / segment length as for any split: two steps close together
    are tried only beside a step already found, and a step at a window's end is tried against
    the segment it ends, however short). (split, statistic, p) in window indices, or None when
    none has p <= alpha, changes at the split (`is_sharp`) and stands out from the segment's
    drift (`drifts_at`). `ends` keeps each segment end's best split, its p before the count and
    whether it passed those checks."""
    n = x.size
    ends = {} if ends is None else ends
    inner = bounds[1:-1]
    beside = np.arange(min_size, BESIDE + 1)
    end = np.arange(min_size, SMALL_SIDE + 1)
    # Each kind of split pays for its own: 2 x 10 beside each change point found, 2 x 8 at the
    # window's ends.
    tried = {True: 2 * len(inner) * beside.size, False: 2 * end.size}
    best = None
    for lo, hi in itertools.pairwise(bounds):
        size = hi - lo
        r, part, tvalues = None, x[lo:hi], None
        for left in (True, False):
            bound = lo if left else hi
            near = bound in inner
            if not near and bound not in (0, n):
                continue
            reach = beside if near else end
            d = reach[reach <= size - min_size]
            if d.size == 0:
                continue
            key = (lo, hi, left, near)
            if key not in ends:
                if r is None:
                    r = rank_of(lo, hi)
                    tvalues = part if gaussian else huber_clip(part)
                ends[key] = _near_bound_p(part, r, d, left, tvalues) + (None,)
            t, pk, sharp = ends[key]
            pk = min(1.0, tried[near] * pk)
            if pk > alpha or (best is not None and pk >= best[2]):
                continue
            if sharp is None:  # checked once per segment end, when it first could be kept
                sharp = is_sharp(part, t) and not drifts_at(part, t)
                ends[key] = (t, ends[key][1], sharp)
            if not sharp:
                continue
            best = (lo + t, float(np.sign(np.mean(part[t:]) - np.mean(part[:t])) * _z_of(pk)), pk)
    return best


def search_window(values: Sequence[float], alpha: float = ALPHA, min_size: int = 3,
                  max_change_points: int = 8) -> list[ChangePoint]:
    """Change points of one window, in index order: seeded binary segmentation with the rank
    scan.

    Every interval (`seeded_intervals`) and every segment between the change points found so far
    offers its best split (`rank_scan`; in one that drifts, `trend_scan`), its scan p multiplied
    by (window length / interval length), the number of intervals of that length that fit side by
    side; a split between two levels must also change at the split (`is_sharp`). The split with
    the smallest p is kept if p <= alpha (`window_level` for a short window) and it stands out
    from the trend of the segment it splits (`drifts_at`, `stands_out`); it is placed by
    `refine_split`, intervals holding it are dropped, and the search goes on until no split is
    left. q is the split's statistic (a z), p_value its adjusted p. Deterministic: no shuffles,
    so no seed."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2 * min_size:
        return []
    alpha = window_level(alpha, n)
    rank_of = _Ranks(x)
    gaussian = near_gaussian(x)
    bounds = [0, n]
    seeded = seeded_intervals(n)
    offers: dict[tuple[int, int], tuple[int, float, float, bool | None] | None] = {}
    for length in sorted({b - a for a, b in seeded}):
        offers.update(dict.fromkeys(_hopeless(x, rank_of, [iv for iv in seeded if iv[1] - iv[0] == length],
                                              min_size)))
    found: list[ChangePoint] = []
    blocks: dict[tuple[int, int], tuple[int, int, float, float] | None] = {}
    ends: dict[tuple[int, int, bool, bool], tuple[int, float, bool | None]] = {}
    while len(found) < max_change_points:
        best, where = None, None
        for a, b in seeded + list(itertools.pairwise(bounds)):
            if (a, b) not in offers:
                if any(a < cp.index < b for cp in found):
                    continue
                scale = n / (b - a)
                offer = _candidate(x, rank_of, a, b, min_size, alpha / scale)
                offers[(a, b)] = None if offer is None else (a + offer[0], offer[1], min(1.0, offer[2] * scale),
                                                             None)
            offer = offers[(a, b)]
            if offer is not None and (best is None or offer[2] < best[2]) \
                    and not any(a < cp.index < b for cp in found):
                best, where = offer, (a, b)
        if best is None or (best[3] is not None and best[2] > alpha):
            # No split left: a short run inside a segment that stands apart from the rest of it
            # (a bump, or the middle level of two steps close together) is two change points.
            block = _best_block(x, rank_of, bounds, blocks, min_size, alpha, gaussian)
            if block is None:
                beside = _beside_step(x, rank_of, bounds, min_size, alpha, gaussian, ends)
                if beside is None:
                    break
                found.append(ChangePoint(index=beside[0], q=beside[1], p_value=beside[2]))
                bounds = sorted(bounds + [beside[0]])
                continue
            for at in block[:2]:
                found.append(ChangePoint(index=at, q=block[2], p_value=block[3]))
            bounds = sorted(bounds + list(block[:2]))
            continue
        a, b = where
        if best[3] is None:
            # Checked against drift only once it is the best offer (most offers never are).
            scale = n / (b - a)
            settled = _settle(x[a:b], best[0] - a, best[1], best[2] / scale, min_size, alpha / scale)
            offers[where] = None if settled is None else (a + settled[0], settled[1], min(1.0, settled[2] * scale),
                                                          settled[3])
            continue
        lo = max(c for c in bounds if c < best[0])
        hi = min(c for c in bounds if c > best[0])
        if ((lo, hi) != where and drifts_at(x[lo:hi], best[0] - lo)) or \
                (best[3] and not stands_out(x[lo:hi], best[0] - lo)):
            offers[where] = None
            continue
        # Placed by the points of the interval that offered the split, within its segment: the
        # segment's far side may hold the step's revert, which moves the side's median.
        near_lo, near_hi = max(lo, a), min(hi, b)
        at = near_lo + refine_split(x[near_lo:near_hi], best[0] - near_lo, min_size) if best[3] else best[0]
        found.append(ChangePoint(index=at, q=best[1], p_value=best[2]))
        bounds = sorted(bounds + [at])
    return settle_places(x, sorted(found, key=lambda cp: cp.index), min_size)


def settle_places(x: np.ndarray, points: list[ChangePoint], min_size: int = 3) -> list[ChangePoint]:
    """The change points of a window, each placed again (`refine_split`) between its neighbours
    once all are known: a change found before the step beside it was placed with that step's
    level in one of its sides, which pulls it toward the neighbour (in a staircase of steps 4-12
    commits apart, 3-4 commits off)."""
    for _ in range(2):
        moved = False
        for i, cp in enumerate(points):
            lo = points[i - 1].index if i else 0
            hi = points[i + 1].index if i + 1 < len(points) else x.size
            if min(cp.index - lo if i else x.size, hi - cp.index if i + 1 < len(points) else x.size) > BESIDE:
                continue
            lo, hi = max(lo, cp.index - SIDE), min(hi, cp.index + SIDE)
            at = lo + refine_split(x[lo:hi], cp.index - lo, min_size)
            if at != cp.index:
                points[i] = dataclasses.replace(cp, index=at)
                moved = True
        if not moved:
            break
    return points


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
WINDOW = 128


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
    (`pipeline.history.caches.window_cache`). A series of at most `width` points is one window: the
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
        before = float(np.mean(x[max(edges[i], cp.index - SIDE):cp.index]))
        after = float(np.mean(x[cp.index:min(edges[i + 2], cp.index + SIDE)]))
        change = after / before - 1.0 if before != 0.0 else float("inf")
        if abs(change) > threshold:
            steps.append(Step(index=at, commit_before=commits[at - 1], commit_after=commits[at], mean_before=before,
                              mean_after=after, change=change, p_value=cp.p_value))
    return steps


def merge_close(steps: Sequence[Step], min_size: int = 3) -> list[Step]:
    """The steps of one series with those less than min_size commits apart merged, the one with
    the smaller p kept (index order). Within a window change points are at least min_size apart;
    two closer ones are one step placed a commit apart by two windows whose ownership changes
    between them."""
    kept: list[Step] = []
    for step in sorted(steps, key=lambda s: s.index):
        if kept and step.index - kept[-1].index < min_size:
            if step.p_value < kept[-1].p_value:
                kept[-1] = step
            continue
        kept.append(step)
    return kept


def _settings() -> str:
    return " ".join(str(v) for v in (SEARCH, SHORT_ALPHA, SHORTEST_INTERVAL, SMALL_SIDE, EXACT_INVERSIONS, EDGE_Z,
                                     DRIFT_ALPHA, TREND_DEGREE, TREND_DEGREE_LONG, DRIFT_MIN, JUMP_Z,
                                     STAND_Z, SHARP_NEAR, REFINE_REACH, BESIDE, TAIL_Z, TAIL_COUNT,
                                     VALUE_RUN, HUBER_K, END_T))


def window_key(values: np.ndarray, alpha: float = ALPHA, permutations: int = 0, min_size: int = 3,
               seed: int = 0) -> str:
    """A name for the search of one window: the same points and settings give the same change
    points (the search is deterministic), so a search done once is never repeated. The search's
    name and every setting it reads are part of it, so that answers of another search are not
    reused (permutations and seed: kept for callers of the former permutation test, unused)."""
    digest = hashlib.sha256(f"{_settings()} {alpha} {min_size}".encode())
    digest.update(np.ascontiguousarray(values, dtype="<f8").tobytes())
    return digest.hexdigest()[:32]


def detect_steps(
    values: Sequence[float],
    commits: Sequence[str],
    threshold: float = 0.03,
    alpha: float = ALPHA,
    permutations: int = 0,
    min_size: int = 3,
    seed: int = 0,
    width: int = WINDOW,
) -> list[Step]:
    """Steps in a per-commit series that are both significant and larger than `threshold`.

    Method: the series is cut into overlapping windows (`plan_windows`); in each window that
    can hold a step (`can_step`), the rank scan with its drift check (`search_window`) finds
    the change points, and the window reports those it owns whose neighbouring segment
    means differ by more than `threshold` (`steps_in_window`). A statistically real 0.5% drift
    is not worth an alert. The direction is left to the caller (for run times a positive
    change is a slowdown). `pipeline.history.series.find_regressions` does the same with the
    windows' searches cached and spread over a cluster. permutations and seed are accepted for
    callers of the former permutation test and have no effect.
    """
    x = np.asarray(values, dtype=float)
    if len(commits) != x.size:
        raise ValueError(f"{x.size} values but {len(commits)} commits")
    steps = []
    for window in plan_windows(x.size, width):
        part = x[window.start:window.stop]
        if can_step(part, threshold, min_size):
            points = search_window(part, alpha=alpha, min_size=min_size)
            steps += steps_in_window(x, commits, window, points, threshold)
    return merge_close(steps, min_size)


def search_windows(parts: Sequence[Sequence[float]], seed: int = 0) -> list[list[dict]]:
    """`search_window` of several windows' values, the change points as dicts: a batch of
    windows can be one cluster task with plain data both ways (seed: kept for callers, unused)."""
    return [[dataclasses.asdict(cp) for cp in search_window(part)] for part in parts]
