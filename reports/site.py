"""The static report site: index (latest commit), one page per commit, shipped plotly.js.

Every string from users (commit subjects, authors, variant names, compiler output) goes
through jinja2's autoescaping; figures are embedded as escaped JSON (`reports.figures`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import plotly
from jinja2 import Environment, PackageLoader, select_autoescape

from pipeline.store import Store
from pipeline.summary import format_rate, sort_rows, with_peer
from reports import figures, history_pages
from workers import status

_ENV = Environment(loader=PackageLoader("reports", "templates"), autoescape=select_autoescape(["html", "j2"]))
_ENV.filters["rate"] = format_rate
_ENV.filters["sci"] = lambda v: "" if v is None else (f"{v:.2e}" if isinstance(v, (int, float)) else str(v))
_ENV.filters["short"] = lambda sha: (sha or "")[:10]


def commit_page_name(sha: str) -> str:
    return f"commit-{sha[:12]}.html"


def write_site(store: Store, site: Path, extra_pages: dict | None = None, order: list[str] | None = None) -> Path:
    """(Re)write the whole site from the store; returns the index path. `order` is the
    first-parent line (SHAs, oldest first) that orders the history pages, when known."""
    site.mkdir(parents=True, exist_ok=True)
    assets = site / "assets"
    assets.mkdir(exist_ok=True)
    shutil.copy2(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", assets / "plotly.min.js")
    commits = store.commits_with_results()
    pages = []
    for c in commits:
        rows = sort_rows(with_peer(store.latest_results(c["sha"])))
        commit = store.commit(c["sha"]) or {"sha": c["sha"]}
        summary = store.run_summary(c["sha"])
        _render(site / commit_page_name(c["sha"]), "commit.html.j2", commit=commit, rows=rows,
                failures=_failure_panels(rows), failing=status.FAILURES,
                devices=summary.get("devices", []), peer_flags=(summary.get("peer_check") or {}).get("flagged", []))
        pages.append({"commit": commit, "rows": rows, "page": commit_page_name(c["sha"])})
    extra = {**history_pages.write_pages(store, site, order), **(extra_pages or {})}
    latest = pages[0] if pages else None
    index = site / "index.html"
    _render(index, "index.html.j2", latest=latest, commits=pages, failing=status.FAILURES,
            extra=extra)
    return index


def _render(path: Path, template: str, **ctx) -> None:
    path.write_text(_ENV.get_template(template).render(**ctx))


def _failure_panels(rows: list[dict]) -> list[dict]:
    panels = []
    for i, r in enumerate(rows):
        if r["status"] not in status.FAILURES:
            continue
        tile_map = r.get("correctness", {}).get("tile_map")
        plot = None
        if tile_map and r["status"] == status.INCORRECT:
            fig = figures.tile_heatmap(tile_map, r["correctness"].get("tile", 64),
                                       f"{r['variant']} {r['shape']} {r['dtype']}: max abs error per tile")
            plot = figures.embed(fig, f"heat{i}")
        panels.append({"row": r, "plot": plot})
    return panels
