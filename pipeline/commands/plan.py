"""flopwatch plan: the wall a stored run would take on other machines (1, 2, 4, 8 GPUs, several
nodes), from its jobs' recorded device seconds (`pipeline.run.planner`), their non-sampling part
grown with the GPUs busy at once per node (g learned from another stored run, else the default);
`--check RUN` holds the predictions against runs that were measured on other GPU counts.

    flopwatch plan                          # the newest run, on 1, 2, 4 and 8 GPUs
    flopwatch plan --run 12 --gpus 1,2 --gpus 4x8 --check 13
"""

from __future__ import annotations

import json

from pipeline.commands.common import UsageError, add_store_options, open_store
from pipeline.run import planner

HELP = "predict a stored run's wall on other GPU counts and nodes from its recorded job times"
DEFAULT_GPUS = "1,2,4,8"


def add_arguments(p) -> None:
    p.add_argument("--run", type=int, help="the run to plan from (default: the newest finished `flopwatch run`)")
    p.add_argument("--gpus", action="append",
                   help=f"machines to plan for: GPUs per node, or NODESxGPUS (comma-separated, repeatable; "
                        f"default {DEFAULT_GPUS})")
    p.add_argument("--kind", help="device kind to plan (default: the GPU kind that ran the most work)")
    p.add_argument("--check", type=int, action="append", default=[], metavar="RUN",
                   help="a run measured on another GPU count: its walls beside the prediction for its slots")
    p.add_argument("--default-growth", action="store_true",
                   help="take the default growth of a job's non-sampling time per extra busy GPU, not one learned "
                        "from another stored run (a --check against the run it was learned from is not independent)")
    p.add_argument("--json", action="store_true")
    add_store_options(p)


def main(args) -> int:
    try:
        machines = [planner.parse_machine(m) for spec in (args.gpus or [DEFAULT_GPUS]) for m in spec.split(",")
                    if m.strip()]
        with open_store(args) as store:
            rec = planner.from_store(store, args.run, args.kind, learn=not args.default_growth)
            checks = [planner.measured(store, run, rec.kind) for run in args.check]
    except planner.PlanError as exc:
        raise UsageError(str(exc)) from None
    machines += [(1, c["slots"]) for c in checks if (1, c["slots"]) not in machines]
    predictions = {m: planner.predict(rec, *m) for m in machines}
    one = planner.predict(rec, 1, 1)
    for c in checks:
        p = predictions[(1, c["slots"])]
        c["predicted_jobs_wall_s"], c["predicted_command_s"] = round(p.jobs_wall_s, 2), round(p.command_s, 2)
        c["command_error_pct"] = round(100 * (p.command_s / c["command_s"] - 1), 1) if c["command_s"] else None
        c["jobs_error_pct"] = round(100 * (p.jobs_wall_s / c["jobs_wall_s"] - 1), 1) if c["jobs_wall_s"] else None
        # A check against the run g was learned from is not independent of it: said so.
        c["growth_learned_from_it"] = rec.growth.run_id == c["run_id"]
    if args.json:
        print(json.dumps({"run_id": rec.run_id, "kind": rec.kind, "jobs": len(rec.jobs), "slots": rec.slots,
                          "resumed_from": rec.resumed_from, "resumed_jobs": rec.resumed_jobs,
                          "call_overhead_s": round(rec.call_overhead_s, 3), "outside_s": round(rec.outside_s, 2),
                          "recorded_jobs_wall_s": round(rec.jobs_wall_s, 2), "recorded_command_s": rec.command_s,
                          "device": rec.device, "recorded_gpus_per_node": rec.gpus_per_node, **rec.growth.to_dict(),
                          "predictions": [p.to_dict() for p in predictions.values()], "checks": checks}))
        return 0
    if rec.resumed_jobs:
        earlier = ", ".join(map(str, rec.resumed_from))
        print(f"run {rec.run_id} resumed {rec.resumed_jobs} {rec.kind} job(s) measured by run {earlier}: planned "
              f"without them, as it ran (--run {rec.resumed_from[-1]} plans the run that measured them)")
    print(f"run {rec.run_id}: {len(rec.jobs)} {rec.kind} jobs in {rec.calls} calls on {rec.slots} slot(s), "
          f"{sum(j.busy_s for j in rec.jobs):.1f} s of device work; jobs wall {rec.jobs_wall_s:.1f} s, command "
          f"{rec.command_s:.1f} s ({rec.outside_s:.1f} s outside the jobs; {rec.call_overhead_s:.2f} s untimed per call)")
    # A CPU run's slots are CPU slots (one job each at a time), not GPUs.
    unit = planner.unit(rec.kind)
    per = f"{rec.gpus_per_node} {unit}" + ("s" if rec.gpus_per_node > 1 else "")
    print(f"non-sampling device time (load, checks, warm-up) {100 * rec.growth.per_gpu:+.1f}% per extra busy {unit} "
          f"of a node ({rec.growth.source}; recorded on {per} per node), sampling as recorded")
    print(f"\n{'machine':>12} {'jobs wall':>10} {'command':>9} {'speed-up':>9} {'bound':>8} {'calls':>6} "
          f"{'non-sampling':>12}  spread over slots")
    for (nodes, gpus), p in predictions.items():
        name = f"{nodes}x{gpus}" if nodes > 1 else f"{gpus} {unit}" + ("s" if gpus > 1 else "")
        print(f"{name:>12} {p.jobs_wall_s:>8.1f} s {p.command_s:>7.1f} s {one.command_s / p.command_s:>8.2f}× "
              f"{p.bound.bound_s:>6.1f} s {p.calls:>6} {'×' + format(p.host_factor, '.2f'):>12}  "
              f"{', '.join(p.split) or '—'}")
    for c in checks:
        print(f"run {c['run_id']} measured on {c['slots']} slot(s): command {c['command_s']:.1f} s (predicted "
              f"{c['predicted_command_s']:.1f} s, {c['command_error_pct']:+.1f}%), jobs wall {c['jobs_wall_s']:.1f} s "
              f"(predicted {c['predicted_jobs_wall_s']:.1f} s, {c['jobs_error_pct']:+.1f}%)"
              + ("; the growth was learned from this run" if c["growth_learned_from_it"] else ""))
    return 0
