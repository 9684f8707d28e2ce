"""History pages of the site: the dashboard (index), one trend page per series, the
regressions page and JSON feed, the shared commit table, and the compare and bisect pages.

Everything here renders records it is handed (series and points, dashboard records, stored
regressions, compare and bisect reports) and reads no database: the commands of `pipeline`
decide what the records say. Templates autoescape every string; figures go through
`reports.figures`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

from reports import figures, metric_names
from reports.templates_env import render

# Rows of a trend page's table; the chart's hover covers the whole history.
TREND_TABLE_ROWS = 30


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def trend_page_name(s) -> str:
    return f"trend-{s.slug}.html"


def compare_page_name(base: str, head: str) -> str:
    return f"compare-{base[:12]}-{head[:12]}.html"


def bisect_page_name(variant: str, bad: str) -> str:
    return f"bisect-{_safe(variant)}-{bad[:12]}.html"


def write_commit_table(site: Path, line: Sequence[dict]) -> Path:
    """`assets/commits.js`, the commit table every trend figure's hover and x axis read."""
    path = site / "assets" / "commits.js"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(figures.commit_table_js(line))
    return path


def write_feed(site: Path, feed: dict) -> Path:
    """regressions.json, as `pipeline.history.feed` built it."""
    site.mkdir(parents=True, exist_ok=True)
    path = site / "regressions.json"
    path.write_text(json.dumps(feed, indent=1, default=str))
    return path


def _marks(regressions: Sequence, key: tuple) -> tuple[list[dict], list[dict]]:
    steps, culprits = [], []
    for r in regressions:
        if (r.variant, r.shape, r.dtype, r.device) != key:
            continue
        steps.append({"sha": r.bad_sha, "label": f"{r.label} at {r.bad_sha[:8]}"})
        if r.culprit_sha:
            culprits.append({"sha": r.culprit_sha, "label": f"culprit {r.culprit_sha[:8]}"})
    return steps, culprits


def write_trend_page(site: Path, s, position: dict[str, int], regressions: Sequence, commit_pages: set[str]) -> Path:
    """One series' trend page: the figure, its detected steps, and its newest commits."""
    steps, culprits = _marks(regressions, s.key)
    plot, panels = None, []
    measured = [p for p in s.measured if p.sha in position]
    if measured:
        vendor = metric_names.vendor_of(s.device)
        fig, panels = figures.trend_figure(measured, position, s.unit, vendor, steps, culprits)
        plot = figures.embed(fig, "trend", height=int(fig["layout"]["height"]), commits=True)
    mine = [r for r in regressions if (r.variant, r.shape, r.dtype, r.device) == s.key]
    return render(site / trend_page_name(s), "trend.html.j2", s=s, plot=plot, regressions=mine,
                  points=list(reversed(s.points))[:TREND_TABLE_ROWS], total=len(s.points),
                  commit_pages=commit_pages, bisect_page=_bisect_link(site), uses_commits=True, panels=panels)


def _bisect_link(site: Path):
    """The bisect page of a regression when one was written, else None. `nightly` bisects a
    range once, on its worst series (`bisected_on`), for every series that stepped there."""
    def link(r) -> str | None:
        if not r.culprit_sha:
            return None
        on = (r.bisect or {}).get("bisected_on") or {}
        name = bisect_page_name(on.get("variant") or r.variant, r.bad_sha)
        return name if (site / name).exists() else None
    return link


def write_pages(site: Path, inp) -> None:
    """Dashboard (index.html), trend pages, regressions page, feed and commit table of a
    `reports.site.SiteInput`."""
    position = {c["sha"]: i for i, c in enumerate(inp.line)}
    write_commit_table(site, inp.line)
    commit_pages = {c.commit["sha"] for c in inp.commits if c.rows is not None}
    for s in inp.series:
        write_trend_page(site, s, position, inp.regressions, commit_pages)
    write_feed(site, inp.feed)
    trend = {s.key: trend_page_name(s) for s in inp.series}
    # Pages without a figure do not load plotly.js (4.6 MB to parse before the page shows).
    render(site / "regressions.html", "regressions.html.j2", regressions=inp.regressions, plots=False,
           bisect_page=_bisect_link(site), trend_page=lambda r: trend.get((r.variant, r.shape, r.dtype, r.device)))
    latest = inp.commits[0] if inp.commits else None
    others = []
    for kind in ("compare", "bisect"):
        for page in sorted(site.glob(f"{kind}-*.html"), key=lambda p: -p.stat().st_mtime)[:10]:
            others.append((f"{kind} {page.stem[len(kind) + 1:]}", page.name))
    render(site / "index.html", "dashboard.html.j2", d=inp.dashboard, latest=latest, page=trend_page_name, plots=False,
           spark=figures.sparkline, bisect_page=_bisect_link(site), commit_pages=commit_pages,
           n_regressions=len(inp.regressions), others=others, n_commits=len(inp.commits))


def write_compare_page(site: Path, report) -> Path:
    """The compare page of a compare report (`pipeline.history.compare.Report`)."""
    site.mkdir(parents=True, exist_ok=True)
    return render(site / compare_page_name(report.base_sha, report.head_sha), "compare.html.j2", r=report,
                  vendor=lambda device: metric_names.vendor_of(device))


def write_bisect_page(site: Path, report, bound: int) -> Path:
    """The bisect page of a bisect report (`pipeline.history.bisect.Report`), with the probe times as a
    plot; bound is the evaluation bound the search promises (⌈log2 N⌉ + 2)."""
    site.mkdir(parents=True, exist_ok=True)
    subjects = dict(report.commits)
    order = [sha for sha, _ in report.commits]
    probes = sorted(report.outcome.probes, key=lambda p: order.index(p.sha) if p.sha in order else -1)
    timed = [p for p in probes if p.median_s]
    plot = None
    if timed:
        fig = {"data": [{
            "type": "scatter", "x": [p.sha[:8] for p in timed], "y": [figures._r(p.median_s * 1e3) for p in timed],
            "mode": "markers",
            "marker": {"size": 11, "color": ["#b3261e" if p.verdict == "bad" else "#137333" for p in timed]},
            "customdata": [[subjects.get(p.sha, ""), p.verdict] for p in timed],
            "hovertemplate": "%{x} %{customdata[0]}<br>%{y:.4g} ms: %{customdata[1]}<extra></extra>"}],
            "layout": {"xaxis": {"type": "category", "title": {"text": "probe (first-parent order)"}},
                       "yaxis": {"title": {"text": "median run time (ms)"}, "tickformat": ".4~g"},
                       "margin": {"t": 20, "l": 60, "r": 20, "b": 50}}}
        plot = figures.embed(fig, "probes", height=320)
    page = bisect_page_name(report.variant, report.commits[-1][0])
    return render(site / page, "bisect.html.j2", r=report, o=report.outcome, probes=probes, subjects=subjects,
                  plot=plot, bound=bound,
                  moved=[dataclasses.asdict(m) for m in (report.culprit.moved if report.culprit else ())])

