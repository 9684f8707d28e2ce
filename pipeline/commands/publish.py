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
from pipeline.history.regressions import RegressionStore
from pipeline.run.summary import sort_rows, with_peer
from pipeline.store import Store
from reports import history_pages
from reports.site import CommitView, SiteInput
from reports.site import write_site as render_site

# Commit pages: the newest ones, as many as hold COMMIT_PAGE_ROWS results (a fleet's commit has a
# thousand: a page of it is a megabyte), at least one, at most COMMIT_PAGES; plus the culprit of
# every open regression, or the two ends of its range while no culprit is known.
COMMIT_PAGES = 30
COMMIT_PAGE_ROWS = 6000
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


def points_cache_path(cache_root: Path) -> Path:
    """Where the commands that publish keep the series' points between runs
    (`pipeline.history.caches.points_cache`): beside the builds in the cache root (`common.cache_dir`)."""
    return cache_root / "history" / "points.sqlite"


def site_input(store: Store, order: Sequence[str] | None = None, commit_pages: int = COMMIT_PAGES,
               last_n: int = LAST_N, scanned: history.History | None = None, cache=None) -> SiteInput:
    """Everything the site shows, read from `store` once (one pass over the results table,
    `history.scan`, through `cache` when given; a caller that has scanned already passes
    `scanned`). order is the first-parent line (SHAs, oldest first) that orders the history;
    default: author date."""
    scanned = scanned if scanned is not None else history.scan(store, order, cache=cache)
    stored = {sha: store.commit(sha) or {"sha": sha} for sha in scanned.commits}
    line_shas = [s for s in order if s in stored] if order is not None else history.date_order(list(stored.values()))
    line = [stored[s] for s in line_shas]
    regressions = sorted(RegressionStore(store).all(), key=lambda r: -r.id)
    # A culprit need not have been measured (a bisection skips a commit whose builds equal an end's).
    named = {sha: store.commit(sha) or {"sha": sha} for r in regressions
             for sha in (r.good_sha, r.bad_sha, r.culprit_sha) if sha and sha not in stored}
    # A range is counted in first-parent commits, measured or not: the whole line when known.
    board = dashboard.build(scanned.series, regressions, {**stored, **named},
                            order if order is not None else line_shas, scanned.ops, last_n)

    newest_first = sorted(scanned.commits, key=lambda sha: -scanned.commits[sha].last_id)
    wanted, rows_paged = set(), 0
    for sha in newest_first[:commit_pages]:
        rows_paged += scanned.commits[sha].n_results
        if wanted and rows_paged > COMMIT_PAGE_ROWS:
            break
        wanted.add(sha)
    for cause in board.causes:
        wanted |= {cause.culprit["sha"]} if cause.culprit else {cause.good["sha"], cause.bad["sha"]}
    views = []
    for sha in newest_first:
        count = scanned.commits[sha]
        page_rows = sort_rows(with_peer(store.latest_results(sha))) if sha in wanted else None
        views.append(CommitView(stored.get(sha) or {"sha": sha}, count.n_results, count.n_failing, page_rows,
                                store.run_summary(sha) if sha in wanted else None))
    return SiteInput(views, line, scanned.series, board, regressions, feed(store, regressions))


def prepare() -> None:
    """What a process's first report spends before it reads a row: the site's modules (imported
    with this one) and its templates, compiled. `run` calls it in a thread of its own while its
    jobs run, so that the report after them only reads the store and writes pages."""
    from reports.templates_env import ENV

    for name in ENV.list_templates():
        ENV.get_template(name)


def write_site(store: Store, site: Path, order: Sequence[str] | None = None,
               scanned: history.History | None = None, cache=None) -> Path:
    """(Re)write the site from the store; returns the index path."""
    return render_site(Path(site), site_input(store, order, scanned=scanned, cache=cache))


def write_site_input(store: Store, site: Path, order: Sequence[str] | None = None) -> SiteInput:
    """(Re)write the site from the store; returns what it shows (for a caller that also
    reports it elsewhere: `compare` puts the open regressions' causes into the PR comment)."""
    inp = site_input(store, order)
    render_site(Path(site), inp)
    return inp
