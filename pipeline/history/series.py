"""Decides which series regressed, from the stored `Result` rows of every commit: builds the
per-commit history of each series (variant × shape × dtype × device) and finds its slowdown steps.

A series is ordered along the first-parent line of a branch (the order in which changes
landed on it), oldest first. One point per commit pools the samples of every ok result
stored for that commit, so re-runs sharpen a point instead of replacing it; its noise band
is the confidence interval of that pooled median (`workers.stats.median_ci`).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pipeline import config
from pipeline.history import changepoint
from pipeline.history.compare import flatten_numeric, series_key
from pipeline.history.regressions import Regression
from workers import status
from workers.stats import median_ci


@dataclass(frozen=True)
class Point:
    """One commit of one series. rate is work/s at the pooled median (None when no ok
    sample exists); rate_lo/rate_hi come from the median's CI (throughput is 1/time, so
    the time CI's ends swap); status is that of the newest result at this commit."""

    sha: str
    subject: str
    author: str
    authored_at: str
    status: str
    median_s: float | None = None
    rate: float | None = None
    rate_lo: float | None = None
    rate_hi: float | None = None
    n_samples: int = 0
    resources: dict | None = None
    counters: dict | None = None
    diagnostic: str = ""


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
        return [p for p in self.points if p.rate is not None and p.status == status.OK]


def first_parent_shas(repo, branch: str = "HEAD") -> list[str]:
    """SHAs along the first-parent line ending at `branch`, oldest first."""
    return [c.hexsha for c in repo.iter_commits(branch, first_parent=True)][::-1]


def date_order(commits: Sequence[dict]) -> list[str]:
    """Fallback order without a repository: by author date, then by SHA."""
    return [c["sha"] for c in sorted(commits, key=lambda c: (c.get("authored_at") or "", c["sha"]))]


def _point(commit: dict, rows: list[dict]) -> Point:
    ok = [r for r in rows if r["status"] == status.OK and r.get("samples")]
    meta = {"sha": commit["sha"], "subject": commit.get("subject") or "", "author": commit.get("author") or "",
            "authored_at": commit.get("authored_at") or "", "status": rows[-1]["status"],
            "diagnostic": (rows[-1].get("diagnostic") or "")[:500] if rows[-1]["status"] != status.OK else ""}
    if not ok:
        return Point(**meta)
    samples = [s for r in ok for s in r["samples"]]
    median = float(statistics.median(samples))  # 10x numpy's on a few dozen floats
    lo, hi = median_ci(samples)
    work = ok[-1].get("flops") or ok[-1].get("bytes_moved") or 0.0
    if not work or median <= 0:
        return Point(**meta, median_s=median, n_samples=len(samples))
    return Point(**meta, median_s=median, rate=work / median, rate_lo=work / hi if hi else None,
                 rate_hi=work / lo if lo else None, n_samples=len(samples),
                 resources=flatten_numeric(ok[-1]["resources"] or {}) if "resources" in ok[-1] else None,
                 counters=flatten_numeric(ok[-1]["counters"] or {}) if "counters" in ok[-1] else None)


def build_series(rows: Sequence[dict], commits: Sequence[dict]) -> list[Series]:
    """Series from store rows, in the order of `commits` (dicts with sha, subject, author,
    authored_at; oldest first). Rows of commits not listed (other branches) are left out,
    as are rows without a shape (invalid manifests have no series)."""
    position = {c["sha"]: i for i, c in enumerate(commits)}
    grouped: dict[tuple, dict[str, list[dict]]] = {}
    for r in rows:
        if r["commit_sha"] in position and r["shape"] and not r.get("dirty"):
            grouped.setdefault(series_key(r), {}).setdefault(r["commit_sha"], []).append(r)
    out = []
    for key, by_commit in sorted(grouped.items()):
        shas = sorted(by_commit, key=position.__getitem__)
        points = tuple(_point(commits[position[s]], by_commit[s]) for s in shas)
        sample_row = next(iter(by_commit.values()))[-1]
        unit = "FLOP/s" if sample_row.get("flops") else "B/s"
        out.append(Series(*key, unit, points))
    return out


def find_regressions(series: Sequence[Series], threshold: float | None = 0.05, seed: int = 0,
                     steps_of: Callable | None = None) -> list[Regression]:
    """Slowdown steps of every series (E-Divisive means, `pipeline.history.changepoint.detect_steps`
    on the per-commit median run times): a step whose later segment is slower by more than
    `threshold` becomes a Regression from the last measured commit before it to the first
    after it. Speed-ups are not regressions and are left out. threshold None: each series
    uses the history default of its device kind (`pipeline.config.default_threshold`).

    steps_of(inputs, seed) maps [(times, shas, threshold)] per series to their steps as dicts;
    the default runs `changepoint.detect_batch` here, `detect_cluster.detect_batches` spreads
    the series over the cluster."""
    todo = [s for s in series if len(s.measured) >= 6]  # two segments of min_size 3 need 6 points
    limits = [threshold if threshold is not None else config.default_threshold(s.device, "history") for s in todo]
    inputs = [([p.median_s for p in s.measured], [p.sha for p in s.measured], limit)
              for s, limit in zip(todo, limits)]
    found = []
    for s, limit, steps in zip(todo, limits, (steps_of or changepoint.detect_batch)(inputs, seed)):
        points = s.measured
        for step in steps:
            if step["change"] <= limit:
                continue
            work = points[0].rate * points[0].median_s
            before, after = step["mean_before"], step["mean_after"]
            found.append(Regression(s.variant, s.shape, s.dtype, s.device, step["commit_before"],
                                    step["commit_after"], change=before / after - 1.0, rate_before=work / before,
                                    rate_after=work / after, p_value=step["p_value"]))
    return found


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


# The result columns a series needs (correctness, timing and device details stay in the store);
# change detection needs only the samples, the pages also the resources and counters.
TIMING_COLUMNS = ("id", "commit_sha", "dirty", "variant", "op", "shape", "dtype", "device", "status", "peer",
                  "median_s", "flops", "bytes_moved", "diagnostic", "samples")
SERIES_COLUMNS = (*TIMING_COLUMNS, "counters", "resources")


def load(store, order: Sequence[str] | None = None, details: bool = True) -> list[Series]:
    """Every series in `store`, along `order` (SHAs oldest first; default: by author date).
    details=False leaves out resources and counters (None on every point): detection reads
    only the times, and a year of them loads several times faster."""
    stored = {c["sha"]: c for c in (store.commit(x["sha"]) or {"sha": x["sha"]} for x in store.commits_with_results())}
    shas = [s for s in order if s in stored] if order is not None else date_order(list(stored.values()))
    rows = store.results(columns=SERIES_COLUMNS if details else TIMING_COLUMNS)
    return build_series(rows, [stored[s] for s in shas])
