"""What the dashboard says, decided from the history series and the stored regressions.

Three parts, in the order a kernel developer reads them each morning:
1. open regressions (a stored slowdown whose series has not recovered), grouped by cause: one
   entry per culprit commit (bisected, or the only commit in the range) or unresolved range,
   with the series it slowed, worst first (`pipeline.history.causes`);
2. failing series (the newest result is build_failed, incorrect, crashed, timeout, invalid);
3. per op and device a matrix of variants × shapes: the latest throughput, % of the peer, the
   last N points, and whether the latest point moved against the previous commit and against
   the median of the last N by more than the noise band.

The noise band of a cell is the larger of (a) the confidence interval of the latest point's
median and (b) BAND_SIGMAS robust standard deviations (1.4826 × MAD) of the series' last
SPREAD_POINTS points before it (√2 times that against the previous commit, which is noisy
too): night-to-night wobble that the series always shows is not colour. Everything
here is pure; `reports.history_pages` renders the records (`pipeline.commands.publish` hands
them over).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.history import causes
from workers import status

SLOWER, FASTER, SAME = "slower", "faster", ""
# A change is coloured beyond this many robust SDs of the series' recent points: on the
# synthetic year 0.1-0.2% of quiet cells get a colour (docs/history.md, benchmarks/dashboard_colour.py).
BAND_SIGMAS = 3.5
SPREAD_POINTS = 60


@dataclass(frozen=True)
class Cell:
    """One series at its newest commit. spark holds the last N measured throughputs (oldest
    first); change_* are relative throughput changes of the latest point; move_* are
    SLOWER / FASTER when that change lies outside the noise band, else SAME."""

    series: object
    latest: object
    rate: float | None
    pct_of_peer: float | None
    spark: tuple[float, ...]
    change_prev: float | None
    change_median: float | None
    band: float | None
    move_prev: str = SAME
    move_median: str = SAME
    peer: bool = False


@dataclass(frozen=True)
class Matrix:
    """Variants (rows) × shapes (columns) of one op, dtype and device."""

    op: str
    dtype: str
    device: str
    unit: str
    shapes: tuple[str, ...]
    rows: tuple[tuple[str, tuple[Cell | None, ...]], ...]


@dataclass(frozen=True)
class OpenRegression:
    """A stored regression still visible at the series' newest point. good/bad/culprit are
    commit dicts (sha, subject, author, authored_at); between counts the first-parent commits
    after good up to bad (1 when they are adjacent); latest_change is the newest point against
    the rate before the step."""

    regression: object
    series: object | None
    good: dict
    bad: dict
    culprit: dict | None
    between: int | None
    latest_change: float | None


@dataclass(frozen=True)
class Dashboard:
    """The three parts, and the window and band settings the page explains. regressions are
    the open ones, largest first; causes group them by culprit commit or unresolved range
    (`pipeline.history.causes`), which is how the page lists them."""

    regressions: tuple[OpenRegression, ...]
    causes: tuple
    failing: tuple[Cell, ...]
    matrices: tuple[Matrix, ...]
    last_n: int
    band_sigmas: float = BAND_SIGMAS
    spread_points: int = SPREAD_POINTS


def _ci(point) -> float:
    """Half the width of a point's median CI, relative to its rate."""
    if point.rate and point.rate_lo and point.rate_hi:
        return (point.rate_hi - point.rate_lo) / 2 / point.rate
    return 0.0


def _spread(history: Sequence[float]) -> float:
    """Robust relative SD (1.4826 × MAD / median) of a series' recent points; 0 with too few."""
    if len(history) < 8:
        return 0.0
    w = np.asarray(history)
    median = float(np.median(w))
    return 1.4826 * float(np.median(np.abs(w - median))) / median


def _move(change: float | None, band: float | None) -> str:
    if change is None or band is None or abs(change) <= band:
        return SAME
    return SLOWER if change < 0 else FASTER


def cell(series, last_n: int, peer_rate: float | None = None, peer: bool = False) -> Cell:
    """The dashboard cell of one series (see the module docstring for the band)."""
    latest = series.points[-1]
    measured = series.measured
    window = [p.rate for p in measured[-last_n:]]
    rate = latest.rate if latest.status == status.OK else None
    change_prev = change_median = band = None
    if rate and len(measured) >= 2 and measured[-1] is latest:
        before = measured[-2]
        change_prev = rate / before.rate - 1
        change_median = rate / float(np.median(window)) - 1
        # The spread comes from a longer stretch than the window: a MAD of 20 points is itself
        # too noisy to set a band with, and a long one shrugs off the odd busy night.
        sigma = _spread([p.rate for p in measured[-SPREAD_POINTS - 1:-1]])
        band = max(_ci(latest), BAND_SIGMAS * sigma)
        # Against the previous commit both points are noisy: √2 σ, and both CIs.
        band_prev = max(_ci(latest) + _ci(before), BAND_SIGMAS * math.sqrt(2) * sigma)
        return Cell(series, latest, rate, 100 * rate / peer_rate if peer_rate else None, tuple(window),
                    change_prev, change_median, band, _move(change_prev, band_prev), _move(change_median, band),
                    peer)
    return Cell(series, latest, rate, 100 * rate / peer_rate if rate and peer_rate else None, tuple(window),
                change_prev, change_median, band, peer=peer)


