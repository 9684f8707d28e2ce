"""Throughput of flopwatch as a user sees it: the commands a developer waits for, at default
settings, each timed around the whole command, with device utilization sampled every 500 ms by
`nvidia-smi` / `rocm-smi` in a process of its own, next to the run's own phase records.

    python3 benchmarks/throughput.py                  # this machine: every GPU it has, or the CPU
    python3 benchmarks/throughput.py --gpus 1 --gpus 2  # the table once per GPU count
    python3 benchmarks/throughput.py --gpu-verify     # multi-GPU checks: UUIDs, busy/wall, broken set,
                                                      # one GPU slowed by a co-running load
    python3 benchmarks/throughput.py --scaling --gpus 1 --gpus all  # warm `run A` per GPU count, nvidia-smi
                                                      # per GPU, `flopwatch plan` held against each count
    python3 benchmarks/throughput.py --hog            # after --scaling: `run A` with the last GPU loaded

The bundled suite is copied into a fresh git repository under OUT (default ./throughput-out)
with three commits: A (the suite), B (A plus a README edit) and C (A plus a `-D` define in one
variant's flags: `cuda_smem_tiled` where the machine has an NVIDIA GPU, `cpp_blocked` on a CPU).
Then, per GPU count:

  run (cold)          `flopwatch run A`, nothing built                              reported
  run                 `flopwatch run A`, builds cached                              target
  compare A B         in a fresh clone (no build cache), the store holding the run of A
                      (as a PR runner with a shared store finds it)                 target
  compare A B, no Ray the same with no flopwatch Ray up (the first command on a runner) target
  compare A C         the same, C changes one variant                               target
  compare A B, empty  a fresh clone and an empty store: unchanged series untimed   with --empty-store

Printed per command: command wall (stopwatch), jobs wall, timed share (sum of the results'
timed samples over the devices' jobs wall), utilization over the command and over the jobs
window per device (nvidia-smi/rocm-smi, not the run's bookkeeping), the driver's own phases, the
untimed time between one timing loop and the next on the device (from the jobs' epoch marks),
and for compare the series not re-timed and the verdicts. `--ab overlap` / `--ab batch` / `--ab warm`
add `run A` with that setting off, then on (what it saves; medians off against on). Full outputs
(JSON with every job's phases, stderr, utilization samples) go under OUT; the table is printed
last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = Path(os.environ.get("OUT", ROOT / "throughput-out"))

# Utilization samplers as data: (command, parser of one output line → [(device, percent)]).
NVIDIA_SMI = ["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits", "-lms", "500"]
DEFINE_VARIANT = {"cuda": ("gemm/cuda_smem_tiled", "cuda_smem_tiled"), "cpu": ("gemm/cpp_blocked", "cpp_blocked")}


class UtilizationSampler:
    """nvidia-smi (or rocm-smi) sampling every 500 ms while a command runs; each sample is
    (epoch seconds, device index, utilization %)."""

    def __init__(self, kind: str):
        self.kind, self.samples, self.proc, self.thread = kind, [], None, None

    def __enter__(self):
        if self.kind == "cuda" and shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(NVIDIA_SMI, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.thread = threading.Thread(target=self._read_nvidia, daemon=True)
            self.thread.start()
        elif self.kind == "rocm" and shutil.which("rocm-smi"):
            self._stop = threading.Event()
            self.thread = threading.Thread(target=self._poll_rocm, daemon=True)
            self.thread.start()
        return self

    def _read_nvidia(self) -> None:
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[1].isdigit():
                self.samples.append((time.time(), int(parts[0]), float(parts[1])))

    def _poll_rocm(self) -> None:
        while not self._stop.wait(0.5):
            try:
                out = subprocess.run(["rocm-smi", "--showuse", "--json"], capture_output=True, text=True,
                                     timeout=5, check=False).stdout
                for card, fields in json.loads(out or "{}").items():
                    pct = next((v for k, v in fields.items() if "GPU use" in k), None)
                    if pct is not None:
                        self.samples.append((time.time(), int(card.replace("card", "") or 0), float(pct)))
            except (subprocess.SubprocessError, ValueError):
                continue

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if getattr(self, "_stop", None) is not None:
            self._stop.set()
        if self.thread is not None:
            self.thread.join(timeout=5)

    def mean(self, start: float | None = None, end: float | None = None) -> dict[int, float]:
        """Mean utilization per device over [start, end] (the whole sampling when None)."""
        per: dict[int, list[float]] = {}
        for t, dev, pct in self.samples:
            if (start is None or t >= start) and (end is None or t <= end):
                per.setdefault(dev, []).append(pct)
        return {dev: round(statistics.fmean(v), 1) for dev, v in sorted(per.items()) if v}


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=flopwatch", "-c", "user.email=bench@flopwatch", *args]
    return subprocess.run(cmd, cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


# --ops: the ops of the bundled suite to copy (all when empty); its shared headers always.
OPS: list[str] = []


def suite_repo(kind: str, extra: tuple[str, ...] = ()) -> tuple[Path, dict[str, str]]:
    """The bundled suite (and `extra` folders) as a fresh repository with commits A, B, C."""
    repo = OUT / "suite"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    kernels = [f"kernels/{op}" for op in OPS] + ["kernels/include"] if OPS else ["kernels"]
    for name in (*kernels, "flopwatch.toml", *extra):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, repo / name)
    (repo / ".gitignore").write_text(".flopwatch/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "bundled suite")
    shas = {"A": git(repo, "rev-parse", "HEAD")}
    (repo / "README.md").write_text("# kernels\n\nNotes only: no kernel changes.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "docs: a README")
    shas["B"] = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", shas["A"], "-b", "define")
    folder, _ = DEFINE_VARIANT["cuda" if kind == "cuda" else "cpu"]
    manifest = repo / "kernels" / folder / "variant.toml"
    text = manifest.read_text()
    marker = 'flags = ["-O3"' if 'flags = ["-O3"' in text else 'flags = ["-O2"'
    manifest.write_text(text.replace(marker, marker + ', "-DFLOPWATCH_BENCH_DEFINE=1"', 1))
    git(repo, "commit", "-qam", "one variant: a -D define")
    shas["C"] = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    (OUT / "shas.json").write_text(json.dumps(shas))
    return repo, shas


def fresh_clone(repo: Path, name: str) -> Path:
    target = OUT / name
    if target.exists():
        shutil.rmtree(target)
    subprocess.run(["git", "clone", "-q", "--no-local", str(repo), str(target)], check=True)
    return target


def flopwatch(repo: Path, name: str, db: Path, kind: str, *args: str, env_extra: dict | None = None) -> dict:
    """One flopwatch command with --json at default settings; its summary plus the command's
    wall time and the utilization sampled while it ran."""
    cmd = [sys.executable, "-m", "pipeline.cli", *args, "--json", "--repo", str(repo), "--db", str(db)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               RAY_USAGE_STATS_ENABLED="0", **(env_extra or {}))
    with UtilizationSampler(kind) as util:
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env, check=False)
        t1 = time.time()
    (OUT / f"{name}.log").write_text(proc.stderr)
    print(f"$ flopwatch {' '.join(args)}  ({name}: exit {proc.returncode}, {t1 - t0:.1f} s)", flush=True)
    try:
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        print(proc.stderr[-3000:])
        raise SystemExit(f"{name}: flopwatch printed no summary (exit {proc.returncode})") from None
    summary.update(exit=proc.returncode, command_wall_s=round(t1 - t0, 1), name=name, args=list(args),
                   started=t0, ended=t1, utilization=util.samples)
    (OUT / f"{name}.json").write_text(json.dumps(summary, indent=1, default=str))
    summary["_util"] = util
    return summary


def stored_results(db: Path, start: float, end: float) -> list[dict]:
    """Results a command stored (created within its window), with their phases and medians."""
    from pipeline.store import Store

    with Store(db) as store:
        rows = store.results(columns=("variant", "shape", "dtype", "status", "device", "phases", "median_s",
                                      "created_at"))
    return [r for r in rows if start <= r["created_at"] <= end]


def phase_totals(rows: list[dict]) -> dict[str, float]:
    """Each phase summed over the device's results (where the jobs' time went)."""
    totals: dict[str, float] = {}
    for r in rows:
        for k, v in (r.get("phases") or {}).items():
            if k.endswith("_s") and k != "queue_s":
                totals[k] = round(totals.get(k, 0.0) + float(v or 0.0), 1)
    return dict(sorted(totals.items()))


def jobs_window(results: list[dict]) -> tuple[float, float] | None:
    """From the first job's start to the last job's end, from the results' phase records: the
    child's own end mark where it has one (a variant's later shapes share their process's
    start, so their start plus their own phases would end too early), else its slot call's
    start plus its phases."""
    spans = []
    for r in results:
        p = r.get("phases") or {}
        if p.get("started_at"):
            busy = sum(float(v) for k, v in p.items() if k.endswith("_s") and k != "queue_s")
            spans.append((p["started_at"], max(p.get("ended_at") or 0.0, p["started_at"] + busy)))
    return (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None


def loop_gaps(rows: list[dict]) -> dict:
    """Between one timing loop and the next on the same device: what the GPU waits through
    that is not timed (the end of one job, the start of the next), from the children's epoch
    marks (`loop_began_at`, `loop_ended_at`); one device's rows at a time."""
    loops = sorted((p["loop_began_at"], p["loop_ended_at"]) for p in (r.get("phases") or {} for r in rows)
                   if p.get("loop_began_at") and p.get("loop_ended_at"))
    gaps = [max(0.0, b[0] - a[1]) for a, b in zip(loops, loops[1:])]
    if not gaps:
        return {}
    gaps.sort()
    return {"loops": len(loops), "in_loops_s": round(sum(e - b for b, e in loops), 2),
            "gaps_s": round(sum(gaps), 2), "gap_median_s": round(gaps[len(gaps) // 2], 3),
            "gap_max_s": round(gaps[-1], 3)}


def figures(s: dict, db: Path, kind: str, n_devices: int) -> dict:
    results = stored_results(db, s["started"], s["ended"])
    device_rows = [r for r in results if r["device"].startswith(kind)]
    timed = sum(float((r.get("phases") or {}).get("timing_s") or 0.0) for r in device_rows)
    window = jobs_window(device_rows)
    jobs_wall = s.get("jobs_wall_s") or ((window[1] - window[0]) if window else 0.0)
    util: UtilizationSampler = s["_util"]
    phases = (s.get("driver") or {}).get("phases", {})
    out = {"name": s["name"], "exit": s["exit"], "command_wall_s": s["command_wall_s"],
           "jobs_wall_s": round(jobs_wall, 1), "results": len(results), "device_results": len(device_rows),
           "timed_s": round(timed, 1),
           "timed_share": round(timed / (jobs_wall * n_devices), 3) if jobs_wall else None,
           "util_command": util.mean(), "util_jobs": util.mean(*window) if window else {},
           "driver_outside_jobs_s": round(sum(v for k, v in phases.items()
                                              if k not in ("builds_and_jobs", "paired")), 1),
           "driver": phases, "device_phases": phase_totals(device_rows),
           "loop_gaps": loop_gaps(device_rows) if n_devices == 1 else {},
           "jobs": [{k: r.get(k) for k in ("variant", "shape", "dtype", "status", "phases")} for r in device_rows],
           "medians": {f"{r['variant']} {r['shape']} {r['dtype']}": r["median_s"] for r in device_rows
                       if r["status"] == "ok" and r.get("median_s")}}
    if "rows" in s:  # a compare
        kinds: dict[str, int] = {}
        for r in s["rows"]:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        out.update(not_retimed=s.get("not_retimed"), verdicts=kinds, series=len(s["rows"]),
                   alarms=[(r["variant"], r["shape"], r["kind"]) for r in s["rows"] if r["kind"] in ("slower", "faster")])
    return out


def machine_kind() -> str:
    from workers.measure import device

    return device.gpu_kind() or "cpu"


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 0


def table_commands(kind: str, gpus: int | None, empty_store: bool) -> list[dict]:
    """The commands of the table on `gpus` GPUs (None: a CPU machine)."""
    suffix = f"_{gpus}gpu" if gpus else ""
    extra = ("--num-gpus", str(gpus)) if gpus else ()
    repo, shas = suite_repo(kind)
    shared = OUT / f"shared{suffix}.db"
    for p in OUT.glob(f"shared{suffix}.db*"):
        p.unlink()
    runs = []
    runs.append((flopwatch(repo, f"run_cold{suffix}", shared, kind, "run", shas["A"], *extra), shared))
    runs.append((flopwatch(repo, f"run{suffix}", shared, kind, "run", shas["A"], *extra), shared))
    clone = fresh_clone(repo, f"clone_b{suffix}")
    runs.append((flopwatch(clone, f"compare_readme{suffix}", shared, kind, "compare", shas["A"], shas["B"], *extra),
                 shared))
    # The same as the first command on a fresh runner: no flopwatch Ray up (a folder of heads
    # of its own, empty).
    clone, no_heads = fresh_clone(repo, f"clone_b_no_ray{suffix}"), OUT / f"no_heads{suffix}"
    shutil.rmtree(no_heads, ignore_errors=True)
    no_heads.mkdir(mode=0o700, parents=True)
    runs.append((flopwatch(clone, f"compare_readme_no_ray_up{suffix}", shared, kind, "compare", shas["A"],
                           shas["B"], *extra, env_extra={"FLOPWATCH_LOCAL_RAY_DIR": str(no_heads)}), shared))
    clone = fresh_clone(repo, f"clone_c{suffix}")
    runs.append((flopwatch(clone, f"compare_define{suffix}", shared, kind, "compare", shas["A"], shas["C"], *extra),
                 shared))
    if empty_store:
        empty = OUT / f"empty{suffix}.db"
        for p in OUT.glob(f"empty{suffix}.db*"):
            p.unlink()
        clone = fresh_clone(repo, f"clone_b_empty{suffix}")
        runs.append((flopwatch(clone, f"compare_readme_empty_store{suffix}", empty, kind, "compare", shas["A"],
                               shas["B"], *extra), empty))
    return [figures(s, db, kind, gpus or 1) for s, db in runs]


def print_table(rows: list[dict]) -> None:
    print(f"\n{'command':34} {'exit':>4} {'cmd wall':>9} {'jobs wall':>9} {'timed':>6} {'util cmd':>9} "
          f"{'util jobs':>9} {'outside':>8}  notes")
    for f in rows:
        share = f"{f['timed_share']:.0%}" if f["timed_share"] is not None else "—"
        uc = "/".join(f"{v:.0f}%" for v in f["util_command"].values()) or "—"
        uj = "/".join(f"{v:.0f}%" for v in f["util_jobs"].values()) or "—"
        notes = ""
        if "verdicts" in f:
            notes = (f"{f['not_retimed']}/{f['series']} not re-timed; "
                     + ", ".join(f"{k} {v}" for k, v in sorted(f["verdicts"].items()))
                     + (f"; alarms {f['alarms']}" if f["alarms"] else "; 0 alarms"))
        print(f"{f['name']:34} {f['exit']:>4} {f['command_wall_s']:>7.1f} s {f['jobs_wall_s']:>7.1f} s {share:>6} "
              f"{uc:>9} {uj:>9} {f['driver_outside_jobs_s']:>6.1f} s  {notes}")
    print("\ndriver phases (s):")
    for f in rows:
        print(f"  {f['name']:32} " + " ".join(f"{k}={v:.1f}" for k, v in f["driver"].items()))
    print("\njob phases on the device, summed (s):")
    for f in rows:
        if f.get("device_phases"):
            print(f"  {f['name']:32} " + " ".join(f"{k}={v:.1f}" for k, v in f["device_phases"].items()))
    print("\nbetween timing loops on the device (one job's end and the next one's start, untimed):")
    for f in rows:
        g = f.get("loop_gaps")
        if g:
            print(f"  {f['name']:32} {g['loops']} loops, {g['in_loops_s']:.1f} s in loops, {g['gaps_s']:.1f} s "
                  f"between (median {g['gap_median_s'] * 1e3:.0f} ms, largest {g['gap_max_s'] * 1e3:.0f} ms)")


# --ab NAME: a setting the driver reads, turned off for one `run A` and back on for another.
AB_SETTINGS = {"overlap": "FLOPWATCH_OVERLAP", "batch": "FLOPWATCH_BATCH", "warm": "FLOPWATCH_WARM_BESIDE_STEP",
               "context": "FLOPWATCH_SPARE_CONTEXT_LOCK"}
# Read by the slots' job processes, not the driver: their runs start a Ray of their own.
RUNNER_SETTINGS = {"context"}
# A setting whose "on" is not its default: the values of its off and on runs.
AB_VALUES = {"context": (("off", "0"), ("on", "1"))}


def setting_ab(kind: str, gpus: int, table: list[dict], name: str) -> list[dict]:
    """`run A` with one of the driver's settings off (`AB_SETTINGS`: the GPU slots' next-job
    overlap, a variant's shapes in one process), then on again: what it saves, and whether it
    moves a median. Both are read by the driver, so the kept Ray serves both runs. The table's
    cached run (on) is a third run, to tell run-to-run noise from an effect."""
    shas = json.loads((OUT / "shas.json").read_text())
    repo, db = OUT / "suite", OUT / f"shared_{gpus}gpu.db"
    rows = []
    for state, value in (("off", "0"), ("on", "")):
        s = flopwatch(repo, f"run_{name}_{state}_{gpus}gpu", db, kind, "run", shas["A"], "--num-gpus", str(gpus),
                      env_extra={AB_SETTINGS[name]: value})
        rows.append(figures(s, db, kind, gpus))
    print_table(rows)
    _medians_ab(rows, table, gpus, name)
    return rows


def _medians_ab(rows: list[dict], table: list[dict], gpus: int, what: str) -> None:
    off, on = rows[0]["medians"], rows[1]["medians"]
    cached = next((r["medians"] for r in table if r["name"] == f"run_{gpus}gpu"), {})
    print(f"\nmedians, {what} off vs on (and the table's cached run, on, vs this on: run-to-run noise):")
    print(f"  {'series':48} {'off ms':>10} {'on ms':>10} {'on/off':>8} {'on/on':>8}")
    for key in sorted(set(off) & set(on)):
        again = f"{100 * (on[key] / cached[key] - 1):+.2f}%" if key in cached else "—"
        print(f"  {key:48} {off[key] * 1e3:>10.4f} {on[key] * 1e3:>10.4f} {100 * (on[key] / off[key] - 1):+7.2f}% "
              f"{again:>8}")


def spare_ab(kind: str, gpus: int, table: list[dict]) -> list[dict]:
    """`run A` with spares off, then on, each on a private Ray the command starts and stops
    (FLOPWATCH_RAY_REUSE=0: the slots' runners take the setting at their start): what the
    spares save, and whether they move any median. The table's cached run (spares on) is a
    third run, to tell run-to-run noise from an effect."""
    shas = json.loads((OUT / "shas.json").read_text())
    repo, db = OUT / "suite", OUT / f"shared_{gpus}gpu.db"
    rows = []
    for name, spares in (("run_spares_off", "0"), ("run_spares_on", "")):
        s = flopwatch(repo, f"{name}_{gpus}gpu", db, kind, "run", shas["A"], "--num-gpus", str(gpus),
                      env_extra={"FLOPWATCH_RAY_REUSE": "0", "FLOPWATCH_SPARE": spares})
        rows.append(figures(s, db, kind, gpus))
    print_table(rows)
    _medians_ab(rows, table, gpus, "spares")
    return rows


# -- multi-GPU verification (UUIDs, busy/wall, broken set beside good variants) ----------------

def _rates(s: dict) -> dict:
    return {(r["variant"], r["shape"], r["dtype"]): r["rate"] for r in s["results"]
            if r["status"] == "ok" and r.get("rate") and r["device"].startswith("cuda")}


def gpu_verify(args) -> None:
    """Two GPUs (or --gpus N): two UUIDs in one run, the broken CUDA set beside the good variants."""
    kind = machine_kind()
    repo, shas = suite_repo(kind, extra=("tests/broken_kernels_cuda",))
    n = args.gpus[0] if args.gpus and args.gpus[0] != "all" else max(gpu_count(), 1)
    db = OUT / "verify.db"
    flopwatch(repo, f"cold_{n}gpu", db, kind, "run", shas["A"], "--num-gpus", str(n))
    many = flopwatch(repo, f"warm_{n}gpu", db, kind, "run", shas["A"], "--num-gpus", str(n))
    broken = flopwatch(repo, f"broken_plus_good_{n}gpu", db, kind, "run", shas["A"], "--num-gpus", str(n),
                       "--kernels", "kernels", "--kernels", "tests/broken_kernels_cuda")
    print(f"\nUUIDs in one run ({many['name']}): {sorted({d['uuid'] for d in many.get('devices', []) if d.get('uuid')})}")
    print(f"\nbroken CUDA set beside the good variants ({broken['name']}, exit {broken['exit']}):")
    broken_names = {p.name for p in (ROOT / "tests/broken_kernels_cuda/gemm").iterdir()}
    for r in broken["results"]:
        if r["variant"] in broken_names:
            print(f"  {r['variant']:24} {r['status']:10} {r['diagnostic'][:150]}")
    clean, mixed = _rates(many), _rates(broken)
    diffs = [abs(mixed[k] - clean[k]) / clean[k] * 100 for k in clean if k in mixed]
    if diffs:
        print(f"good variants within 1%: {sum(d <= 1.0 for d in diffs)} of {len(diffs)}; largest |diff| {max(diffs):.2f}%")
    runs = [many, broken]
    if n >= 2:
        # One GPU made slower on purpose: a bf16 GEMM loop of its own on the last GPU while a run
        # goes. The peer check must flag that GPU (by UUID) and no other.
        target = gpu_uuids()[n - 1]
        with co_running_load(n - 1):
            runs.append(flopwatch(repo, f"one_gpu_loaded_{n}gpu", db, kind, "run", shas["A"], "--num-gpus", str(n)))
        print(f"\nGPU loaded on purpose: index {n - 1}, {target}")
    for s in runs:
        flagged = (s.get("peer_check") or {}).get("flagged", [])
        print(f"peer check in {s['name']}: {len(flagged)} device(s) flagged "
              + "; ".join(f"{f['slot']} ({f['uuid']}) {f['off_pct']}%" for f in flagged))
    if n >= 2:
        flagged = {f["uuid"] for f in (runs[-1].get("peer_check") or {}).get("flagged", [])}
        healthy = [f for s in runs[:2] for f in (s.get("peer_check") or {}).get("flagged", [])]
        print(f"slowed GPU flagged: {'yes' if flagged == {target} else 'NO'} (flagged {sorted(flagged)}); "
              f"healthy runs flag nothing: {'yes' if not healthy else 'NO'}")


LOAD = """
import torch
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
while True:
    y = x @ x
    torch.cuda.synchronize()
"""


class co_running_load:
    """A process of its own keeping one GPU busy (CUDA_VISIBLE_DEVICES picks it) for the block."""

    def __init__(self, index: int):
        self.index = index

    def __enter__(self):
        # PCI order, as nvidia-smi numbers the GPUs whose UUIDs are compared
        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=str(self.index))
        self.proc = subprocess.Popen([sys.executable, "-c", LOAD], env=env)
        time.sleep(5)  # its context and first launches are up before the run starts
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()


def gpu_uuids() -> list[str]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


# -- scaling: one warm `run A` per GPU count, the planner held against them, a hogged GPU ------

def scaling(counts: list[int]) -> dict:
    """`run A` at default settings on each GPU count (builds cached, flopwatch's local Ray for that
    count up and its slots warm: a small run just before), each with nvidia-smi per GPU; then
    `flopwatch plan` from each run's records, held against the other counts measured."""
    kind = machine_kind()
    repo, shas = suite_repo(kind)
    db = OUT / "scaling.db"
    for p in OUT.glob("scaling.db*"):
        p.unlink()
    most = max(counts)
    flopwatch(repo, f"run_cold_{most}gpu", db, kind, "run", shas["A"], "--num-gpus", str(most))
    runs: dict = {}
    for n in counts:
        # Every count's run in the same state: its kept local Ray started, slots, probes and the
        # slots' prepared job processes up (a slot drops them after 30 s idle), by a small run.
        flopwatch(repo, f"start_{n}gpu", db, kind, "run", shas["A"], "--num-gpus", str(n),
                  "--variant", "torch_ref", "--no-report")
        runs[n] = flopwatch(repo, f"run_{n}gpu", db, kind, "run", shas["A"], "--num-gpus", str(n))
    rows = [scaling_row(runs[n], n) for n in counts]
    plans = {}
    for n in counts:
        others = [str(runs[m]["run_id"]) for m in counts if m != n]
        plans[n] = plan_json(db, runs[n]["run_id"], others)
        # Independent of the runs it is held against: the growth per GPU not learned from them.
        plans[f"{n} (default growth)"] = plan_json(db, runs[n]["run_id"], others, default_growth=True)
    out = {"rows": rows, "plans": plans}
    (OUT / "scaling.json").write_text(json.dumps(out, indent=1, default=str))
    keep_runs(runs, "runs.json")
    print_scaling(out, counts)
    out["_runs"] = runs
    return out


def scaling_ab(n: int, names: list[str], table_run: dict) -> list[dict]:
    """After `scaling`, on the most GPUs: `run A` with each setting of `names` off, then on
    (`AB_SETTINGS`): its device work, phases and preparations beside the table's run (on), and
    every series' median off vs on and on vs the table's run (run-to-run noise)."""
    kind, repo, db = machine_kind(), OUT / "suite", OUT / "scaling.db"
    shas = json.loads((OUT / "shas.json").read_text())
    table = [{"name": f"run_{n}gpu", "medians": figures(table_run, db, kind, n)["medians"]}]
    out = []
    for name in names:
        rows, medians = [], []
        for state, value in AB_VALUES.get(name, (("off", "0"), ("on", ""))):
            env = {AB_SETTINGS[name]: value}
            if name in RUNNER_SETTINGS:  # the slots' processes read it at their start: a Ray of the command's own
                env["FLOPWATCH_RAY_REUSE"] = "0"
            s = flopwatch(repo, f"run_{name}_{state}_{n}gpu", db, kind, "run", shas["A"], "--num-gpus", str(n),
                          env_extra=env)
            rows.append({**scaling_row(s, n), "name": f"{name} {state}"})
            medians.append({"medians": figures(s, db, kind, n)["medians"]})
        print(f"\n{name} ({AB_SETTINGS[name]}) off / on, {n} GPUs:")
        for r in rows:
            print(f"  {r['name']:>12}: command {r['command_wall_s']:.1f} s, jobs wall {r['jobs_wall_s'] or 0:.1f} s, "
                  f"device work {r['device_work_s']:.1f} s: " +
                  " ".join(f"{k}={v:.1f}" for k, v in r["device_phases"].items()))
            print("               prepared ahead: " + " ".join(f"{k}={v:.1f}" for k, v in r["prepared_ahead"].items()))
        _medians_ab(medians, table, n, name)
        out += rows
    (OUT / "scaling_ab.json").write_text(json.dumps(out, indent=1, default=str))
    return out


def scaling_again(counts: list[int], threads: int | None = None) -> dict:
    """After `--scaling` in the same OUT: each count's measured run once more, the counts in the
    reverse order, each after its small run. Every run adds rows to the store that the next
    run's report reads, so the first pass favours the counts measured first; the two passes
    together measure each count once early and once late. `threads`: every job gets that many
    host threads (`--threads`) instead of the node's cores over its GPUs."""
    kind = machine_kind()
    repo, shas, db = OUT / "suite", json.loads((OUT / "shas.json").read_text()), OUT / "scaling.db"
    extra = ["--threads", str(threads)] if threads else []
    tag = f"threads{threads}" if threads else "again"
    runs = {}
    for n in sorted(counts, reverse=True):
        flopwatch(repo, f"start_{n}gpu_{tag}", db, kind, "run", shas["A"], "--num-gpus", str(n),
                  "--variant", "torch_ref", "--no-report", *extra)
        runs[n] = flopwatch(repo, f"run_{n}gpu_{tag}", db, kind, "run", shas["A"], "--num-gpus", str(n), *extra)
    rows = [scaling_row(runs[n], n) for n in counts]
    plans = {n: plan_json(db, runs[n]["run_id"], [str(runs[m]["run_id"]) for m in counts if m != n]) for n in counts}
    out = {"rows": rows, "plans": plans, "threads": threads}
    (OUT / f"scaling_{tag}.json").write_text(json.dumps(out, indent=1, default=str))
    keep_runs(runs, f"runs_{tag}.json")
    print_scaling(out, counts)
    return out


def scaling_row(s: dict, n: int) -> dict:
    """The issue's table for one GPU count: command and jobs wall, GPU jobs per slot, slot busy
    over its wall, nvidia-smi per GPU over the jobs window (Ray gives a local Ray of n GPUs the
    first n), the lower bound and the peer check."""
    util: UtilizationSampler = s["_util"]
    rows = [d for d in s.get("devices", []) if d["slot"].startswith("cuda")]
    window = jobs_window([r for r in s["results"] if r["device"].startswith("cuda")])
    jobs_util = util.mean(*window) if window else util.mean()
    return {"gpus": n, "run_id": s["run_id"], "exit": s["exit"], "command_wall_s": s["command_wall_s"],
            "jobs_wall_s": s.get("jobs_wall_s"), "bounds": s.get("bounds", {}),
            "slots": [{k: d.get(k) for k in ("slot", "uuid", "jobs", "calls", "busy_s", "wall_s", "busy_pct")}
                      for d in rows],
            "util_jobs": {i: jobs_util.get(i) for i in range(n)}, "util_command": util.mean(),
            "gpu_results": sum(1 for r in s["results"] if r["device"].startswith("cuda") and r["status"] == "ok"),
            "peer_check": s.get("peer_check", {}), "driver": (s.get("driver") or {}).get("phases", {}),
            # The device work: every GPU slot's busy time (its jobs' load, checks, warm-up and
            # sampling, overlaps counted once), summed; and where it went, phase by phase.
            "device_work_s": round(sum(d.get("busy_s") or 0.0 for d in rows), 2),
            "device_phases": phase_totals([r for r in s["results"] if r["device"].startswith("cuda")]),
            # What preparing the jobs' processes ahead cost (`child.PREPARED_AHEAD`): the device
            # lock waited for and held, the driver's start outside it, summed.
            "prepared_ahead": prepared_ahead([r for r in s["results"] if r["device"].startswith("cuda")])}


def prepared_ahead(rows: list[dict]) -> dict:
    return phase_totals([{"phases": (r.get("phases") or {}).get("prepared_ahead") or {}} for r in rows])


def keep_runs(runs: dict, name: str) -> None:
    """Every run's summary and every result's phases (`condense_runs.py`), beside the table."""
    from condense_runs import condense

    (OUT / name).write_text(json.dumps({f"{n}gpu": condense(r) for n, r in runs.items()}, indent=1, default=str))


def plan_json(db: Path, run_id: int, checks: list[str], default_growth: bool = False) -> dict:
    """`flopwatch plan --json` from one run, held against the others. `default_growth`: with the
    planner's default concurrency growth, not one learned from the runs it is held against."""
    cmd = [sys.executable, "-m", "pipeline.cli", "plan", "--db", str(db), "--run", str(run_id),
           "--gpus", "1,2,4,8", "--gpus", "2x8,4x8", "--json", *[a for c in checks for a in ("--check", c)],
           *(["--default-growth"] if default_growth else [])]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    print(f"$ flopwatch plan --run {run_id} {' '.join('--check ' + c for c in checks)}  (exit {proc.returncode}, "
          f"{time.time() - t0:.1f} s)", flush=True)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def hog() -> dict:
    """`run A` on every GPU with a bf16 GEMM loop of its own on the last one: the peer check must
    flag that GPU and no other. After `--scaling` in the same OUT it reuses its suite, build cache
    and store, and its run on every GPU is the healthy one; else it builds and runs that first."""
    kind, n = machine_kind(), max(gpu_count(), 1)
    db = OUT / "scaling.db"
    before = json.loads((OUT / "scaling.json").read_text()) if (OUT / "scaling.json").exists() else {}
    healthy = [r for r in before.get("rows", []) if r["gpus"] == n]
    if healthy and (OUT / "shas.json").exists():
        repo, shas = OUT / "suite", json.loads((OUT / "shas.json").read_text())
    else:
        repo, shas = suite_repo(kind)
        flopwatch(repo, f"run_cold_{n}gpu", db, kind, "run", shas["A"], "--num-gpus", str(n))
        healthy = [scaling_row(flopwatch(repo, f"run_{n}gpu", db, kind, "run", shas["A"], "--num-gpus", str(n)), n)]
    target = gpu_uuids()[n - 1]
    with co_running_load(n - 1):
        s = flopwatch(repo, f"run_hogged_{n}gpu", db, kind, "run", shas["A"], "--num-gpus", str(n))
    flagged = sorted({f["uuid"] for f in (s.get("peer_check") or {}).get("flagged", [])})
    out = {"target_index": n - 1, "target_uuid": target, "flagged": flagged,
           "checks": (s.get("peer_check") or {}).get("checks", []), "command_wall_s": s["command_wall_s"],
           "healthy_flagged": [f for h in healthy for f in (h.get("peer_check") or {}).get("flagged", [])],
           "healthy_checks": [c for h in healthy for c in (h.get("peer_check") or {}).get("checks", [])],
           "retimes": sum(d.get("jobs", 0) for d in s.get("devices", []) if d["slot"].startswith("cuda"))
           - sum(1 for r in s["results"] if r["device"].startswith("cuda") and r.get("phases"))}
    (OUT / "hog.json").write_text(json.dumps(out, indent=1, default=str))
    print(f"\nhogged GPU {out['target_index']} ({target}): flagged {flagged} -> "
          f"{'only it' if flagged == [target] else 'NOT only it'}; healthy run flagged "
          f"{len(out['healthy_flagged'])}; {out['retimes']} peer re-time(s); run {out['command_wall_s']:.1f} s")
    for label, checks in (("hogged", out["checks"]), ("healthy", out["healthy_checks"])):
        for c in checks:
            print(f"  {label}: {c['variant']} {c['shape']} {c['dtype']}: " + "; ".join(
                f"{d['slot']} {d['uuid']} median {d['median_s']} s, {d['off_pct']:+.2f}%"
                f"{' FLAGGED' if d['flagged'] else ''}" for d in c["devices"] if d["off_pct"] is not None))
    return out


def print_scaling(out: dict, counts: list[int]) -> None:
    rows = {r["gpus"]: r for r in out["rows"]}
    base = rows[min(counts)]["command_wall_s"]
    print(f"\n{'GPUs':>4} {'exit':>4} {'command':>9} {'speed-up':>8} {'jobs wall':>9} {'bound':>7} {'jobs per GPU':>14} "
          f"{'calls':>9} {'slot busy':>16} {'nvidia-smi in jobs':>20}")
    for n in counts:
        r = rows[n]
        b = r["bounds"].get("cuda", {})
        per = "/".join(str(d["jobs"]) for d in r["slots"])
        calls = "/".join(str(d.get("calls")) for d in r["slots"])
        busy = "/".join(f"{d['busy_pct']:.1f}%" for d in r["slots"] if d.get("busy_pct") is not None)
        util = "/".join(f"{v:.0f}%" if v is not None else "—" for v in r["util_jobs"].values())
        print(f"{n:>4} {r['exit']:>4} {r['command_wall_s']:>7.1f} s {base / r['command_wall_s']:>7.2f}× "
              f"{r['jobs_wall_s'] or 0:>7.1f} s {b.get('bound_s', 0):>5.1f} s {per:>14} {calls:>9} {busy:>16} {util:>20}")
        base_work = rows[min(counts)].get("device_work_s") or 0.0
        if r.get("device_work_s"):
            growth = f" ({100 * (r['device_work_s'] / base_work - 1):+.1f}%)" if base_work and n != min(counts) else ""
            print(f"     device work {r['device_work_s']:.1f} s{growth}: " +
                  " ".join(f"{k}={v:.1f}" for k, v in r.get("device_phases", {}).items()))
            if r.get("prepared_ahead"):
                print("     processes prepared ahead: " +
                      " ".join(f"{k}={v:.1f}" for k, v in r["prepared_ahead"].items()))
        flagged = r["peer_check"].get("flagged", [])
        checks = r["peer_check"].get("checks", [])
        if checks:
            print(f"     peer check: {len(checks)} check(s), " + "; ".join(
                f"{d['slot']} {d['off_pct']:+.2f}%" for c in checks for d in c["devices"] if d["off_pct"] is not None)
                + f"; flagged {len(flagged)}")
    print("\nplanner (predicted command wall / jobs wall per machine; measured runs beside):")
    for n, plan in out["plans"].items():
        if "error" in plan:
            print(f"  from the {n}-GPU run: error {plan['error']}")
            continue
        preds = ", ".join(f"{p['nodes']}x{p['gpus_per_node']}: {p['command_s']:.1f}/{p['jobs_wall_s']:.1f} s"
                          + (f" (split {','.join(p['split'])})" if p["split"] else "") for p in plan["predictions"])
        growth = (f", non-sampling +{100 * plan['growth_per_gpu']:.1f}% per extra GPU ({plan['growth_source']})"
                  if "growth_per_gpu" in plan else "")
        print(f"  from the {n}-GPU run {plan['run_id']} ({plan['call_overhead_s']:.3f} s untimed per call, "
              f"{plan['outside_s']:.1f} s outside the jobs{growth}): {preds}")
        for c in plan["checks"]:
            print(f"    vs run {c['run_id']} on {c['slots']} GPU(s): command {c['command_s']:.1f} s predicted "
                  f"{c['predicted_command_s']:.1f} s ({c['command_error_pct']:+.1f}%), jobs wall {c['jobs_wall_s']:.1f} s "
                  f"predicted {c['predicted_jobs_wall_s']:.1f} s ({c['jobs_error_pct']:+.1f}%)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", action="append", help="GPU count to run the table on (repeatable; 'all'); "
                                                   "default: all GPUs of the machine")
    p.add_argument("--gpu-verify", action="store_true", help="the multi-GPU verification instead of the table")
    p.add_argument("--scaling", action="store_true",
                   help="instead of the table: `run A` once per --gpus count (warm), `flopwatch plan` held against them")
    p.add_argument("--scaling-again", action="store_true",
                   help="after --scaling in the same OUT: each count's run again, in the reverse order")
    p.add_argument("--scaling-threads", type=int, metavar="N",
                   help="after --scaling in the same OUT: each count's run again with --threads N")
    p.add_argument("--hog", action="store_true",
                   help="instead of the table: `run A` on every GPU with the last one loaded on purpose (the peer check)")
    p.add_argument("--empty-store", action="store_true",
                   help="also compare A B in a fresh clone with an empty store (unchanged series are not timed)")
    p.add_argument("--ops", default="", help="only these ops of the bundled suite, comma-separated "
                                             "(e.g. gemm,copy: the suite of issue 15's table); default all")
    p.add_argument("--spare-ab", action="store_true",
                   help="after the table, `run A` with the slots' spare processes off and on (GPU machines)")
    p.add_argument("--ab", action="append", choices=sorted(AB_SETTINGS), default=[],
                   help="after the table, `run A` with this setting off and on (GPU machines; repeatable): "
                        "overlap = a GPU slot's next job starting as the one before has timed, batch = a "
                        "variant's shapes in one process")
    args = p.parse_args()
    OPS[:] = [op for op in args.ops.split(",") if op]
    OUT.mkdir(parents=True, exist_ok=True)
    if args.gpu_verify:
        gpu_verify(args)
        return
    if args.scaling or args.scaling_again or args.scaling_threads:
        total = max(gpu_count(), 1)
        counts = sorted({total if g == "all" else int(g) for g in (args.gpus or ["1", "all"])})
        if args.scaling_threads:
            scaling_again(counts, threads=args.scaling_threads)
        elif args.scaling_again:
            scaling_again(counts)
        else:
            out = scaling(counts)
            if args.ab:
                scaling_ab(max(counts), args.ab, out["_runs"][max(counts)])
        return
    if args.hog:
        hog()
        return
    kind = machine_kind()
    counts: list[int | None] = [None]
    if kind != "cpu":
        total = max(gpu_count(), 1)
        counts = sorted({total if g == "all" else int(g) for g in (args.gpus or ["all"])})
    rows = []
    for n in counts:
        rows += table_commands(kind, n, args.empty_store)
    (OUT / "figures.json").write_text(json.dumps(rows, indent=1))
    print(f"\nmachine: {kind}, GPU counts {counts}; suite: {', '.join(OPS) or 'all ops'}; OUT {OUT}")
    print_table(rows)
    extra = []
    if args.spare_ab and kind != "cpu":
        extra += spare_ab(kind, counts[0], rows)
    for name in args.ab if kind != "cpu" else []:
        extra += setting_ab(kind, counts[0], rows, name)
    if extra:
        (OUT / "figures.json").write_text(json.dumps(rows + extra, indent=1))


if __name__ == "__main__":
    main()
