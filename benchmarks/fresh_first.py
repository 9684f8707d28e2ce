"""A fresh machine's first command, and the one after it (issue 39).

With no flopwatch Ray up, `flopwatch run --variant V` of the bundled suite at default settings
(`--json`, nvidia-smi every 500 ms beside it), then the same command again (flopwatch's kept
local Ray and its slots up); then, each on a new local Ray of its own (builds cached now), the
first command again at default settings, with the head readying no slots
(FLOPWATCH_HEAD_PREPARE=0), with Ray's worker prestart for the head's first driver on (Ray's
default; flopwatch turns it off), with the head started after the command's imports
(FLOPWATCH_HEAD_AHEAD=0), and with the slots' runners spawned once Ray is up instead of started
by the head before it (FLOPWATCH_RUNNER_SEEDS=0). Prints per command its wall, the jobs' wall, the driver's
phases and their sum outside the jobs, when its first job began, where the head's start went, what the slots and the
probe found, and nvidia-smi's mean per GPU. Only the very first command meets a cold page cache.

    OUT=/tmp/bench python3 benchmarks/fresh_first.py [--variant cuda_wmma]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput  # noqa: E402  (its suite repository, command runner and nvidia-smi sampler)

OUT = throughput.OUT


def heads_folder(name: str) -> Path:
    folder = Path("/tmp") / f"fwh{len(list(Path('/tmp').glob('fwh*')))}-{os.getpid()}"  # short: Ray's socket paths
    folder.mkdir(mode=0o700)
    return folder


def stop_heads(folder: Path) -> None:
    for record in folder.glob("*/head.json"):
        try:
            os.kill(int(json.loads(record.read_text())["pid"]), signal.SIGTERM)
        except (OSError, ValueError, KeyError):
            pass


def row(s: dict, label: str) -> dict:
    phases = s["driver"]["phases"]
    outside = sum(v for k, v in phases.items() if k not in ("builds_and_jobs", "paired"))
    util = s["_util"].mean()
    # When the first job's process began, from the command's start (the path to the first job:
    # builds included where they were cold).
    began = [float(r["phases"]["began_at"]) for r in s["results"] if (r.get("phases") or {}).get("began_at")]
    first_job = round(min(began) - s["started"], 2) if began else None
    out = {"command": label, "exit": s["exit"], "command_wall_s": s["command_wall_s"], "jobs_wall_s": s["jobs_wall_s"],
           "outside_jobs_s": round(outside, 2), "wall_minus_jobs_s": round(s["command_wall_s"] - (s["jobs_wall_s"] or 0), 2),
           "first_job_at_s": first_job,
           "phases": {k: round(v, 2) for k, v in phases.items()}, "ray": s["ray"], "rebuilt": s["rebuilt"],
           "from_cache": s["from_cache"], "results": len(s["results"]),
           "statuses": sorted({r["status"] for r in s["results"]}), "nvidia_smi_mean_pct": util,
           "started": s["started"]}
    print(json.dumps(out, indent=1, default=str), flush=True)
    return out


def ray_log_marks(folder: Path, started: float) -> list[str]:
    """Where a head's `ray.init` went, from its Ray session's logs, in seconds from the
    command's start: each log file's ctime and mtime (a file never written after it was opened,
    such as a process's empty `.err`, keeps the time its process began), ordered by ctime, and
    the raylet's start-up lines."""
    lines = []
    for logs in sorted(folder.glob("*/r/session_2*/logs")):
        files = sorted((f for f in logs.iterdir() if f.is_file()), key=lambda f: f.stat().st_ctime)
        for f in files:
            st = f.stat()
            lines.append(f"{st.st_ctime - started:7.2f} s  ctime  {f.name}  (mtime {st.st_mtime - started:.2f} s)")
        raylet = logs / "raylet.out"
        if raylet.exists():
            for text in raylet.read_text(errors="replace").splitlines():
                if any(k in text for k in ("started", "agent", "Registered", "registered", "Setting cluster ID")):
                    lines.append("raylet: " + text[:220])
                if len(lines) > 200:
                    break
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", default=None, help="default: cuda_wmma on a CUDA machine, cpp_naive elsewhere")
    p.add_argument("--arm", action="append", default=[],
                   help="only these new-Ray arms (new_ray, new_ray_no_prepare, ...; repeatable; default all)")
    args = p.parse_args()
    kind = throughput.machine_kind()
    variant = args.variant or ("cuda_wmma" if kind == "cuda" else "cpp_naive")
    OUT.mkdir(parents=True, exist_ok=True)
    repo, _ = throughput.suite_repo(kind)
    db = OUT / "fresh_first.db"
    db.unlink(missing_ok=True)
    rows, folders = [], []
    try:
        first = heads_folder("first")
        folders.append(first)
        env = {"FLOPWATCH_LOCAL_RAY_DIR": str(first)}
        rows.append(row(throughput.flopwatch(repo, "fresh_first", db, kind, "run", "--variant", variant,
                                             env_extra=env), "first command, no Ray up, builds cold"))
        (OUT / "ray_logs_first.txt").write_text("\n".join(ray_log_marks(first, rows[-1]["started"])) + "\n")
        rows.append(row(throughput.flopwatch(repo, "fresh_second", db, kind, "run", "--variant", variant,
                                             env_extra=env), "the same again (kept Ray and slots)"))
        for name, extra, label in (
                ("new_ray", {}, "first command on a new local Ray, builds cached"),
                ("new_ray_no_prepare", {"FLOPWATCH_HEAD_PREPARE": "0"}, "the same, the head readying no slots"),
                ("new_ray_prestart", {"RAY_prestart_worker_first_driver": "1"},
                 "the same, Ray's worker prestart on (Ray's default)"),
                ("new_ray_not_ahead", {"FLOPWATCH_HEAD_AHEAD": "0"},
                 "the same, the head started after the command's imports"),
                ("new_ray_no_seeds", {"FLOPWATCH_RUNNER_SEEDS": "0"},
                 "the same, the slots' runners spawned once Ray is up")):
            if args.arm and name not in args.arm:
                continue
            stop_heads(folders[-1])
            time.sleep(2)
            folder = heads_folder(name)
            folders.append(folder)
            rows.append(row(throughput.flopwatch(repo, name, db, kind, "run", "--variant", variant,
                                                 env_extra={"FLOPWATCH_LOCAL_RAY_DIR": str(folder), **extra}), label))
    finally:
        for folder in folders:
            stop_heads(folder)
    print(f"\n{'command':<52} {'wall':>7} {'jobs':>7} {'outside':>8} {'1st job':>8}  ray start / probe / head "
          f"(python, resources, ray import, ray.init; GPUs attached)")
    for r in rows:
        ph, head = r["phases"], r["ray"].get("head", {})
        print(f"{r['command']:<52} {r['command_wall_s']:>6.1f}s {r['jobs_wall_s'] or 0:>6.1f}s {r['outside_jobs_s']:>7.1f}s"
              f" {r['first_job_at_s'] or 0:>7.1f}s"
              f"  {ph.get('ray_start', 0):.1f} / {ph.get('probe', 0):.1f} / "
              f"({head.get('python', 0):.1f}, {head.get('resources', 0):.1f}, {head.get('ray_import', 0):.1f}, "
              f"{head.get('ray_init', 0):.1f}; {head.get('gpus_attached', '-')})")
    (OUT / "fresh_first_rows.json").write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
