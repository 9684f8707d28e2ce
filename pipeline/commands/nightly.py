"""flopwatch nightly: measure the branch head, detect regressions, bisect the new ones, publish."""

from __future__ import annotations

import json
import os
import sys

from pipeline import checkout, cluster
from pipeline.commands import common
from pipeline.commands.bisect import bisect_series
from pipeline.commands.common import (UsageError, add_measure_options, cache_dir, open_session, run_options,
                                      site_path, store_location, workdir)
from pipeline.commands.detect import detect
from pipeline.history import series
from pipeline.history.regressions import RegressionStore
from pipeline.runflow import run_commit
from pipeline.store import location
from pipeline.summary import exit_code
from workers import untrusted

HELP = "nightly: run the branch head, detect change points, bisect new regressions, regenerate the site"


def add_arguments(p) -> None:
    p.add_argument("--branch", default="HEAD", help="branch to measure (default: the current HEAD)")
    p.add_argument("--threshold", help=common.threshold_help("history", "smallest step that counts, for every series"))
    p.add_argument("--max-bisects", type=int, default=2, help="bisect at most this many new regressions")
    p.add_argument("--max-evals", type=int, help="commit evaluations per bisection (default: unbounded)")
    add_measure_options(p, "nightly")


def main(args) -> int:
    threshold = common.threshold(args.threshold)
    repo, work = workdir(args)
    _check_history_lasts(args, work)
    head = checkout.commit_info(repo, args.branch)
    order = series.first_parent_shas(repo, head.sha)
    session = open_session(args, work)
    try:
        outcome = run_commit(session, repo, head.sha, run_options(args, "nightly"))
        print(f"measured {head.short} {untrusted.one_line(head.subject)}: {len(outcome.results)} result(s)")
        recorded = detect(session.store, order, threshold)
        new = sorted((r for r, is_new in recorded if is_new and not r.culprit_sha), key=lambda r: r.change)
        print(f"{len(recorded)} regression(s) in history, {len(new)} new")
        probe = run_options(args, "bisect")
        table = RegressionStore(session.store)
        for r in new[: args.max_bisects]:
            _bisect_one(session, repo, r, threshold, probe, args.max_evals, table, site_path(args, work))
        for r in new[args.max_bisects:]:
            print(untrusted.one_line(f"not bisected (over --max-bisects): {r.variant} {r.shape} "
                                     f"{r.good_sha[:10]}..{r.bad_sha[:10]}"))
    finally:
        cluster.shutdown(session.cluster_info)
    from pipeline.commands import publish

    index = publish.write_site(session.store, site_path(args, work), order=order)
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


def _bisect_one(session, repo, r, threshold, options, max_evals, table, site) -> None:
    """Name the culprit of one regression: adjacent ends need no search; otherwise bisect."""
    from pipeline.history.bisect import bound, render_text
    from reports.history_pages import write_bisect_page

    between = checkout.first_parent_range(repo, r.good_sha, r.bad_sha)
    if len(between) == 1:
        table.set_culprit(r.id, r.bad_sha, {"message": "adjacent commits: the bad end is the culprit",
                                            "evaluations": 0})
        print(untrusted.one_line(f"{r.variant} {r.shape}: culprit {r.bad_sha[:10]} (adjacent commits)"))
        return
    report = bisect_series(session, repo, r.good_sha, r.bad_sha, r.variant, r.shape, threshold, options, max_evals)
    write_bisect_page(site, report, bound(len(report.commits) - 1))
    o = report.outcome
    table.set_culprit(r.id, o.first_bad, {"message": o.message, "evaluations": o.evaluations,
                                          "candidates": list(o.candidates), "skipped": list(o.skipped)})
    print(untrusted.terminal(render_text(report)))
