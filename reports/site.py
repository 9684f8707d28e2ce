"""The static report site: the dashboard (index), commit pages, history pages, shipped plotly.js.

`write_site` renders a `SiteInput` that the driver's commands build from the store
(`pipeline.commands.publish`); nothing here opens a database. Every string from users (commit
subjects, authors, variant names, compiler output) goes through jinja2's autoescaping;
figures are embedded as escaped JSON (`reports.figures`).

Size: one `plotly.min.js` and one commit table for the whole site; a commit page only for
the commits a reader is sent to (the newest ones, the ends and culprits of regressions), so
the site grows with the number of series, not with series × commits.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import plotly

from reports import axes, figures, history_pages, roofline, sizes
from reports.format import anchor
from reports.templates_env import render
from workers.core import status

_ASSETS = Path(__file__).parent / "assets"


@dataclass(frozen=True)
class CommitView:
    """One commit of the index's commit list. rows (result dicts with `rate` and
    `pct_of_peer`, in table order) is set when the commit gets its own page."""

    commit: dict
    n_results: int
    n_failing: int
    rows: list[dict] | None = None
    # the commit's latest run summary (`runs.summary`): device busy rows and the peer check
    run_summary: dict | None = None


@dataclass(frozen=True)
class SiteInput:
    """What the site shows. commits: newest first; line: commit dicts along the first-parent
    line, oldest first (the trend pages' x axis); series: history series; dashboard: the
    dashboard records; regressions: stored regressions, newest first; feed: the JSON feed."""

    commits: Sequence[CommitView]
    line: Sequence[dict]
    series: Sequence
    dashboard: object
    regressions: Sequence
    feed: dict


def commit_page_name(sha: str) -> str:
    return f"commit-{sha[:12]}.html"


def write_assets(site: Path) -> None:
    assets = site / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    target = assets / "plotly.min.js"
    if not target.exists() or target.stat().st_size != js.stat().st_size:
        shutil.copy2(js, target)
    shutil.copy2(_ASSETS / "flopwatch.js", assets / "flopwatch.js")


def write_site(site: Path, inp: SiteInput) -> Path:
    """(Re)write the whole site; returns the index path."""
    site.mkdir(parents=True, exist_ok=True)
    write_assets(site)
    for stale in site.glob("commit-*.html"):
        stale.unlink()  # pages of commits no longer in the window go: the site stays bounded
    trend = {s.key: history_pages.trend_page_name(s) for s in inp.series}
    for c in inp.commits:
        if c.rows is not None:
            write_commit_page(site, c.commit, c.rows, c.run_summary, trend_page=lambda *key: trend.get(key))
    history_pages.write_pages(site, inp)
    render(site / "commits.html", "commits.html.j2", commits=inp.commits, page=commit_page_name, plots=False)
    return site / "index.html"


def write_commit_page(site: Path, commit: dict, rows: list[dict], run_summary: dict | None = None,
                      trend_page=None) -> Path:
    """One commit's page. trend_page(variant, shape, dtype, device) names a series' trend page,
    or None where it has none (the axes view links each point to its own)."""
    summary = run_summary or {}
    roofs = [(r, figures.embed(roofline.figure(r), f"roof{i}", height=460)) for i, r in enumerate(roofline.rooflines(rows))]
    return render(site / commit_page_name(commit["sha"]), "commit.html.j2", commit=commit, rows=rows,
                  failures=_failure_panels(rows), failing=status.FAILURES, devices=summary.get("devices", []),
                  peer_flags=(summary.get("peer_check") or {}).get("flagged", []),
                  peer_tolerance_pct=(summary.get("peer_check") or {}).get("tolerance_pct"), rooflines=roofs,
                  axes_tables=axes.tables(rows), size_tables=sizes.tables(rows), heat=axes.heat_colour,
                  trend_page=trend_page or (lambda *key: None))


def _failure_panels(rows: list[dict]) -> list[dict]:
    panels = []
    for i, r in enumerate(rows):
        if r["status"] not in status.FAILURES:
            continue
        tile_map = (r.get("correctness") or {}).get("tile_map")
        plot = None
        if tile_map and r["status"] == status.INCORRECT:
            fig = figures.tile_heatmap(tile_map, r["correctness"].get("tile", 64),
                                       f"{r['variant']} {r['shape']} {r['dtype']}: max abs error per tile")
            plot = figures.embed(fig, f"heat{i}")
        panels.append({"row": r, "plot": plot,
                       "anchor": anchor(r["variant"], r["shape"], r["dtype"], r["device"])})
    return panels
