"""Throughput of flopwatch itself: the bundled suite cold (nothing built) and warm (builds
cached), on one device and on all, with the warm runner and with a fresh interpreter per job.
Every figure is read from the runs' own phase records (`flopwatch run --json`: `devices`,
`jobs_wall_s`), not from a stopwatch around them.

    python3 benchmarks/throughput.py                 # CPU node: cold, warm, warm --spawn-per-job
    python3 benchmarks/throughput.py --gpu-verify    # GPU node (2 GPUs): UUIDs, busy/wall, speed-up,
                                                     # broken CUDA set beside the good variants

The suite is copied into a fresh git repository under OUT (default ./throughput-out), so the
first run is really cold and the user's build cache is not touched; the later runs share its
cache and database. Full outputs (JSON summaries, stderr logs) go under OUT; a short table is
printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / "throughput-out"))


def suite_repo(extra: tuple[str, ...] = ()) -> Path:
    """A git repository holding the bundled suite (and `extra` folders), fresh every time."""
    repo = OUT / "suite"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    for name in ("kernels", "flopwatch.toml", *extra):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, repo / name)
    git = ["git", "-c", "user.name=flopwatch", "-c", "user.email=bench@flopwatch"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "bundled suite"]):
        subprocess.run(git + cmd, cwd=repo, check=True)
    return repo


def flopwatch(repo: Path, name: str, *args: str) -> dict:
    """One `flopwatch run --json` on `repo`; its summary plus the command's own wall time."""
    cmd = [sys.executable, "-m", "pipeline.cli", "run", "--json", "--no-report", "--repo", str(repo),
           "--db", str(OUT / "results.db"), *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               RAY_USAGE_STATS_ENABLED="0")
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    wall = time.time() - t0
    (OUT / f"{name}.log").write_text(proc.stderr)
    print(f"$ flopwatch run {' '.join(args)}  ({name}: exit {proc.returncode}, {wall:.0f} s)", flush=True)
    if not proc.stdout.strip():
        print(proc.stderr[-3000:])
        raise SystemExit(f"{name}: flopwatch printed no summary (exit {proc.returncode})")
    summary = json.loads(proc.stdout)
    summary.update(exit=proc.returncode, command_wall_s=round(wall, 1), name=name, args=list(args))
    (OUT / f"{name}.json").write_text(json.dumps(summary, indent=1))
    return summary


def figures(s: dict) -> dict:
    """Busy vs wall per device, from the run's records; `work_ratio` = wall / GPU work of the
    busiest device (the issue's "wall ≤ 1.3× the GPU work")."""
    devices = s.get("devices", [])
    busiest = max(devices, key=lambda d: d["busy_s"], default=None)
    start = [r.get("phases", {}).get("start_s", 0.0) for r in s["results"] if r.get("phases", {}).get("start_s")]
    return {"name": s["name"], "exit": s["exit"], "command_wall_s": s["command_wall_s"],
            "jobs_wall_s": s.get("jobs_wall_s", 0.0), "rebuilt": s["rebuilt"], "from_cache": s["from_cache"],
            "results": len(s["results"]), "devices": len(devices),
            "busy_s": round(sum(d["busy_s"] for d in devices), 1),
            "work_ratio": round(busiest["wall_s"] / busiest["busy_s"], 2) if busiest and busiest["busy_s"] else None,
            "median_start_s": round(statistics.median(start), 3) if start else None,
            "uuids": sorted({d["uuid"] for d in devices if d.get("uuid")})}


def print_table(rows: list[dict]) -> None:
    print(f"\n{'run':22} {'exit':>4} {'cmd wall':>9} {'jobs wall':>9} {'busy':>7} {'wall/work':>9} "
          f"{'start/job':>9} {'built':>5} {'rows':>4} devices")
    for f in rows:
        ratio = f"{f['work_ratio']:.2f}×" if f["work_ratio"] else "—"
        start = f"{f['median_start_s']:.2f} s" if f["median_start_s"] is not None else "—"
        print(f"{f['name']:22} {f['exit']:>4} {f['command_wall_s']:>7.1f} s {f['jobs_wall_s']:>7.1f} s "
              f"{f['busy_s']:>5.1f} s {ratio:>9} {start:>9} {f['rebuilt']:>5} {f['results']:>4} "
              f"{f['devices']} {' '.join(u[:12] for u in f['uuids'])}")


def device_lines(s: dict) -> None:
    for d in s.get("devices", []):
        pct = f"{d['busy_pct']:.0f}%" if d.get("busy_pct") is not None else "—"
        print(f"  {s['name']}: {d['slot']} {d.get('uuid') or d['device']}: device busy {d['busy_s']:.1f} s "
              f"of {d['wall_s']:.1f} s wall ({pct}), {d['jobs']} jobs")


