"""flopwatch run [REV]: build, check, time and store every variant of a commit, then report."""

from __future__ import annotations

import json
import sys
import threading

from rich.console import Console

from pipeline.commands.common import UsageError
from pipeline.run import driver_clock, runflow
from pipeline.run.accounting import bound_lines, busy_line, flag_lines, lost_node_lines, run_wall_s
from pipeline.commands.common import add_measure_options, add_points_option, open_session, run_options, site_path, workdir
from pipeline.run.runflow import run_commit
from pipeline.run.summary import all_skipped_line, exit_code, print_table, with_peer
from workers.core import untrusted
from workers.core.records import Result

HELP = "benchmark a commit (default: the working tree) and write the report"


def add_arguments(p) -> None:
    p.add_argument("rev", nargs="?", help="revision to benchmark (default: the working tree, recorded as dirty when it differs from HEAD)")
    p.add_argument("--resume", action="store_true", help="skip results already stored for this commit (--json then "
                                                         "lists the commit's whole result set, the skipped ones "
                                                         "marked \"resumed\": true)")
    p.add_argument("--no-report", action="store_true", help="do not regenerate the site")
    p.add_argument("--shape", action="append", default=[],
                   help="only these shapes, as 512x512x512 or M=512,N=512,K=512 (repeatable)")
    add_measure_options(p)
    add_points_option(p)


def _resumed_rows(store, commit_sha: str, measured: list[dict]) -> list[dict]:
    """The commit's stored results this run did not measure (newest per series), each marked
    `resumed`; the measured ones are marked `resumed: false`."""
    new = {(r["variant"], r["shape"], r["dtype"], r["device"]) for r in measured}
    for r in measured:
        r["resumed"] = False
    fields = set(Result.__dataclass_fields__)
    return [{**{k: v for k, v in row.items() if k in fields}, "resumed": True}
            for row in store.latest_results(commit_sha)
            if (row["variant"], row["shape"], row["dtype"], row["device"]) not in new]


def _prepare_report() -> None:
    # Imported here, in the thread: the report's modules load while the jobs run, and a run
    # with --no-report never loads them.
    from pipeline.commands import publish

    publish.prepare()


def main(args) -> int:
    repo, work = workdir(args)
    session = open_session(args, work)
    clock = session.clock
    # The report's modules and templates are made ready in a thread while the devices run the
    # jobs (the driver mostly waits on them then), instead of after the last result.
    preparing = threading.Thread(target=_prepare_report, name="prepare-report", daemon=True)
    try:
        outcome = run_commit(session, repo, args.rev, run_options(args, "run", resume=args.resume),
                             beside_jobs=None if args.no_report else preparing.start)
    except runflow.SelectionError as exc:
        raise UsageError(str(exc)) from None
    finally:
        session.shutdown()
    rows = [r.to_dict() for r in outcome.results]
    # With --resume, the summary lists the commit's whole result set: what this run measured,
    # and the stored results it skipped (marked "resumed"), so a script that reads the summary
    # after an interrupted run sees every result, not only the last run's.
    stored = _resumed_rows(session.store, outcome.commit.sha, rows) if args.resume else []
    if not args.no_report:
        from pipeline.commands import publish

        with clock.phase("report"):
            if preparing.is_alive():
                preparing.join()
            publish.write_site(session.store, site_path(args, work))
    # The whole command's wall, report included, beside the run's records: what `flopwatch plan`
    # holds the jobs' wall against.
    session.store.note_run(outcome.run_id, driver=clock.as_dict())
    session.store.close()
    if args.json:
        print(json.dumps({
            "commit": outcome.commit.sha, "dirty": outcome.commit.dirty, "run_id": outcome.run_id,
            "rebuilt": outcome.rebuilt, "from_cache": outcome.from_cache, "resumed": outcome.resumed,
            "jobs_wall_s": run_wall_s(outcome.accounting), "bounds": outcome.bounds, "devices": outcome.accounting,
            "peer_check": outcome.peer_check, "lost_nodes": outcome.lost_nodes, "driver": clock.as_dict(),
            "ray": session.ray_use(), "all_skipped": all_skipped_line(rows, outcome.variants) or None,
            "results": [{k: v for k, v in r.items() if k not in ("samples_s", "stderr_tail")}
                        for r in with_peer([*rows, *stored])],
        }, default=str))
    else:
        console = Console(width=None if sys.stdout.isatty() else 160)
        console.print(f"commit {outcome.commit.short}  {untrusted.one_line(outcome.commit.subject)}", highlight=False,
                      markup=False)
        built = "nothing rebuilt" if outcome.rebuilt == 0 else f"{outcome.rebuilt} built"
        console.print(f"builds: {built}, {outcome.from_cache} from cache"
                      + (f"; resume skipped {outcome.resumed} stored result(s)" if args.resume else ""),
                      highlight=False)
        print_table(rows, console, title=f"results ({len(rows)} new)")
        for line in flag_lines(outcome.peer_check) + lost_node_lines(outcome.lost_nodes):
            console.print(line, style="red", highlight=False, markup=False)
        if outcome.accounting:
            console.print(f"jobs wall {run_wall_s(outcome.accounting):.1f} s (first submission to last result)",
                          highlight=False)
        for row in outcome.accounting:
            console.print(busy_line(row), highlight=False, markup=False)
        for line in bound_lines(outcome.bounds):
            console.print(line, highlight=False, markup=False)
        console.print(session.cluster_info.driver_line(), highlight=False, markup=False)
        if session.slots_line():
            console.print(session.slots_line(), highlight=False, markup=False)
        console.print(driver_clock.line(clock.as_dict()), highlight=False, markup=False)
        if not args.no_report:
            console.print(f"report: {site_path(args, work) / 'index.html'}", highlight=False)
        nothing_ran = all_skipped_line(rows, outcome.variants)
        if nothing_ran:  # last, where a CI log's reader looks first; the exit status stays 0 (README)
            console.print(nothing_ran, style="yellow", highlight=False, markup=False, soft_wrap=True)  # one line: grep-able
    return exit_code(rows)
