"""flopwatch compare BASE HEAD: measure both revisions interleaved and report what changed."""

from __future__ import annotations

import json
import os
import sys
import threading

from pipeline.ci import github
from pipeline.commands import common
from pipeline.commands.common import add_measure_options, open_session, run_options, site_path, workdir
from pipeline.history import causes, paired, series, unchanged
from pipeline.history import compare as cmp
from pipeline.project import checkout, config
from pipeline.run import driver_clock
from pipeline.run.runflow import PlannedCommit, Session, build_ahead, built_artifacts, plan_commit, run_commit
from workers.core.records import Result

HELP = "compare two revisions (interleaved rounds on the same device); exit 1 on a regression"


def add_arguments(p) -> None:
    p.add_argument("base", help="base revision (e.g. the PR's merge base)")
    p.add_argument("head", help="head revision")
    p.add_argument("--rounds", type=int, default=1,
                   help="whole-suite runs per revision, alternating (status, correctness, counters; default 1)")
    p.add_argument("--pair-budget", type=float, default=config.PAIR_BUDGET_S,
                   help=f"seconds of paired timing per series: both builds alternated in one process "
                        f"(default {config.PAIR_BUDGET_S:g})")
    p.add_argument("--threshold", help=common.threshold_help("compare", "smallest change that counts, for every series"))
    p.add_argument("--shape", action="append", default=[], help="only these shapes, as 512x512x512 or M=512,N=512,K=512 (repeatable)")
    p.add_argument("--pr", type=int, help="create or update the comparison comment on this pull request")
    p.add_argument("--repo-slug", default=os.environ.get("GITHUB_REPOSITORY"),
                   help="owner/name for --pr (default: $GITHUB_REPOSITORY)")
    p.add_argument("--all", action="store_true",
                   help="time every series at both commits, also those whose measurement identity (build, "
                        "harness, op, device model) is the same at both")
    p.add_argument("--no-report", action="store_true", help="do not write the site")
    add_measure_options(p, "compare")
    common.add_points_option(p)
    common.add_memory_threshold_option(p)


def open_regressions_section(causes_now) -> str:
    """The open regressions of the base branch by cause, for the PR comment: a slowdown the
    base already has is not the PR's. Trend links need the published site's address
    ($FLOPWATCH_SITE_URL, e.g. https://org.github.io/repo/); without it the section has none."""
    from reports.history_pages import trend_page_name

    base_url = os.environ.get("FLOPWATCH_SITE_URL", "").rstrip("/")
    section = causes.render_markdown(causes_now, lambda s: f"{base_url}/{trend_page_name(s)}" if base_url else None)
    return "\n" + section if section else ""


