"""flopwatch bisect --good REV --bad REV --variant NAME: find the commit that made it slower."""

from __future__ import annotations

import dataclasses
import json
import sys

from pipeline.commands import common
from pipeline.commands.common import add_measure_options, open_session, run_options, site_path, workdir
from pipeline.history import bisect as bis
from pipeline.history import compare as cmp
from pipeline.history import series
from pipeline.history.memory.threshold import DEFAULT as DEFAULT_MEMORY
from pipeline.history.memory.threshold import MemoryThreshold
from pipeline.project import checkout, config
from pipeline.run.runflow import RunOptions, Session, plan_commit, run_commit
from pipeline.run.summary import shape_label
from workers.core import status, untrusted
from workers.core.params import exactly, selects

HELP = "bisect first-parent history for the commit that slowed one variant down (or grew its peak memory)"
METRICS = ("time", "memory")


def add_arguments(p) -> None:
    p.add_argument("--good", required=True, help="a revision without the regression")
    p.add_argument("--bad", required=True, help="a later revision with it")
    p.add_argument("--shape", help="shape key or label (default: the first shape the variant's manifest lists)")
    p.add_argument("--threshold", help=common.threshold_help("history", "smallest slowdown that counts"))
    p.add_argument("--max-evals", type=int, help="stop after evaluating this many commits")
    p.add_argument("--max-repeats", type=int, default=3, help="measurements of one commit while unsure")
    p.add_argument("--metric", choices=METRICS, default="time",
                   help="what stepped: the run time (default), or the peak memory of the timed call (GPU results; "
                        "each commit measured once, a probe bad when it grew beyond --memory-threshold from the "
                        "good end)")
    common.add_memory_threshold_option(p)
    p.add_argument("--no-report", action="store_true", help="do not write the site")
    add_measure_options(p, "bisect")  # gives --variant (repeatable); bisect takes exactly one


def bisect_series(session: Session, repo, good: str, bad: str, variant: str, shape: str | None,
                  threshold: float | None, options: RunOptions, max_evals: int | None = None,
                  max_repeats: int = 3, metric: str = "time",
                  memory_threshold: MemoryThreshold | None = None) -> bis.Report:
    """Bisect one series with run_commit as the measurement; builds come from the cache.
    threshold None: the history default of the device kind the series is measured on, set by
    the first measurement (which comes before any comparison). metric "memory": the series'
    peak memory is what is searched (`bis.MemoryBisection`, judged by `memory_threshold`)."""
    commits = [checkout.commit_info(repo, good)] + checkout.first_parent_range(repo, good, bad)
    chosen = {"shape": shape}
    rows: dict[str, dict] = {}

    # The series' own pass only: a forward's plain name would select its backward and full too.
    only = (exactly(variant),)

    def evaluate(sha: str) -> bis.Measurement:
        opts = dataclasses.replace(options, only=only, with_peer=False,
                                   shapes=(chosen["shape"],) if chosen["shape"] else ())
        outcome = run_commit(session, repo, sha, opts)
        # A swept variant's point may be named with its axes in any order (`NAME[BK=32,TILE=64]`).
        names = sorted({r.variant for r in outcome.results if selects(only[0], r.variant)})
        if len(names) > 1:
            return bis.Measurement(sha, False, reason=f"{variant!r} selects {len(names)} points of a swept variant "
                                                      f"({', '.join(names[:3])}, ...): bisect one point, e.g. "
                                                      f"--variant '{names[0]}'")
        results = [r.to_dict() for r in outcome.results if r.variant in names]
        if not results:
            return bis.Measurement(sha, False, reason=f"no variant {variant!r} at this commit")
        if chosen["shape"] is None:  # the first call fixes the series to bisect: the manifest's first shape
            declared = outcome.variants.get(names[0])
            chosen["shape"] = declared.shapes[0].key if declared and declared.shapes else results[0]["shape"]
        mine = [r for r in results if r["shape"] == chosen["shape"] or shape_label(r["shape"]) == chosen["shape"]]
        if not mine:
            return bis.Measurement(sha, False, reason=f"no shape {chosen['shape']} at this commit")
        r = mine[0]
        rows[sha] = r
        if threshold is None and r.get("device") and metric == "time":
            search.threshold = config.default_threshold(r["device"], "history")
        if not status.measured(r["status"]):
            return bis.Measurement(sha, False, reason=f"{r['status']}: {(r['diagnostic'] or '')[:200]}")
        if metric == "memory":
            if r.get("peak_mem_bytes") is None:
                return bis.Measurement(sha, False, reason="no peak memory measured (the allocator's counters exist "
                                                          "on CUDA and ROCm devices only)")
            return bis.Measurement(sha, True, (float(r["peak_mem_bytes"]),))
        return bis.Measurement(sha, True, tuple(r["samples_s"]))

    identities: dict[str, str | None] = {}

    def identity(sha: str) -> str | None:
        """The bisected series' measurement identity at `sha` (planned, nothing built)."""
        if sha not in identities:
            opts = dataclasses.replace(options, only=only, with_peer=False,
                                       shapes=(chosen["shape"],) if chosen["shape"] else ())
            planned = plan_commit(session, repo, sha, opts)
            mine = [planned.identities.get(planned.series(j, session)) for j in planned.jobs
                    if selects(only[0], j.variant) and chosen["shape"] in (j.shape.key, j.shape.label)]
            identities[sha] = mine[0] if mine else None
        return identities[sha]

    if metric == "memory":
        search = bis.MemoryBisection([c.sha for c in commits], evaluate, memory_threshold or DEFAULT_MEMORY,
                                     max_evals, identity=identity)
    else:
        search = bis.Bisection([c.sha for c in commits], evaluate,
                               threshold if threshold is not None else config.default_threshold("cpu", "history"),
                               max_repeats, max_evals, identity=identity)
    outcome = search.run()
    culprit = None
    if outcome.first_bad:
        culprit = _culprit(repo, outcome.first_bad, rows.get(outcome.last_good), rows.get(outcome.first_bad))
    return bis.Report(variant, chosen["shape"] or "", search.threshold, tuple((c.sha, c.subject) for c in commits),
                      outcome, culprit, metric)


