"""Decides which series regressed, from the stored `Result` rows of every commit: builds the
per-commit history of each series (variant × shape × dtype × device) and finds its slowdown steps.

A series is ordered along the first-parent line of a branch (the order in which changes
landed on it), oldest first. One point per commit pools the samples of every ok result
stored for that commit, so re-runs sharpen a point instead of replacing it; its noise band
is the confidence interval of that pooled median (`workers.measure.stats.median_ci`).
"""

from __future__ import annotations

import itertools
import operator
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import orjson

from pipeline.history import changepoint
from pipeline.history.compare import flatten_numeric, series_key
from pipeline.history.memory import steps as memory_steps
from pipeline.history.memory.threshold import DEFAULT as memory_threshold_default
from pipeline.history.memory.threshold import MemoryThreshold
from pipeline.history.regressions import MEMORY, Regression
from pipeline.project import config
from workers.core import status
from workers.measure.stats import median_ci


class Point(NamedTuple):
    """One commit of one series (a NamedTuple, not a dataclass: a fleet's history makes a
    million of them, and a tuple is built five times faster). rate is work/s at the pooled median (None when no ok
    sample exists); rate_lo/rate_hi come from the median's CI (throughput is 1/time, so
    the time CI's ends swap); status is that of the newest result at this commit; n_samples is
    None where it was not counted (older commits measured once: `scan`)."""

    sha: str
    subject: str
    author: str
    authored_at: str
    status: str
    median_s: float | None = None
    rate: float | None = None
    rate_lo: float | None = None
    rate_hi: float | None = None
    n_samples: int | None = 0
    resources: dict | None = None
    counters: dict | None = None
    diagnostic: str = ""
    # The newest measured result's peak memory at this commit (`Result.peak_mem_bytes`; None
    # where none was measured): deterministic, so one figure, not a pooled one.
    peak_mem_bytes: int | None = None


