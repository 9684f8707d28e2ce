"""Publish: read the store, have history decide what the site says, and hand `reports` its records.

The commands (`run`, `report`, `compare`, `bisect`, `detect`, `nightly`) call `write_site`;
`reports` renders what it is given and never opens the database. Reading everything once
(one pass over the results table) is what keeps a year of history fast to publish.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

from pipeline.history import dashboard
from pipeline.history import series as history
from pipeline.history.compare import series_key
from pipeline.history.regressions import RegressionStore
from pipeline.store import Store
from pipeline.summary import sort_rows, with_peer
from reports import history_pages
from reports.site import CommitView, SiteInput
from reports.site import write_site as render_site
from workers import status

# Commit pages: the newest ones, plus every commit a regression names (its ends, its culprit).
COMMIT_PAGES = 30
# Points of a dashboard sparkline, and the window of the "vs median" colour.
LAST_N = 20


def feed(store: Store, regressions: Sequence | None = None) -> dict:
    """regressions.json: every stored regression, newest first (see `pipeline.history.series.feed`)."""
    regressions = RegressionStore(store).all() if regressions is None else regressions
    commits = {sha: store.commit(sha) or {} for r in regressions
               for sha in (r.good_sha, r.bad_sha, r.culprit_sha) if sha}
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return history.feed(regressions, commits, now)


def write_feed(store: Store, site: Path) -> Path:
    return history_pages.write_feed(site, feed(store))


def site_input(store: Store, order: Sequence[str] | None = None, commit_pages: int = COMMIT_PAGES,
               last_n: int = LAST_N) -> SiteInput:
    """Everything the site shows, read from `store` once. order is the first-parent line
    (SHAs, oldest first) that orders the history; default: author date."""
    rows = store.results(columns=history.SERIES_COLUMNS)
    stored = {c["sha"]: c for c in (store.commit(s) or {"sha": s} for s in dict.fromkeys(r["commit_sha"] for r in rows))}
    line_shas = [s for s in order if s in stored] if order is not None else history.date_order(list(stored.values()))
    line = [stored[s] for s in line_shas]
    series = history.build_series(rows, line)
    regressions = sorted(RegressionStore(store).all(), key=lambda r: -r.id)
    ops = {series_key(r): (r.get("op") or "", bool(r.get("peer"))) for r in rows}
    board = dashboard.build(series, regressions, stored, line_shas, ops, last_n)

    latest: dict[str, dict[tuple, dict]] = {}
    last_id: dict[str, int] = {}
    for r in rows:
        latest.setdefault(r["commit_sha"], {})[series_key(r)] = r
        last_id[r["commit_sha"]] = r["id"]
    newest_first = sorted(latest, key=lambda sha: -last_id[sha])
    wanted = set(newest_first[:commit_pages])
    wanted |= {sha for r in regressions for sha in (r.good_sha, r.bad_sha, r.culprit_sha) if sha}
    views = []
    for sha in newest_first:
        mine = list(latest[sha].values())
        failing = sum(r["status"] in status.FAILURES for r in mine)
        page_rows = sort_rows(with_peer(store.latest_results(sha))) if sha in wanted else None
        views.append(CommitView(stored.get(sha) or {"sha": sha}, len(mine), failing, page_rows,
                                store.run_summary(sha) if sha in wanted else None))
    return SiteInput(views, line, series, board, regressions, feed(store, regressions))


def write_site(store: Store, site: Path, order: Sequence[str] | None = None) -> Path:
    """(Re)write the site from the store; returns the index path."""
    return render_site(Path(site), site_input(store, order))


def write_site_input(store: Store, site: Path, order: Sequence[str] | None = None) -> SiteInput:
    """(Re)write the site from the store; returns what it shows (for a caller that also
    reports it elsewhere: `compare` puts the open regressions' causes into the PR comment)."""
    inp = site_input(store, order)
    render_site(Path(site), inp)
    return inp
