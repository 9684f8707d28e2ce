"""flopwatch detect: find slowdown steps in every stored series and record them as regressions."""

from __future__ import annotations

import json
import sys

from pipeline.commands import common
from pipeline.commands.common import add_repo_options, open_store, site_path, workdir
from pipeline.history import series
from pipeline.history.regressions import RegressionStore
from pipeline.store import Store
from workers import untrusted

HELP = "detect change points (E-Divisive means) in each series' history; record and publish regressions"


def add_arguments(p) -> None:
    add_repo_options(p)
    p.add_argument("--branch", default="HEAD", help="whose first-parent line orders the history (default HEAD)")
    p.add_argument("--threshold", help=common.threshold_help("history", "smallest step that counts, for every series"))
    p.add_argument("--no-report", action="store_true", help="write only regressions.json, not the whole site")
    p.add_argument("--json", action="store_true", help="print the regressions found as JSON")
    p.add_argument("--ray-address", metavar="HOST:PORT",
                   help="spread the series over this Ray cluster, one task per batch (default: "
                        "$FLOPWATCH_RAY_ADDRESS, then $RAY_ADDRESS; without any, here, unless Ray is already up in "
                        "this process)")


def detect(store: Store, order: list[str], threshold: float | None, steps_of=None) -> list[tuple]:
    """Detect and store; returns (Regression as stored, is_new) per step found."""
    found = series.find_regressions(series.load(store, order, details=False), threshold, steps_of=steps_of)
    table = RegressionStore(store)
    return [table.record(r) for r in found]


def _on_cluster(address: str | None):
    """`detect_cluster.detect_batches` when a cluster is given or already joined, else None
    (detect here: starting a local cluster costs more than it saves)."""
    from pipeline.ray_access import resolve_address

    target = resolve_address(address)
    if target is None and "ray" not in sys.modules:
        return None
    from pipeline import cluster
    from pipeline.history import detect_cluster

    if target is None and not cluster.ray.is_initialized():
        return None
    cluster.connect(address)
    return detect_cluster.detect_batches


def main(args) -> int:
    threshold = common.threshold(args.threshold)
    repo, work = workdir(args)
    order = series.first_parent_shas(repo, args.branch)
    from pipeline.commands import publish

    with open_store(args, work) as store:
        recorded = detect(store, order, threshold, _on_cluster(args.ray_address))
        out = site_path(args, work)
        if args.no_report:
            publish.write_feed(store, out)
        else:
            publish.write_site(store, out, order=order)
    if args.json:
        print(json.dumps({"regressions": [dict(r.to_dict(), new=new) for r, new in recorded]}, default=str))
    else:
        for r, new in recorded:
            print(untrusted.one_line(f"{'NEW ' if new else ''}{r.variant} {r.shape} {r.dtype} {r.device}: "
                                     f"{r.change:+.1%} between {r.good_sha[:10]} and {r.bad_sha[:10]}"))
        print(f"{len(recorded)} regression(s), {sum(n for _, n in recorded)} new; feed: {out / 'regressions.json'}")
    return 0
