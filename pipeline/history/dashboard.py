"""What the dashboard says, decided from the history series and the stored regressions.

Three parts, in the order a kernel developer reads them each morning:
1. open regressions (a stored slowdown whose series has not recovered), grouped by cause: one
   entry per culprit commit (bisected, or the only commit in the range) or unresolved range,
   with the series it slowed, worst first (`pipeline.history.causes`);
2. failing series (the newest result is build_failed, incorrect, crashed, timeout, invalid);
3. per op and device a matrix of variants × shapes: the latest throughput, % of the peer, the
   last N points, and whether the latest point moved against the previous commit and against
   the median of the last N by more than the noise band. A swept variant (one series per
   parameter point, `workers.core.params`) is one row, its family, showing per shape its best point.

The noise band of a cell is the larger of (a) the confidence interval of the latest point's
median and (b) BAND_SIGMAS robust standard deviations (1.4826 × MAD) of the series' last
SPREAD_POINTS points before it (√2 times that against the previous commit, which is noisy
too): night-to-night wobble that the series always shows is not colour. Everything
here is pure; `reports.history_pages` renders the records (`pipeline.commands.publish` hands
them over).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.history import causes
from pipeline.history.regressions import MEMORY
from workers.core import params, status

SLOWER, FASTER, SAME = "slower", "faster", ""
# A change is coloured beyond this many robust SDs of the series' recent points: on the
# synthetic year 0.1-0.2% of quiet cells get a colour (docs/history.md, benchmarks/dashboard_colour.py).
BAND_SIGMAS = 3.5
SPREAD_POINTS = 60


@dataclass(frozen=True)
class Cell:
    """One series at its newest commit. spark holds the last N measured throughputs (oldest
    first); change_* are relative throughput changes of the latest point; move_* are
    SLOWER / FASTER when that change lies outside the noise band, else SAME. In a swept
    family's row the cell is that of its best point; points counts the family's points at the
    shape and points_failing those whose newest result failed (1 and 0 for a plain variant)."""

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
    points: int = 1
    points_failing: int = 0


@dataclass(frozen=True)
class Matrix:
    """Variants (rows) × shapes (columns) of one op, dtype and device. A row of a swept
    variant is labelled with its family, named in swept."""

    op: str
    dtype: str
    device: str
    unit: str
    shapes: tuple[str, ...]
    rows: tuple[tuple[str, tuple[Cell | None, ...]], ...]
    swept: tuple[str, ...] = ()


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
    rate = latest.rate if status.measured(latest.status) else None
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
        if is_peer and s.points and status.measured(s.points[-1].status) and s.points[-1].rate:
            peer_rates[(op, s.shape, s.dtype, s.device, params.mode_of(s.variant))] = s.points[-1].rate
    cells = {}
    for s in series:
        if not s.points:
            continue
        op, is_peer = ops.get(s.key, ("", False))
        cells[s.key] = cell(s, last_n, None if is_peer else peer_rates.get((op, s.shape, s.dtype, s.device,
                                                                              params.mode_of(s.variant))), is_peer)
    open_now = open_regressions(series, regressions, commits, order)
    failing = sorted((c for c in cells.values() if c.latest.status in status.FAILURES),
                     key=lambda c: c.series.key)
    position = {sha: i for i, sha in enumerate(order)}
    return Dashboard(open_now, causes.group(open_now, commits), tuple(failing),
                     _matrices(series, cells, ops, position), last_n)


def open_regressions(series: Sequence, regressions: Sequence, commits: dict[str, dict],
                     order: Sequence[str]) -> tuple[OpenRegression, ...]:
    """The stored `regressions` whose series has not recovered, largest slowdown first.

    Recovered: the series' newest measured point is back within half the step of the rate
    before it (a memory step: its newest peak memory within half the growth of the level before). commits maps SHA → commit dict; order is the first-parent line (oldest first)
    that counts the commits of a range."""
    by_key = {s.key: s for s in series}
    position = {sha: i for i, sha in enumerate(order)}
    found = []
    for r in regressions:
        s = by_key.get((r.variant, r.shape, r.dtype, r.device))
        if r.metric == MEMORY:  # the newest peak memory against the level before the step
            latest = s.memory[-1].peak_mem_bytes if s and s.memory else None
            latest_change = latest / r.rate_before - 1 if latest is not None and r.rate_before else None
            if latest_change is not None and latest_change < r.change / 2:
                continue
        else:
            latest = s.measured[-1].rate if s and s.measured else None
            latest_change = latest / r.rate_before - 1 if latest and r.rate_before else None
            if latest_change is not None and latest_change > r.change / 2:
                continue
        between = position[r.bad_sha] - position[r.good_sha] if r.good_sha in position and r.bad_sha in position \
            else None
        culprit = (commits.get(r.culprit_sha) or {"sha": r.culprit_sha}) if r.culprit_sha else None
        found.append(OpenRegression(r, s, commits.get(r.good_sha) or {"sha": r.good_sha},
                                    commits.get(r.bad_sha) or {"sha": r.bad_sha}, culprit, between, latest_change))
    found.sort(key=lambda o: (o.regression.severity, -o.regression.id))
    return tuple(found)


def _matrices(series: Sequence, cells: dict, ops: dict, position: dict[str, int]) -> tuple[Matrix, ...]:
    groups: dict[tuple, list] = {}
    for s in series:
        if s.key in cells:
            op = ops.get(s.key, ("", False))[0]
            groups.setdefault((op, s.dtype, s.device), []).append(s)
    out = []
    for (op, dtype, device), members in sorted(groups.items()):
        shapes = sorted({s.shape for s in members}, key=_shape_size)
        grid, swept = _rows_of(members, cells, position)
        labels = sorted({label for label, _ in grid},
                        key=lambda v: (not any(c.peer for (label, _), c in grid.items() if label == v), v))
        rows = tuple((v, tuple(grid.get((v, sh)) for sh in shapes)) for v in labels)
        out.append(Matrix(op, dtype, device, members[0].unit, tuple(shapes), rows, tuple(sorted(swept))))
    return tuple(out)


def _rows_of(members: Sequence, cells: dict, position: dict[str, int]) -> tuple[dict[tuple, Cell], set[str]]:
    """{(row label, shape): cell} of one matrix, and the labels that are swept families: a
    plain variant is its own row; the points of a swept family share the family's row, at each
    shape the cell of its best point (a sweep of twelve points is one row, not twelve)."""
    points: dict[tuple, list[Cell]] = {}
    plain: dict[tuple, Cell] = {}
    for s in members:
        family, axes = params.sweep_family(s.variant)  # a pass is a row of its own, not a point
        if axes:
            points.setdefault((family, s.shape), []).append(cells[s.key])
        else:
            plain[(s.variant, s.shape)] = cells[s.key]
    swept = {family for family, _ in points}
    # A variant swept now but plain before keeps its old series under the same name: those rows
    # are the family's history, not a second row beside it.
    grid = {key: c for key, c in plain.items() if key[0] not in swept}
    grid.update({key: best_point(group, position) for key, group in points.items()})
    return grid, swept


def best_point(group: Sequence[Cell], position: dict[str, int]) -> Cell:
    """The cell that stands for a swept family at one shape: among the points measured at the
    family's newest commit there (a point dropped from the manifest keeps its old series, and its
    old number must not win), the one with the highest latest throughput; without any, the first
    point by name (its status is the row's news). points and points_failing count the group."""
    newest = max(position.get(c.latest.sha, -1) for c in group)
    current = [c for c in group if position.get(c.latest.sha, -1) == newest]
    measured = [c for c in current if c.rate]
    chosen = max(measured, key=lambda c: c.rate) if measured else min(current, key=lambda c: c.series.variant)
    failing = sum(c.latest.status in status.FAILURES for c in current)
    return dataclasses.replace(chosen, points=len(current), points_failing=failing)


def _shape_size(key: str) -> tuple:
    """Shapes in size order (`M=1024,...` before `M=4096,...`), text order as a tie-break."""
    sizes = [int(p.split("=", 1)[1]) for p in key.split(",") if "=" in p and p.split("=", 1)[1].isdigit()]
    return (int(np.prod(sizes)) if sizes else 0, key)
