"""flopwatch detect: find slowdown steps in every stored series and record them as regressions."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from pipeline.commands import common
from pipeline.commands.common import add_repo_options, cache_dir, open_store, site_path, workdir
from pipeline.history import causes, dashboard, same_build, series
from pipeline.history.caches.points_cache import PointsCache
from pipeline.history.caches.window_cache import WindowCache
from pipeline.history.memory.threshold import DEFAULT as DEFAULT_MEMORY
from pipeline.history.memory.threshold import MemoryThreshold
from pipeline.history.regressions import RegressionStore
from pipeline.store import Store

HELP = ("detect change points (E-Divisive means) in each series' history, and peak memory steps; record and publish "
        "regressions")


def add_arguments(p) -> None:
    add_repo_options(p)
    p.add_argument("--branch", default="HEAD", help="whose first-parent line orders the history (default HEAD)")
    p.add_argument("--threshold", help=common.threshold_help("history", "smallest step that counts, for every series"))
    common.add_memory_threshold_option(p)
    p.add_argument("--no-report", action="store_true", help="write only regressions.json, not the whole site")
    p.add_argument("--json", action="store_true", help="print the regressions found as JSON")
    p.add_argument("--ray-address", metavar="HOST:PORT",
                   help="search the windows over this Ray cluster, one task per batch (default: "
                        "$FLOPWATCH_RAY_ADDRESS, then $RAY_ADDRESS; without any, here, unless Ray is already up in "
                        "this process)")


@dataclass(frozen=True)
class Detected:
    """What one detection decided: recorded holds (Regression as stored, is_new) per step found
    now; causes the open regressions of the whole history grouped by culprit commit or
    unresolved range (`pipeline.history.causes`); work the windows searched and skipped;
    same_build the steps found within an unchanged build, not recorded (`history.same_build`)."""

    recorded: list[tuple]
    causes: tuple
    work: series.Detection
    scanned: series.History
    same_build: tuple = ()


def window_cache_path(cache_root: Path) -> Path:
    """Where detect remembers the windows it searched: beside the builds in the cache root
    (`--cache` / $FLOPWATCH_CACHE / <repo>/.flopwatch/cache, `common.cache_dir`)."""
    return cache_root / "history" / "windows.sqlite"


def detect(store: Store, order: list[str], threshold: float | None, search=None, cache=None,
           details: bool = False, points=None, memory_threshold: MemoryThreshold = DEFAULT_MEMORY) -> Detected:
    """Detect and store the steps of every series, then group what is open by cause. search
    and cache: see `series.detect_regressions`; details: read resources and counters too, so
    that the site can be written from the same pass over the store (`Detected.scanned`);
    points: a `points_cache.PointsCache` that spares reading the rows it already holds;
    memory_threshold: the smallest peak memory step that counts."""
    scanned = series.scan(store, order, details=details, cache=points)
    history = scanned.series
    work = series.detect_regressions(history, threshold, search=search, cache=cache,
                                     memory_threshold=memory_threshold)
    steps, machine = same_build.split(store, work.regressions, order)
    table = RegressionStore(store)
    recorded = [table.record(r) for r in steps]
    stored = table.all()
    commits = {sha: store.commit(sha) or {"sha": sha}
               for r in stored for sha in (r.good_sha, r.bad_sha, r.culprit_sha) if sha}
    open_now = dashboard.open_regressions(history, stored, commits, order)
    return Detected(recorded, causes.group(open_now, commits), work, scanned, tuple(machine))


def _on_cluster(address: str | None):
    """`detect_cluster.search_windows` when a cluster is given or already joined, else None
    (search here: starting a local cluster costs more than it saves)."""
    from pipeline.fleet.ray_access import resolve_address

    target = resolve_address(address)
    if target is None and "ray" not in sys.modules:
        return None
    from pipeline.fleet import cluster
    from pipeline.history import detect_cluster

    if target is None and not cluster.ray.is_initialized():
        return None
    cluster.connect(address)
    return detect_cluster.search_windows


def main(args) -> int:
    threshold = common.threshold(args.threshold)
    memory_threshold = common.memory_threshold(args.memory_threshold)
    repo, work = workdir(args)
    order = series.first_parent_shas(repo, args.branch)
    from pipeline.commands import publish

    with open_store(args, work) as store, WindowCache(window_cache_path(cache_dir(args, work))) as cache, \
            PointsCache(publish.points_cache_path(cache_dir(args, work))) as points:
        detected = detect(store, order, threshold, _on_cluster(args.ray_address), cache, details=not args.no_report,
                          points=points, memory_threshold=memory_threshold)
        recorded = detected.recorded
        out = site_path(args, work)
        if args.no_report:
            publish.write_feed(store, out)
        else:
            publish.write_site(store, out, order=order, scanned=detected.scanned)
    if args.json:
        w = detected.work
        print(json.dumps({"windows": {"total": w.windows, "skipped": w.skipped, "cached": w.cached,
                                      "searched": w.searched},
                          "regressions": [dict(r.to_dict(), new=new) for r, new in recorded],
                          "same_build_steps": [r.to_dict() for r in detected.same_build],
                          "causes": [_cause_json(c) for c in detected.causes]}, default=str))
    else:
        if detected.causes:
            print(f"open regressions by cause ({len(detected.causes)}):")
            print(causes.render_text(detected.causes, frozenset(r.id for r, new in recorded if new)))
        n_open = sum(len(c.slowed) for c in detected.causes)
        w = detected.work
        print(f"windows: {w.windows}, {w.skipped} could not hold a step, {w.cached} known from earlier runs, "
              f"{w.searched} searched now")
        print(f"{len(recorded)} step(s) found now, {sum(n for _, n in recorded)} new; {n_open} open regression(s) "
              f"from {len(detected.causes)} cause(s); feed: {out / 'regressions.json'}")
        if detected.same_build:
            print(same_build_line(detected.same_build))
    return 0


def same_build_line(steps) -> str:
    """The steps left out because their build did not change, named for the reader."""
    named = "; ".join(f"{r.variant} {r.shape} {r.good_sha[:10]}..{r.bad_sha[:10]} {r.label}" for r in steps[:5])
    more = f" and {len(steps) - 5} more" if len(steps) > 5 else ""
    return (f"{len(steps)} step(s) within an unchanged build, not recorded (the same measurement identity on "
            f"both sides: the machine moved, not the code): {named}{more}")


def _cause_json(cause) -> dict:
    """One cause for `--json`: its culprit (or range) and the ids of its regressions, worst first."""
    return {"how": cause.how, "culprit_sha": cause.culprit["sha"] if cause.culprit else None,
            "good_sha": cause.good.get("sha"), "bad_sha": cause.bad.get("sha"), "between": cause.between,
            "regressions": [{"id": o.regression.id, "variant": o.regression.variant, "shape": o.regression.shape,
                             "dtype": o.regression.dtype, "device": o.regression.device,
                             "change": o.regression.change, "metric": o.regression.metric}
                            for o in cause.slowed]}