def cpu_suite(args) -> list[dict]:
    repo = suite_repo()
    budget = ["--budget", str(args.budget)]
    runs = [flopwatch(repo, "cold", *budget), flopwatch(repo, "warm", *budget),
            flopwatch(repo, "warm_spawn_per_job", *budget, "--spawn-per-job")]
    return runs


def _rates(s: dict) -> dict:
    return {(r["variant"], r["shape"], r["dtype"]): r["rate"] for r in s["results"]
            if r["status"] == "ok" and r.get("rate") and r["device"].startswith("cuda")}


def gpu_verify(args) -> list[dict]:
    """Everything the multi-GPU work must show, in one invocation (about 5–8 minutes on 2×H200)."""
    repo = suite_repo(extra=("tests/broken_kernels_cuda",))
    budget = ["--budget", str(args.budget)]
    n = args.gpus
    cold = flopwatch(repo, f"cold_{n}gpu", *budget, "--num-gpus", str(n))
    # The scaling pair runs the same jobs: the peer check (one extra job per op on every GPU of
    # a node with several) exists only with several GPUs, so it is left out of both; the cold
    # run and the broken-set run keep it.
    one = flopwatch(repo, "warm_1gpu", *budget, "--num-gpus", "1", "--no-peer-check")
    many = flopwatch(repo, f"warm_{n}gpu", *budget, "--num-gpus", str(n), "--no-peer-check")
    broken = flopwatch(repo, f"broken_plus_good_{n}gpu", *budget, "--num-gpus", str(n),
                       "--kernels", "kernels", "--kernels", "tests/broken_kernels_cuda")
    runs = [cold, one, many, broken]
    for s in runs:
        device_lines(s)
    print(f"\ntwo different UUIDs in one run ({many['name']}): "
          f"{sorted({d['uuid'] for d in many.get('devices', []) if d.get('uuid')})}")
    uuids_per_row = {r["device_info"].get("uuid") for r in many["results"] if r["device"].startswith("cuda")
                     and r.get("device_info", {}).get("uuid")}
    print(f"UUIDs recorded in the results of {many['name']}: {sorted(uuids_per_row)}")
    speedup = one["jobs_wall_s"] / many["jobs_wall_s"] if many.get("jobs_wall_s") else None
    print(f"speed-up 1 → {n} GPUs (jobs wall, as printed by the runs): "
          f"{one['jobs_wall_s']:.1f} s / {many['jobs_wall_s']:.1f} s = {speedup:.2f}×" if speedup else "speed-up: —")
    print(f"\nbroken CUDA set beside the good variants ({broken['name']}, exit {broken['exit']}):")
    for r in broken["results"]:
        if r["variant"].startswith("cuda_") and r["variant"] in {p.name for p in
                                                                  (ROOT / "tests/broken_kernels_cuda/gemm").iterdir()}:
            print(f"  {r['variant']:24} {r['status']:10} {r['diagnostic'][:150]}")
    clean, mixed = _rates(many), _rates(broken)
    diffs = []
    print(f"\n{'good variant':24} {'shape':20} {'alone':>12} {'with broken':>12} {'diff':>7}")
    for key in sorted(clean):
        if key in mixed:
            d = (mixed[key] - clean[key]) / clean[key] * 100
            diffs.append(abs(d))
            print(f"{key[0]:24} {key[1][:20]:20} {clean[key] / 1e12:>8.2f} TF/s {mixed[key] / 1e12:>8.2f} TF/s {d:>+6.2f}%")
    if diffs:
        print(f"good variants within 1%: {sum(d <= 1.0 for d in diffs)} of {len(diffs)}; "
              f"largest |diff| {max(diffs):.2f}%")
    (OUT / "verify_summary.json").write_text(json.dumps({
        "speedup": speedup, "figures": [figures(s) for s in runs],
        "peer_check": {s["name"]: s.get("peer_check") for s in (cold, broken)}, "rate_diffs_pct": diffs}, indent=1))
    for s in (cold, broken):
        flagged = (s.get("peer_check") or {}).get("flagged", [])
        checks = (s.get("peer_check") or {}).get("checks", [])
        print(f"peer check in {s['name']}: {len(checks)} op(s) checked, {len(flagged)} device(s) flagged "
              + "; ".join(f"{f['slot']} {f['off_pct']}%" for f in flagged))
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu-verify", action="store_true", help="the multi-GPU verification (needs GPUs)")
    p.add_argument("--gpus", type=int, default=2, help="GPUs of the 'all GPUs' runs (default 2)")
    p.add_argument("--budget", type=float, default=0.5, help="timing budget per job (default 0.5 s)")
    args = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for old in ("results.db", "results.db-wal", "results.db-shm"):
        (OUT / old).unlink(missing_ok=True)
    runs = gpu_verify(args) if args.gpu_verify else cpu_suite(args)
    rows = [figures(s) for s in runs]
    (OUT / "figures.json").write_text(json.dumps(rows, indent=1))
    print_table(rows)


if __name__ == "__main__":
    main()
