"""The part of `throughput.py --scaling`'s run records that docs/gpu-runs keeps: every run's
summary and every result's phases, without samples, tile maps or counters.

    python3 benchmarks/condense_runs.py OUT.json run_1gpu.json run_2gpu.json ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SUMMARY = ("name", "args", "exit", "command_wall_s", "jobs_wall_s", "run_id", "bounds", "devices", "peer_check",
           "driver")


def condense(run: dict) -> dict:
    out = {k: run.get(k) for k in SUMMARY}
    out["results"] = [{"variant": r["variant"], "shape": r["shape"], "dtype": r["dtype"], "status": r["status"],
                       "median_s": r.get("median_s"), "peer": r.get("peer"), "phases": r.get("phases") or {},
                       "slot": (r.get("device_info") or {}).get("slot"),
                       "uuid": (r.get("device_info") or {}).get("uuid"), "device": r.get("device"),
                       "warmup_reason": (r.get("timing") or {}).get("warmup_reason"),
                       "device_free_after_s": (r.get("timing") or {}).get("device_free_after_s")}
                      for r in run.get("results") or []]
    return out


def main(argv: list[str]) -> int:
    target, *sources = argv
    runs = {}
    for src in sources:
        run = json.loads(Path(src).read_text())
        runs[run.get("name") or Path(src).stem] = condense(run)
    Path(target).write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
