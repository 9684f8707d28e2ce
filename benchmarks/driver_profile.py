"""Where a `flopwatch run`'s driver spends the time outside its jobs (issue 39: the 4-GPU command
wall), on the machine that shows it.

The bundled suite as a fresh repository (`throughput.suite_repo`), on every device of the
machine, at default settings: one run to build and start the kept local Ray, one run as a user
would make it, then the same under cProfile (FLOPWATCH_PROFILE). Prints each run's wall, jobs
wall, the driver's phases and what none of them covers (inside the command: command_s minus the
phases; after it: the wall minus command_s, the process's exit included), then the profile's
largest entries by cumulative and by own time. With --reuse, the repository and store that
`throughput.py --scaling` left in OUT are used (no build run).

    OUT=/tmp/bench python3 benchmarks/driver_profile.py [--reuse]
"""

from __future__ import annotations

import argparse
import io
import json
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput  # noqa: E402  (its suite repository, command runner and nvidia-smi sampler)

OUT = throughput.OUT


def line(s: dict) -> dict:
    phases = s["driver"]["phases"]
    inside = s["driver"]["command_s"] - sum(phases.values())
    out = {"name": s["name"], "exit": s["exit"], "command_wall_s": s["command_wall_s"],
           "jobs_wall_s": s["jobs_wall_s"], "driver_command_s": s["driver"]["command_s"],
           "uncovered_inside_s": round(inside, 3),
           "after_command_s": round(s["ended"] - s["started"] - s["driver"]["command_s"], 3),
           "phases": phases}
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reuse", action="store_true", help="the suite and store `throughput.py --scaling` left")
    args = p.parse_args()
    kind = throughput.machine_kind()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.reuse and (OUT / "suite").exists() and (OUT / "scaling.db").exists():
        repo, db = OUT / "suite", OUT / "scaling.db"
    else:
        repo, _ = throughput.suite_repo(kind)
        db = OUT / "driver_profile.db"
        db.unlink(missing_ok=True)
        line(throughput.flopwatch(repo, "profile_build", db, kind, "run"))
    rows = [line(throughput.flopwatch(repo, "profile_plain", db, kind, "run"))]
    stats_file = OUT / "driver.prof"
    rows.append(line(throughput.flopwatch(repo, "profile_on", db, kind, "run",
                                          env_extra={"FLOPWATCH_PROFILE": str(stats_file)})))
    for order, count in (("cumulative", 45), ("tottime", 30)):
        text = io.StringIO()
        pstats.Stats(str(stats_file), stream=text).sort_stats(order).print_stats(count)
        print(f"\n== by {order}\n{text.getvalue()}")
    (OUT / "driver_profile.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