def main(args) -> int:
    threshold = common.threshold(args.threshold)
    memory_threshold = common.memory_threshold(args.memory_threshold)
    if args.rounds < 1:
        print("flopwatch compare: error: --rounds must be at least 1", file=sys.stderr)
        return 2
    if args.pr is not None and not (args.repo_slug and os.environ.get("GITHUB_TOKEN")):
        print("flopwatch compare: error: --pr needs GITHUB_TOKEN and --repo-slug or $GITHUB_REPOSITORY",
              file=sys.stderr)
        return 2
    repo, work = workdir(args)
    base, head = checkout.commit_info(repo, args.base), checkout.commit_info(repo, args.head)
    options = run_options(args, "compare")
    session = open_session(args, work, defer_ray=True)
    last: dict[str, object] = {}

    try:
        planned = {rev: plan_commit(session, repo, rev, options) for rev in (base.sha, head.sha)}
        decision = unchanged.plan_series(_series_infos(session, planned[base.sha]),
                                         _series_infos(session, planned[head.sha]),
                                         session.store.latest_by_identity, force=args.all)

        def times_cpu(rev: str, series: frozenset) -> bool:
            return any(j.device_kind == "cpu" for j in planned[rev].jobs_in(series, session))

        def measure(rev: str) -> list[dict]:
            # Only what may have changed: with nothing to time, nothing is built and no Ray starts.
            wanted = decision.at_head if rev == head.sha else decision.at_base
            last[rev] = run_commit(session, repo, rev, options, planned[rev], set(wanted))
            return [r.to_dict() for r in last[rev].results]

        # Work of the driver's own beside the runs, never beside a CPU job's timing (it would
        # share the cores with it; such a run builds first and imports after, as before).
        base_cpu, head_cpu = times_cpu(base.sha, decision.at_base), times_cpu(head.sha, decision.at_head)
        if not base_cpu:
            # The head's builds compile while the base builds and runs (its CPU jobs, if any,
            # wait for them), and the base's that only the paired timing needs, unless a CPU job
            # of the head would time beside them.
            build_ahead(session, planned[head.sha], set(decision.at_head), options)
            if not head_cpu:
                build_ahead(session, planned[base.sha], set(decision.base_stored), options)
        if (decision.at_head or decision.at_base) and not (base_cpu or head_cpu):
            # What the verdicts and the report import after the jobs (scipy's statistics, the
            # report's pages: 0.5-1 s), imported while the devices work instead.
            _import_beside(("scipy.stats", "pipeline.commands.publish", "reports.history_pages"))
        base_rows, head_rows = cmp.interleave(measure, base.sha, head.sha, args.rounds)
        base_rows += _stored_base(session, planned[base.sha], last[base.sha], decision.base_stored, options)
        # The peers timed at head only stand for both commits (`unchanged`, module docstring there).
        peers_at_head = {cmp.series_key(r): r for r in head_rows if cmp.series_key(r) in decision.head_only}
        head_rows = [r for r in head_rows if cmp.series_key(r) not in decision.head_only]
        pair_settings = {"timing": {"budget_s": args.pair_budget}, "threads": args.threads}
        with session.clock.phase("paired"):
            pairs = paired.paired_samples(session, last[base.sha], last[head.sha], pair_settings)
        measured = cmp.compare_sides(*cmp.with_pairs(cmp.pool(base_rows), cmp.pool(head_rows), pairs), threshold,
                                     memory_threshold)
        alarms = {(r.variant, r.shape, r.dtype, r.device) for r in measured
                  if r.kind in ("slower", "faster") and r.base and r.base.paired}
        if alarms:  # only a claimed change pays for the check
            with session.clock.phase("paired"):
                offsets = paired.copy_offsets(session, last[base.sha], alarms, pair_settings)
            measured = cmp.with_copy_check(measured, offsets)
    finally:
        session.shutdown()
    untimed = {**decision.reuse, **dict.fromkeys(decision.untimed), **peers_at_head}
    notes = {k: f"{unchanged.SAME_BUILD}: stored result of {str(row.get('commit_sha', ''))[:10]}"
             for k, row in decision.reuse.items()}
    notes.update({k: unchanged.NO_NUMBER for k in decision.untimed})
    notes.update({k: unchanged.PEER_AT_HEAD for k in peers_at_head})
    rows = cmp.merge_rows(measured, cmp.unchanged_rows(untimed, notes, threshold))
    report = cmp.Report(base.sha, base.subject, head.sha, head.subject, threshold, args.rounds, tuple(rows))
    markdown = cmp.render_markdown(report)
    if not args.no_report:
        from pipeline.commands import publish
        from reports.history_pages import compare_page_name, write_compare_page

        site = site_path(args, work)
        with session.clock.phase("report"):
            write_compare_page(site, report)  # first, so that the index links it
            shown = publish.write_site_input(session.store, site, order=series.first_parent_shas(repo, head.sha))
        markdown += open_regressions_section(shown.dashboard.causes)
        print(f"report: {site / compare_page_name(base.sha, head.sha)}", file=sys.stderr)
    session.store.close()
    github.write_step_summary(markdown)
    if args.pr is not None:
        try:
            result = github.upsert_comment(github.api_from_env(), args.repo_slug, args.pr, markdown)
            print(f"PR comment {'created' if result.created else 'updated'}: {result.html_url}", file=sys.stderr)
        except github.GitHubError as exc:
            print(f"flopwatch compare: warning: {exc}", file=sys.stderr)
    if args.json:
        print(json.dumps({**cmp.as_json(report), "driver": session.clock.as_dict(), "ray": session.ray_use()},
                         default=str))
    else:
        print(markdown)
        print(driver_clock.line(session.clock.as_dict()), file=sys.stderr)
        if session.cluster_info is None:
            print("ray: not started, nothing had to be timed", file=sys.stderr)
        elif session.slots_line():
            print(session.slots_line(), file=sys.stderr)
    return cmp.exit_status(report)


def _import_beside(modules: tuple[str, ...]) -> threading.Thread:
    """Import `modules` in a thread of their own (the main thread's later import finds them
    done, or waits for the one in progress); a module that fails stops the thread quietly (the
    main thread's own import then reports it). Returns the thread."""
    import importlib

    def load() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 — the main thread's own import reports it
                return

    thread = threading.Thread(target=load, name="flopwatch-imports", daemon=True)
    thread.start()
    return thread


def _stored_base(session: Session, planned: PlannedCommit, outcome, stored: dict, options) -> list[dict]:
    """The base side of the series whose base identity has a measured result in the store
    (`unchanged`, module docstring): that result as the base's row, and the base's build and
    jobs added to the base's run for the paired timing. Returns the rows."""
    if not stored:
        return []
    variants, artifacts = built_artifacts(session, planned, set(stored), options)
    outcome.variants.update(variants)
    outcome.artifacts.update(artifacts)
    outcome.jobs = [*outcome.jobs, *planned.jobs_in(stored, session)]
    rows = []
    for key, row in stored.items():
        # The stored row may name the series otherwise (same identity, another variant name).
        row = {**row, **dict(zip(("variant", "shape", "dtype", "device"), key))}
        outcome.results.append(Result.from_dict({**row, "samples_s": tuple(row.get("samples") or ())}))
        rows.append(row)
    return rows


def _series_infos(session: Session, planned: PlannedCommit) -> dict[tuple, unchanged.SeriesInfo]:
    """Each planned series' identity, op, device kind and peer flag (what the decision needs)."""
    variants = {v.name: v for v in planned.variants}
    out = {}
    for job in planned.jobs:
        key = planned.series(job, session)
        out[key] = unchanged.SeriesInfo(planned.identities.get(key, ""), job.op, job.device_kind,
                                        variants[job.variant].peer, planned.untooled.get(key, ""))
    return out
