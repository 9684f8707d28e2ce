"""flopwatch nightly: measure the branch head, detect regressions, bisect the new ones, publish."""

from __future__ import annotations

import json
import os
import sys

from pipeline.commands import common, publish
from pipeline.commands.bisect import bisect_series
from pipeline.commands.common import (
    UsageError,
    add_measure_options,
    cache_dir,
    open_session,
    run_options,
    site_path,
    store_location,
    workdir,
)
from pipeline.commands.detect import detect, same_build_line, window_cache_path
from pipeline.history import causes, series
from pipeline.history.caches.points_cache import PointsCache
from pipeline.history.caches.window_cache import WindowCache
from pipeline.history.regressions import RegressionStore
from pipeline.project import checkout
from pipeline.run.runflow import run_commit
from pipeline.run.summary import exit_code
from pipeline.store import location
from workers.core import untrusted

HELP = "nightly: run the branch head, detect change points, bisect new regressions, regenerate the site"


def add_arguments(p) -> None:
    p.add_argument("--branch", default="HEAD", help="branch to measure (default: the current HEAD)")
    p.add_argument("--threshold", help=common.threshold_help("history", "smallest step that counts, for every series"))
    p.add_argument("--max-bisects", type=int, default=2,
                   help="bisect at most this many commit ranges a night: one search per range serves every "
                        "series that stepped in it; a range of one commit needs none (default 2)")
    p.add_argument("--max-evals", type=int, help="commit evaluations per bisection (default: unbounded)")
    common.add_memory_threshold_option(p)
    add_measure_options(p, "nightly")


def main(args) -> int:
    threshold = common.threshold(args.threshold)
    memory_threshold = common.memory_threshold(args.memory_threshold)
    repo, work = workdir(args)
    _check_history_lasts(args, work)
    head = checkout.commit_info(repo, args.branch)
    order = series.first_parent_shas(repo, head.sha)
    session = open_session(args, work)
    try:
        outcome = run_commit(session, repo, head.sha, run_options(args, "nightly"))
        print(f"measured {head.short} {untrusted.one_line(head.subject)}: {len(outcome.results)} result(s)")
        caches = cache_dir(args, work)
        with WindowCache(window_cache_path(caches)) as cache, PointsCache(publish.points_cache_path(caches)) as points:
            detected = detect(session.store, order, threshold, cache=cache, details=True, points=points,
                              memory_threshold=memory_threshold)
        recorded = detected.recorded
        new = [r for r, is_new in recorded if is_new]
        # Every range without a culprit and never bisected: tonight's, and those an earlier
        # night left over --max-bisects.
        plan = causes.bisection_plan([r for r, _ in recorded if not r.culprit_sha and r.bisect is None])
        print(f"{len(recorded)} regression(s) in history, {len(new)} new; {len(plan)} commit range(s) to resolve")
        if detected.same_build:
            print(same_build_line(detected.same_build))
        probe = run_options(args, "bisect")
        table = RegressionStore(session.store)
        searches = 0
        for item in plan:
            if len(checkout.first_parent_range(repo, item.good_sha, item.bad_sha)) == 1:
                _record_culprit(table, item, item.bad_sha, {"message": "adjacent commits: the bad end is the culprit",
                                                            "evaluations": 0})
                print(untrusted.one_line(f"{item.bad_sha[:10]}: culprit of {len(item.ids)} series (adjacent commits)"))
            elif searches < args.max_bisects:
                searches += 1
                _bisect_range(session, repo, item, threshold, probe, args.max_evals, table, site_path(args, work),
                              memory_threshold)
            else:
                print(untrusted.one_line(f"not bisected (over --max-bisects): {item.good_sha[:10]}.."
                                         f"{item.bad_sha[:10]} ({len(item.ids)} series, worst {item.variant} "
                                         f"{item.shape})"))
    finally:
        session.shutdown()
    # Bisect probes store results: then the site reads their rows too; otherwise detect's pass serves.
    with PointsCache(publish.points_cache_path(cache_dir(args, work))) as points:
        index = publish.write_site(session.store, site_path(args, work), order=order,
                                   scanned=detected.scanned if searches == 0 else None, cache=points)
    session.store.close()
    failing = exit_code([r.to_dict() for r in outcome.results])
    if args.json:
        print(json.dumps({"commit": head.sha, "results": len(outcome.results), "failing": bool(failing),
                          "regressions": len(recorded), "new": [r.to_dict() for r in new], "report": str(index)},
                         default=str))
    else:
        print(f"report: {index}; {len(new)} new regression(s); head {'has failing variants' if failing else 'ok'}")
    # 0 even with regressions: the workflow publishes the site in the next step, and the site
    # and regressions.json are where the news goes. 2 stays for usage errors.
    return 0


def _check_history_lasts(args, work) -> None:
    """In a GitHub Actions job, a store inside the workspace (which actions/checkout cleans) or
    the runner's temp folder is gone by the next night: every nightly would start from an empty
    history and find nothing. Refuse it; a build cache there only costs rebuilds: warn."""
    where = store_location(args, work)
    wiped = where.path is not None and location.wiped_by_ci(where.path)
    if wiped:
        given = args.store or args.db or os.environ.get(location.STORE_ENV)
        which = "the store" if given else "no store is configured, and the default"
        raise UsageError(
            f"{which} {where.shown} is inside {wiped}, which is emptied before the next job, so every "
            f"nightly would start from an empty history. Set the repository secret FLOPWATCH_STORE to a store outside it "
            f"(sqlite:////srv/flopwatch/results.db on this runner, or postgresql://… for a runner pool); "
            f"see docs/store.md")
    cache = cache_dir(args, work)
    wiped = location.wiped_by_ci(cache)
    if wiped:
        print(f"flopwatch: warning: the build cache {cache} is inside {wiped}: every nightly rebuilds every "
              f"variant; set the repository variable FLOPWATCH_CACHE to a folder outside it", file=sys.stderr)


def _record_culprit(table, item, culprit_sha: str | None, bisect: dict) -> None:
    for regression_id in item.ids:
        table.set_culprit(regression_id, culprit_sha, bisect)


def _bisect_range(session, repo, item, threshold, options, max_evals, table, site, memory_threshold=None) -> None:
    """Bisect one commit range on the series that slowed most in it (or grew most in peak memory,
    for a memory step: by its memory), and record the culprit on every regression that stepped
    in that range."""
    from pipeline.history.bisect import bound, render_text
    from reports.history_pages import write_bisect_page

    report = bisect_series(session, repo, item.good_sha, item.bad_sha, item.variant, item.shape, threshold, options,
                           max_evals, metric=item.metric, memory_threshold=memory_threshold)
    write_bisect_page(site, report, bound(len(report.commits) - 1))
    o = report.outcome
    if o.first_bad:  # its subject and author for the pages, measured or not
        c = checkout.commit_info(repo, o.first_bad)
        session.store.record_commit(c.sha, c.subject, c.author, c.authored_at, list(c.parents))
    _record_culprit(table, item, o.first_bad, {
        "message": o.message, "evaluations": o.evaluations, "candidates": list(o.candidates),
        "skipped": list(o.skipped), "bisected_on": {"variant": item.variant, "shape": item.shape,
                                                    "metric": item.metric},
        "series_in_range": len(item.ids)})
    print(untrusted.terminal(render_text(report)))
    if len(item.ids) > 1:
        print(untrusted.one_line(f"the same culprit recorded for the {len(item.ids) - 1} other series that stepped "
                                 f"in {item.good_sha[:10]}..{item.bad_sha[:10]}"))