def _culprit(repo, sha: str, before: dict | None, after: dict | None) -> bis.Culprit:
    info = checkout.commit_info(repo, sha)
    parent = info.parents[0] if info.parents else None
    diffstat = repo.git.diff("--stat", parent, sha) if parent else repo.git.show("--stat", "--format=", sha)
    moved = cmp.moved(cmp.pool([before])[cmp.series_key(before)], cmp.pool([after])[cmp.series_key(after)]) \
        if before and after else ()
    return bis.Culprit(info.sha, info.subject, info.author, info.authored_at, diffstat, moved)


def main(args) -> int:
    threshold = common.threshold(args.threshold)
    memory_threshold = common.memory_threshold(args.memory_threshold)
    if len(args.variant) != 1:
        print("flopwatch bisect: error: give exactly one --variant", file=sys.stderr)
        return 2
    repo, work = workdir(args)
    refused = checkout.off_default_branch(repo, {"--good": args.good, "--bad": args.bad})
    if refused:
        print(f"flopwatch bisect: error: {refused}", file=sys.stderr)
        return 2
    options = run_options(args, "bisect")
    session = open_session(args, work)
    try:
        # A swept variant is bisected one point at a time: a selector naming several points is
        # refused before anything is timed; one point is bisected under its own name.
        planned = plan_commit(session, repo, args.bad, dataclasses.replace(options, only=(args.variant[0],),
                                                                            with_peer=False))
        points = sorted({j.variant for j in planned.jobs})
        if args.variant[0] in points:  # a name of its own (a forward series beside its passes): that series
            points = [args.variant[0]]
        if len(points) > 1:
            print(f"flopwatch bisect: error: --variant {args.variant[0]!r} selects {len(points)} points of a swept "
                  f"variant ({', '.join(points[:3])}, ...); bisect one, e.g. --variant '{points[0]}'",
                  file=sys.stderr)
            return 2
        variant = points[0] if points else args.variant[0]
        shape = options.shapes[0] if options.shapes else None  # normalised by run_options (512x512 → 512×512)
        report = bisect_series(session, repo, args.good, args.bad, variant, shape, threshold,
                               options, args.max_evals, args.max_repeats, args.metric, memory_threshold)
    finally:
        session.shutdown()
    if not args.no_report:
        from pipeline.commands import publish
        from reports.history_pages import write_bisect_page

        site = site_path(args, work)
        page = write_bisect_page(site, report, bis.bound(len(report.commits) - 1))  # first: the index links it
        publish.write_site(session.store, site, order=series.first_parent_shas(repo, args.bad))
        print(f"report: {page}", file=sys.stderr)
    session.store.close()
    if args.json:
        print(json.dumps(dataclasses.asdict(report), default=str))
    else:
        print(untrusted.terminal(bis.render_text(report)))
    if not report.outcome.reproduced:
        return 0
    return 1 if report.outcome.first_bad or report.outcome.candidates else 0