@dataclass(frozen=True)
class Series:
    variant: str
    shape: str
    dtype: str
    device: str
    unit: str
    points: tuple[Point, ...]

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.variant, self.shape, self.dtype, self.device

    @property
    def slug(self) -> str:
        """A file-name-safe identifier for the series' page."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(self.key)).strip("_")

    @property
    def measured(self) -> list[Point]:
        return [p for p in self.points if p.rate is not None and status.measured(p.status)]

    @property
    def memory(self) -> list[Point]:
        """The measured points that carry a peak memory (GPU results)."""
        return [p for p in self.points if p.peak_mem_bytes is not None and status.measured(p.status)]


def first_parent_shas(repo, branch: str = "HEAD") -> list[str]:
    """SHAs along the first-parent line ending at `branch`, oldest first."""
    return [c.hexsha for c in repo.iter_commits(branch, first_parent=True)][::-1]


def date_order(commits: Sequence[dict]) -> list[str]:
    """Fallback order without a repository: by author date, then by SHA."""
    return [c["sha"] for c in sorted(commits, key=lambda c: (c.get("authored_at") or "", c["sha"]))]


# The result columns a series reads, in this order (`Store.scan_results`: the samples themselves
# are read only where re-runs must be pooled, and counted only for the newest commits, whose
# points the trend pages list); the pages also read the resources and counters.
TIMING_COLUMNS = ("id", "commit_sha", "dirty", "variant", "op", "shape", "dtype", "device", "status", "peer",
                  "median_s", "ci_low_s", "ci_high_s", "flops", "bytes_moved", "diagnostic", "has_samples",
                  "peak_mem_bytes")
# Points whose number of samples is known without pooling: those of the newest commits of the
# line (the trend page's table lists the newest 30 points of a series).
COUNTED_COMMITS = 30
SERIES_COLUMNS = (*TIMING_COLUMNS, "resources", "counters")
(_ID, _SHA, _DIRTY, _VARIANT, _OP, _SHAPE, _DTYPE, _DEVICE, _STATUS, _PEER, _MEDIAN, _LO, _HI, _FLOPS, _BYTES,
 _DIAGNOSTIC, _HAS_SAMPLES, _MEMORY, _RESOURCES, _COUNTERS) = range(len(SERIES_COLUMNS))


def _flat(value, cache: dict | None = None) -> dict:
    """A resources or counters tree (decoded, or JSON text) as flat numeric leaves; identical
    texts share one dict through `cache` (a series' resources rarely change between commits)."""
    if not isinstance(value, str):
        return flatten_numeric(value or {})
    if cache is not None and value in cache:
        return cache[value]
    tree = orjson.loads(value) if value else {}
    if type(tree) is dict and all(type(v) is not dict for v in tree.values()):
        # Counters are one flat table (plus a list of kernel names): no recursion needed.
        flat = {k: float(v) for k, v in tree.items() if type(v) is float or type(v) is int}
    else:
        flat = flatten_numeric(tree)
    if cache is not None:
        cache[value] = flat
    return flat


def _commit_fields(commit: dict) -> tuple[str, str, str, str]:
    """The commit's part of every `Point` (sha, subject, author, authored_at)."""
    return (commit["sha"], commit.get("subject") or "", commit.get("author") or "", commit.get("authored_at") or "")


def _point(commit: tuple, rows: list[tuple], details: bool, resources_cache: dict, pooled: Callable,
           counts: dict[int, int]) -> Point:
    """The point of one commit (its `_commit_fields`) from its rows (`SERIES_COLUMNS` tuples,
    oldest first). One ok row (the common case): its stored median and CI, which the timer
    computed from exactly these samples (`workers.measure.timing.measure`), so a history is read without
    decoding a million sample lists; n_samples from counts (row id → samples) where known, else
    None. Several ok rows (re-runs): the median and CI of all their samples pooled, which
    pooled(row ids) reads."""
    newest = rows[-1]
    meta = (*commit, newest[_STATUS])
    diagnostic = (newest[_DIAGNOSTIC] or "")[:500] if not status.measured(newest[_STATUS]) else ""
    ok = [r for r in rows if status.measured(r[_STATUS]) and r[_HAS_SAMPLES]]
    if not ok:
        return Point(*meta, diagnostic=diagnostic)
    memory = next((r[_MEMORY] for r in reversed(ok) if r[_MEMORY] is not None), None)
    last = ok[-1]
    if len(ok) == 1 and last[_MEDIAN] and last[_LO] is not None and last[_HI] is not None:
        median, lo, hi, n = last[_MEDIAN], last[_LO], last[_HI], counts.get(last[_ID])
    else:
        samples = pooled([r[_ID] for r in ok])
        median = float(statistics.median(samples))  # 10x numpy's on a few dozen floats
        lo, hi = median_ci(samples)
        n = len(samples)
    work = last[_FLOPS] or last[_BYTES] or 0.0
    if not work or median <= 0:
        return Point(*meta, median_s=median, n_samples=n, diagnostic=diagnostic, peak_mem_bytes=memory)
    return Point(*meta, median, work / median, work / hi if hi else None, work / lo if lo else None, n,
                 _flat(last[_RESOURCES], resources_cache) if details else None,
                 _flat(last[_COUNTERS]) if details else None, diagnostic, memory)


def _series(rows: list[tuple], line: Sequence[tuple], position: dict[str, int], details: bool,
            pooled: Callable, counts: dict[int, int]) -> Series | None:
    """One series from its rows (`SERIES_COLUMNS` tuples of one variant × shape × dtype ×
    device, oldest first) along `line` (`_commit_fields` of each commit); None when no row is
    on the line."""
    by_commit: dict[str, list[tuple]] = {}
    for r in rows:
        if r[_SHA] in position and r[_SHAPE] and not r[_DIRTY]:
            by_commit.setdefault(r[_SHA], []).append(r)
    if not by_commit:
        return None
    shas = sorted(by_commit, key=position.__getitem__)
    resources_cache: dict = {}
    points = tuple(_point(line[position[s]], by_commit[s], details, resources_cache, pooled, counts) for s in shas)
    first = by_commit[shas[0]][-1]
    return Series(first[_VARIANT], first[_SHAPE], first[_DTYPE], first[_DEVICE],
                  "FLOP/s" if first[_FLOPS] else "B/s", points)


def build_series(rows: Sequence[dict], commits: Sequence[dict]) -> list[Series]:
    """Series from result rows as dicts (`Store.results`, or built by hand), in the order of
    `commits` (dicts with sha, subject, author, authored_at; oldest first). Rows of commits not
    listed (other branches) are left out, as are rows without a shape (invalid manifests have
    no series) and rows of dirty trees. Samples may be given instead of a stored median."""
    position = {c["sha"]: i for i, c in enumerate(commits)}
    samples_of: dict[int, list] = {}
    grouped: dict[tuple, list[tuple]] = {}
    for i, r in enumerate(rows):
        samples = list(r.get("samples") or ())
        samples_of[i] = samples
        row = {**r, "id": i, "has_samples": int(bool(samples))}
        if not samples:  # a stored median means nothing without the samples behind it
            row["median_s"] = None
        grouped.setdefault(series_key(r), []).append(tuple(row.get(c) for c in SERIES_COLUMNS))
    details = any("resources" in r or "counters" in r for r in rows)

    def pooled(ids):
        return [x for i in ids for x in samples_of[i]]

    line = [_commit_fields(c) for c in commits]
    counts = {i: len(samples) for i, samples in samples_of.items()}
    built = (_series(group, line, position, details, pooled, counts) for _, group in sorted(grouped.items()))
    return [s for s in built if s is not None]


@dataclass(frozen=True)
class Detection:
    """What `detect_regressions` found, and the work it took: windows of all series, those
    that could not hold a reportable step (skipped), those answered by the cache, and those
    searched now."""

    regressions: list[Regression]
    windows: int
    skipped: int
    cached: int
    searched: int


def detect_regressions(series: Sequence[Series], threshold: float | None = 0.05, seed: int = 0,
                       search: Callable | None = None, cache=None,
                       memory_threshold: MemoryThreshold = memory_threshold_default) -> Detection:
    """Slowdown steps of every series (`pipeline.history.changepoint.detect_steps` on the
    per-commit median run times): a step whose later segment is slower by more than
    `threshold` becomes a Regression from the last measured commit before it to the first
    after it. Speed-ups are not regressions and are left out. threshold None: each series
    uses the history default of its device kind (`pipeline.project.config.default_threshold`).

    The windows of all series are planned first; those that can hold a step are looked up in
    `cache` (`pipeline.history.caches.window_cache`; None: no cache) and only the others are searched,
    by search(parts, seed) → change points as dicts per window (default
    `changepoint.search_windows` here; `detect_cluster.search_windows` spreads them over the
    cluster). A nightly thus searches the last window of each series and little else.

    Peak memory steps come beside them (`pipeline.history.memory.steps`, decided by
    `memory_threshold`): Regressions with metric "memory", from the series' GPU results."""
    todo = [s for s in series if len(s.measured) >= 6]  # two segments of min_size 3 need 6 points
    planned = []  # (series index, window, key or None when it cannot hold a step)
    values_of, limits = [], []
    for i, s in enumerate(todo):
        values = np.array([p.median_s for p in s.measured])
        limit = threshold if threshold is not None else config.default_threshold(s.device, "history")
        values_of.append(values)
        limits.append(limit)
        for window in changepoint.plan_windows(values.size):
            part = values[window.start:window.stop]
            can = changepoint.can_step(part, limit)
            key = changepoint.window_key(part, changepoint.ALPHA, 0, 3, seed) if can else None
            planned.append((i, window, key))
    keys = {key for _, _, key in planned if key}
    known = cache.get_many(keys) if cache is not None else {}
    missing = sorted(keys - known.keys())
    if missing:
        wanted = set(missing)
        parts = {key: values_of[i][w.start:w.stop] for i, w, key in planned if key in wanted}
        answers = (search or changepoint.search_windows)([parts[k].tolist() for k in missing], seed)
        fresh = dict(zip(missing, answers))
        if cache is not None:
            cache.put_many(fresh)
        known = {**known, **fresh}
    steps_of: dict[int, list[changepoint.Step]] = {}
    for i, window, key in planned:
        if key is None:
            continue
        points = [changepoint.ChangePoint(**cp) for cp in known[key]]
        shas = [p.sha for p in todo[i].measured]
        steps_of.setdefault(i, []).extend(changepoint.steps_in_window(values_of[i], shas, window, points, limits[i]))
    found = []
    for i, steps in steps_of.items():
        s, limit = todo[i], limits[i]
        work = s.measured[0].rate * s.measured[0].median_s
        for step in changepoint.merge_close(steps):
            if step.change <= limit:
                continue
            before, after = step.mean_before, step.mean_after
            found.append(Regression(s.variant, s.shape, s.dtype, s.device, step.commit_before, step.commit_after,
                                    change=before / after - 1.0, rate_before=work / before, rate_after=work / after,
                                    p_value=step.p_value))
    found += memory_regressions(series, memory_threshold)
    n_keys = sum(1 for _, _, key in planned if key)
    return Detection(found, len(planned), len(planned) - n_keys, n_keys - len(missing), len(missing))


def memory_regressions(series: Sequence[Series],
                       threshold: MemoryThreshold = memory_threshold_default) -> list[Regression]:
    """The peak memory growth steps of every series (`pipeline.history.memory.steps`), as
    Regressions with metric "memory" (bytes on either side, p-value 0: the figure is deterministic)."""
    found = []
    for s in series:
        points = [(p.sha, p.peak_mem_bytes) for p in s.memory]
        for step in memory_steps.find(points, threshold):
            found.append(Regression(s.variant, s.shape, s.dtype, s.device, step.good_sha, step.bad_sha,
                                    change=step.change, rate_before=float(step.before), rate_after=float(step.after),
                                    p_value=0.0, metric=MEMORY))
    return found


def find_regressions(series: Sequence[Series], threshold: float | None = 0.05, seed: int = 0) -> list[Regression]:
    """`detect_regressions` without a cache, searched here: the regressions only."""
    return detect_regressions(series, threshold, seed).regressions


def feed(regressions: Sequence[Regression], commits: dict[str, dict], generated_at: str) -> dict:
    """The JSON feed of regressions (newest detection first) with each end's subject."""
    items = []
    for r in sorted(regressions, key=lambda r: -r.id):
        d = r.to_dict()
        for end in ("good_sha", "bad_sha", "culprit_sha"):
            if d.get(end):
                d[end.replace("_sha", "_subject")] = (commits.get(d[end]) or {}).get("subject", "")
        items.append(d)
    return {"generated_at": generated_at, "count": len(items), "regressions": items}


@dataclass(frozen=True)
class CommitCount:
    """A commit's newest result per series: how many, how many failing, and the newest row id."""

    n_results: int
    n_failing: int
    last_id: int


@dataclass(frozen=True)
class History:
    """One pass over the results table: the series along the line (`load`), each series' op and
    whether it is the peer, and per commit with results (on the line or not, dirty runs
    included) its `CommitCount`."""

    series: list[Series]
    ops: dict[tuple, tuple[str, bool]]
    commits: dict[str, CommitCount]


def scan(store, order: Sequence[str] | None = None, details: bool = True, cache=None) -> History:
    """Every series in `store`, along `order` (SHAs oldest first; default: by author date).

    Without `cache`, read one series at a time (`Store.scan_results`), so a fleet's years of
    results never sit in memory as rows; details=False leaves out resources and counters (None on
    every point): detection reads only the times. With `cache` (`points_cache.PointsCache`), only
    the rows stored since the cache was last brought up to date are read; the points of every
    other commit come from the cache (details always included)."""
    stored = {c["sha"]: c for c in (store.commit(x["sha"]) or {"sha": x["sha"]} for x in store.commits_with_results())}
    shas = [s for s in order if s in stored] if order is not None else date_order(list(stored.values()))
    line = [_commit_fields(stored[s]) for s in shas]
    position = {sha: i for i, sha in enumerate(shas)}

    def pooled(ids):
        return [x for r in store.results_by_id(ids, ("samples",)) for x in r["samples"]]

    identity = _identity(store)
    if cache is not None:
        covered = cache.covered()
        if covered and covered[0] == identity and store.results_extent(covered[1]) == (covered[2], covered[1]):
            return _from_cache(store, cache, covered[1], line, position, pooled)
        cache.clear()
        cache.begin()
    sample_counts = {row_id: n for sha in shas[-COUNTED_COMMITS:] for row_id, n in store.sample_counts(sha).items()}
    columns = SERIES_COLUMNS if details or cache is not None else TIMING_COLUMNS
    out, ops, counts, last_id = [], {}, {}, 0
    for key, group in itertools.groupby(store.scan_results(columns), key=_SAME_SERIES):
        rows = list(group)
        last_id = max(last_id, rows[-1][_ID])
        ops[key] = (rows[-1][_OP] or "", bool(rows[-1][_PEER]))
        newest = {r[_SHA]: r for r in rows}
        for sha, r in newest.items():
            n, failing, last = counts.get(sha, (0, 0, 0))
            counts[sha] = (n + 1, failing + (r[_STATUS] in status.FAILURES), max(last, r[_ID]))
        if cache is not None:
            fields = _cached_fields(rows, pooled, sample_counts)
            unit = _to_cache(cache, key, rows, fields)
            built = _series_from_fields(key, unit, fields, line, position)
        else:
            built = _series(rows, line, position, details, pooled, sample_counts)
        if built is not None:
            out.append(built)
    if cache is not None:
        cache.set_covered(identity, last_id, store.results_extent(last_id)[0])
        cache.commit()
    return History(out, ops, {sha: CommitCount(*c) for sha, c in counts.items()})


_SAME_SERIES = operator.itemgetter(_VARIANT, _SHAPE, _DTYPE, _DEVICE)


def _identity(store) -> str:
    """Which store a points cache was built from: its file, or its URL without a password."""
    where = getattr(store, "location", None)
    return where.shown if where is not None else str(getattr(store, "path", ""))


def _cached_fields(rows: list[tuple], pooled: Callable, sample_counts: dict) -> list[tuple[str, tuple]]:
    """(sha, point fields from `status` on) of every commit of one series' rows (any commit,
    on the line or not: the line is applied when the history is built)."""
    by_commit: dict[str, list[tuple]] = {}
    for r in rows:
        if r[_SHAPE] and not r[_DIRTY]:
            by_commit.setdefault(r[_SHA], []).append(r)
    resources_cache: dict = {}
    return [(sha, tuple(_point(("", "", "", ""), group, True, resources_cache, pooled, sample_counts))[4:])
            for sha, group in by_commit.items()]


def _to_cache(cache, key: tuple, rows: list[tuple], fields: list[tuple[str, tuple]]) -> str:
    """Store one series' points and newest rows per commit; returns its unit."""
    unit = "FLOP/s" if rows[0][_FLOPS] else "B/s"
    series_id = cache.series_id(key, unit, rows[-1][_OP] or "", bool(rows[-1][_PEER]))
    cache.put_points(series_id, fields)
    cache.put_newest(series_id, [(r[_SHA], r[_ID], r[_STATUS]) for r in {r[_SHA]: r for r in rows}.values()])
    return unit


def _series_from_fields(key: tuple, unit: str, fields, line: Sequence[tuple], position: dict[str, int],
                        resources: dict[int, dict] | None = None) -> Series | None:
    """A series along `line` from its (sha, fields) points (fields: `Point`'s from `status` on;
    with `resources`, the resources field is an interned id into it); None when none is on the
    line."""
    mine = sorted(((position[sha], f) for sha, f in fields if sha in position), key=operator.itemgetter(0))
    if not mine:
        return None
    if resources is None:
        return Series(*key, unit, tuple(Point(*line[i], *f) for i, f in mine))
    return Series(*key, unit, tuple(Point(*line[i], f[0], f[1], f[2], f[3], f[4], f[5], resources.get(f[6]), f[7], f[8],
                                          f[9]) for i, f in mine))


def _from_cache(store, cache, after_id: int, line: Sequence[tuple], position: dict[str, int],
                pooled: Callable) -> History:
    """Bring `cache` up to date with the rows stored after `after_id`, then build the history
    from it. A commit that got new rows has its point recomputed from all its rows (a re-run
    pools its samples with the earlier ones)."""
    sample_counts = {row_id: _count(samples) for row_id, samples in store.scan_results(("id", "samples"), after_id)}
    if sample_counts:
        ids = {key: sid for sid, key, *_ in cache.series()}
        cache.begin()
        for key, group in itertools.groupby(store.scan_results(SERIES_COLUMNS, after_id), key=_SAME_SERIES):
            rows = list(group)
            known = cache.keys_at(ids[key]) & {r[_SHA] for r in rows} if key in ids else set()
            if known:  # earlier rows of these commits take part in their points
                wanted = tuple(c for c in SERIES_COLUMNS if c != "has_samples") + ("samples",)
                earlier = [_as_row(r) for sha in sorted(known)
                           for r in store.results(wanted, commit_sha=sha, **dict(zip(_KEY_COLUMNS, key)))
                           if r["id"] <= after_id]
                rows = sorted(earlier + rows, key=operator.itemgetter(_ID))
            _to_cache(cache, key, rows, _cached_fields(rows, pooled, sample_counts))
        last_id = max(sample_counts)
        cache.set_covered(_identity(store), last_id, store.results_extent(last_id)[0])
        cache.commit()
    resources, described = cache.resources(), {sid: rest for sid, *rest in cache.series()}
    ops = {key: (op, peer) for key, _, op, peer in described.values()}
    built = {}
    for series_id, fields in cache.points():
        key, unit, _, _ = described[series_id]
        one = _series_from_fields(key, unit, fields, line, position, resources)
        if one is not None:
            built[key] = one
    out = [built[key] for key in sorted(built)]
    counts = cache.commit_counts(status.FAILURES)
    return History(out, ops, {sha: CommitCount(*c) for sha, c in counts.items()})


_KEY_COLUMNS = ("variant", "shape", "dtype", "device")


def _count(samples: str | None) -> int:
    """How many numbers a JSON list of samples holds, without decoding it."""
    return 0 if not samples or samples == "[]" else samples.count(",") + 1


def _as_row(r: dict) -> tuple:
    """A `Store.results` dict as a `SERIES_COLUMNS` tuple."""
    return tuple(int(bool(r.get("samples"))) if c == "has_samples" else r.get(c) for c in SERIES_COLUMNS)


def load(store, order: Sequence[str] | None = None, details: bool = True) -> list[Series]:
    """The series of `scan`."""
    return scan(store, order, details).series