def build(series: Sequence, regressions: Sequence, commits: dict[str, dict], order: Sequence[str],
          ops: dict[tuple, tuple[str, bool]], last_n: int = 20) -> Dashboard:
    """The dashboard of `series` (pipeline.history.Series) and stored `regressions`.

    commits maps SHA → commit dict; order is the first-parent line (oldest first) that counts
    the commits of a range; ops maps a series key to (op, is the peer)."""
    peer_rates = {}
    for s in series:
        op, is_peer = ops.get(s.key, ("", False))
        if is_peer and s.points and s.points[-1].status == status.OK and s.points[-1].rate:
            peer_rates[(op, s.shape, s.dtype, s.device)] = s.points[-1].rate
    cells = {}
    for s in series:
        if not s.points:
            continue
        op, is_peer = ops.get(s.key, ("", False))
        cells[s.key] = cell(s, last_n, None if is_peer else peer_rates.get((op, s.shape, s.dtype, s.device)),
                            is_peer)
    open_now = open_regressions(series, regressions, commits, order)
    failing = sorted((c for c in cells.values() if c.latest.status in status.FAILURES),
                     key=lambda c: c.series.key)
    return Dashboard(open_now, causes.group(open_now, commits), tuple(failing), _matrices(series, cells, ops),
                     last_n)


def open_regressions(series: Sequence, regressions: Sequence, commits: dict[str, dict],
                     order: Sequence[str]) -> tuple[OpenRegression, ...]:
    """The stored `regressions` whose series has not recovered, largest slowdown first.

    Recovered: the series' newest measured point is back within half the step of the rate
    before it. commits maps SHA → commit dict; order is the first-parent line (oldest first)
    that counts the commits of a range."""
    by_key = {s.key: s for s in series}
    position = {sha: i for i, sha in enumerate(order)}
    found = []
    for r in regressions:
        s = by_key.get((r.variant, r.shape, r.dtype, r.device))
        latest = s.measured[-1].rate if s and s.measured else None
        latest_change = latest / r.rate_before - 1 if latest and r.rate_before else None
        if latest_change is not None and latest_change > r.change / 2:
            continue
        between = position[r.bad_sha] - position[r.good_sha] if r.good_sha in position and r.bad_sha in position \
            else None
        culprit = (commits.get(r.culprit_sha) or {"sha": r.culprit_sha}) if r.culprit_sha else None
        found.append(OpenRegression(r, s, commits.get(r.good_sha) or {"sha": r.good_sha},
                                    commits.get(r.bad_sha) or {"sha": r.bad_sha}, culprit, between, latest_change))
    found.sort(key=lambda o: (o.regression.change, -o.regression.id))
    return tuple(found)


def _matrices(series: Sequence, cells: dict, ops: dict) -> tuple[Matrix, ...]:
    groups: dict[tuple, list] = {}
    for s in series:
        if s.key in cells:
            op = ops.get(s.key, ("", False))[0]
            groups.setdefault((op, s.dtype, s.device), []).append(s)
    out = []
    for (op, dtype, device), members in sorted(groups.items()):
        shapes = sorted({s.shape for s in members}, key=_shape_size)
        variants = sorted({s.variant for s in members},
                          key=lambda v: (not any(cells[s.key].peer for s in members if s.variant == v), v))
        grid = {(s.variant, s.shape): cells[s.key] for s in members}
        rows = tuple((v, tuple(grid.get((v, sh)) for sh in shapes)) for v in variants)
        out.append(Matrix(op, dtype, device, members[0].unit, tuple(shapes), rows))
    return tuple(out)


def _shape_size(key: str) -> tuple:
    """Shapes in size order (`M=1024,...` before `M=4096,...`), text order as a tie-break."""
    sizes = [int(p.split("=", 1)[1]) for p in key.split(",") if "=" in p and p.split("=", 1)[1].isdigit()]
    return (int(np.prod(sizes)) if sizes else 0, key)
