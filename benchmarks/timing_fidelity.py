"""Does the adaptive GPU timing rule lose fidelity? Two checks on one NVIDIA GPU, one session:

1. Same medians. `flopwatch run` of the bundled suite (default settings) builds every variant;
   then, in one process on the same GPU, every series that ran `ok` is timed by both rules
   (`workers.measure.timing`, method "fixed": ≥ 1 s warm-up, ≥ 50 samples, batches of 10; method
   "adaptive": the default) in alternating order, `--rounds` rounds each (two for a kernel whose
   fixed round takes over 3 s: its rounds agree within 0.1%; one over 15 s). With
   `--noisy-rounds N`, a series whose *fixed* rule disagreed with itself by more than 1% over
   those rounds (a power-capped kernel that sits in one of two clock states for seconds at a
   time) goes on to N rounds: the choice looks at the old rule's own spread only, never at the
   difference between the rules. Reported: each rule's median of its round medians, the
   difference, the paired estimate (the median of each round's adaptive/fixed) with its 95%
   interval, how far each rule's own rounds were apart, and the time each rule spent; every
   sample of every round goes to fidelity_raw.json. Target: every series within 0.5%.
2. A planted 1% slowdown is still caught. Commit P launches a one-thread spin kernel before
   `cuda_wmma`'s GEMM, calibrated to 1% of its median at 4096³ in the run above
   (`benchmarks/gpu_noise.py`'s plant). `flopwatch compare A P --all` (every series timed at
   both commits) must say `slower` for cuda_wmma 4096³ and raise no false alarm elsewhere;
   `flopwatch compare A P` (default: unchanged series not re-timed) must say `slower` too.

    OUT=/some/folder python3 benchmarks/timing_fidelity.py [--rounds 2] [--skip-planted]
    OUT=/same/folder python3 benchmarks/timing_fidelity.py --reuse   # after throughput.py there:
        its suite repository, build cache and the run of A in shared_1gpu.db, nothing rebuilt

Full outputs under OUT (fidelity.json, the commands' JSON and logs); a short table last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import throughput  # noqa: E402  (the suite repository and the command runner)

OUT = throughput.OUT
SLOW_ROUND_S = 15.0
LONG_ROUND_S = 3.0
# A series whose fixed rule's own round medians spread more than this gets `--noisy-rounds`.
NOISY_SPREAD_PCT = 1.0
PLANTED = ("cuda_wmma", "M=4096,N=4096,K=4096")


def ok_gpu_series(db: Path, sha: str) -> list[dict]:
    """The newest ok result of each GPU series of `sha` (a store holds several runs of it)."""
    from pipeline.store import Store

    with Store(db) as store:
        rows = store.results(columns=("variant", "shape", "dtype", "device", "build_hash", "median_s", "device_info"),
                             commit_sha=sha, status="ok")
    newest = {(r["variant"], r["shape"], r["dtype"]): r for r in rows if r["device"].startswith("cuda")}
    return list(newest.values())


def fidelity_worker(spec_path: str) -> int:
    """In this one process: each series timed by both rules, alternating."""
    import torch

    from pipeline.project.config import load_config
    from pipeline.project.discovery import discover
    from workers import bindings
    from workers.core.records import Shape
    from workers.job.child import generator
    from workers.measure import device
    from workers.measure.timing import TimingSettings, time_gpu
    from workers.ops import get_op, torch_dtype

    spec = json.loads(Path(spec_path).read_text())
    root = Path(spec["checkout"])
    variants = {v.name: v for v in discover(root, load_config(root))[0]}
    torch.cuda.set_device(0)
    flush_bytes = device.flush_bytes(device.info("cuda"))
    out = []
    for s in spec["series"]:
        v = variants[s["variant"]]
        op, dims = get_op(v.op), Shape.from_key(s["shape"]).dims
        dtype = torch_dtype(s["dtype"])
        call = bindings.load(v, Path(s["artifact"]), op, "cuda", dims)
        inputs = op.make_inputs(dims, dtype, v.layout, "cuda", generator(7, "cuda"))
        out_t = torch.empty(op.output_shape(dims), dtype=torch_dtype(v.output_dtype or op.output_dtype(s["dtype"])),
                            device="cuda")

        def timed() -> None:
            call(inputs, out_t)

        t0 = time.perf_counter()
        for _ in range(2):  # what the correctness check does before timing
            timed()
        torch.cuda.synchronize()
        warmed = time.perf_counter() - t0
        rules = {"fixed": TimingSettings(budget_s=spec["budget_s"], method="fixed"),
                 "adaptive": TimingSettings(budget_s=spec["budget_s"])}
        if spec.get("settled_s"):
            # The reference both are held against: the adaptive machinery sampling for
            # `settled_s` seconds whatever its CI says, so the power cap's clock oscillation
            # (docs/benchmarks.md, gpu_settling.py) is averaged over, not caught in one phase.
            rules["settled"] = TimingSettings(budget_s=spec["settled_s"], min_sampling_s=spec["settled_s"],
                                              max_samples=1_000_000, target_rel_ci=1e-9)
        rounds: dict[str, list] = {name: [] for name in rules}
        r = 0
        while r < spec["rounds"] or (r < spec.get("noisy_rounds", 0) and spread_pct(rounds["fixed"]) > NOISY_SPREAD_PCT):
            order = tuple(rules) if r % 2 == 0 else tuple(reversed(rules))
            for method in order:
                started, at = time.perf_counter(), time.time()
                t = time_gpu(timed, rules[method], flush_bytes, warmed_s=warmed if method != "fixed" else 0.0)
                rounds[method].append({"median_s": t.median_s, "n": len(t.samples_s),
                                       "seconds": time.perf_counter() - started, "at": at,
                                       "stop": t.stop_reason, "batch": t.batch, "warmup_s": t.warmup_s,
                                       "warmup_reason": t.warmup_reason,
                                       "samples_us": [round(x * 1e6, 2) for x in t.samples_s]})
            if r == 0 and rounds["fixed"][0]["seconds"] > SLOW_ROUND_S:
                break
            # A long kernel's rounds agree within 0.1% (docs/benchmarks.md): two are enough, and
            # the fixed rule's take seconds each. More rounds go to the short, clock-bound ones.
            if r == 1 and rounds["fixed"][0]["seconds"] > LONG_ROUND_S:
                break
            r += 1
        out.append({**s, "rounds": rounds})
        print(f"{s['variant']} {s['shape']}: " + ", ".join(
            f"{name} {[round(x['median_s'] * 1e3, 4) for x in got]} ms" for name, got in rounds.items()), flush=True)
    Path(spec["out"]).write_text(json.dumps(out, indent=1))
    return 0


def spread_pct(rounds: list[dict]) -> float:
    """How far apart a rule's own round medians are, in per cent of the lowest."""
    medians = [x["median_s"] for x in rounds]
    return (max(medians) / min(medians) - 1) * 100 if medians else 0.0


def fidelity(repo: Path, shas: dict, db: Path, rounds: int, longest_s: float, settled_s: float = 0.0,
             noisy_rounds: int = 0, variants: tuple[str, ...] = ()) -> list[dict]:
    series = [r for r in ok_gpu_series(db, shas["A"])
              if r["median_s"] <= longest_s and (not variants or r["variant"] in variants)]
    cache = repo / ".flopwatch" / "cache" / "builds"
    spec = {"checkout": str(repo / ".flopwatch" / "checkouts" / shas["A"]), "rounds": rounds, "budget_s": 2.0,
            "noisy_rounds": noisy_rounds,
            "settled_s": settled_s,
            "out": str(OUT / "fidelity_raw.json"),
            "series": [{"variant": r["variant"], "shape": r["shape"], "dtype": r["dtype"],
                        "artifact": str(cache / r["build_hash"] / "artifact")} for r in series]}
    (OUT / "fidelity_spec.json").write_text(json.dumps(spec, indent=1))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, str(HERE / "timing_fidelity.py"), "--worker", str(OUT / "fidelity_spec.json")],
                   cwd=ROOT, env=env, check=True)
    return rows_of(json.loads((OUT / "fidelity_raw.json").read_text()))


def rows_of(raw: list[dict]) -> list[dict]:
    """One row per series from the worker's rounds (fidelity_raw.json): each rule's median of
    its round medians, and the paired estimate — the median over rounds of adaptive/fixed of the
    same round, the two timed back to back (the GPU's slow drifts, a power-capped kernel's
    multi-second clock states, cancel within a pair)."""
    from workers.measure.stats import median_ci

    rows = []
    for s in raw:
        ratios = [(a["median_s"] / f["median_s"] - 1) * 100 for a, f in zip(s["rounds"]["adaptive"], s["rounds"]["fixed"])]
        fixed = statistics.median(x["median_s"] for x in s["rounds"]["fixed"])
        adaptive = statistics.median(x["median_s"] for x in s["rounds"]["adaptive"])
        rows.append({"variant": s["variant"], "shape": s["shape"], "dtype": s["dtype"], "fixed_ms": fixed * 1e3,
                     "adaptive_ms": adaptive * 1e3, "diff_pct": (adaptive / fixed - 1) * 100,
                     # the old rule against itself: how far apart its own rounds were
                     "fixed_spread_pct": spread_pct(s["rounds"]["fixed"]),
                     "adaptive_spread_pct": spread_pct(s["rounds"]["adaptive"]),
                     # 95% interval of the paired estimate (order statistics; the range below 6 rounds)
                     "paired_ci_pct": median_ci(ratios),
                     "rounds": len(s["rounds"]["adaptive"]),
                     "fixed_s": statistics.fmean(x["seconds"] for x in s["rounds"]["fixed"]),
                     "adaptive_s": statistics.fmean(x["seconds"] for x in s["rounds"]["adaptive"]),
                     "adaptive_n": statistics.median(x["n"] for x in s["rounds"]["adaptive"]),
                     "fixed_n": statistics.median(x["n"] for x in s["rounds"]["fixed"]),
                     "adaptive_batch": s["rounds"]["adaptive"][0]["batch"],
                     "paired_pct": statistics.median(ratios)})
        if s["rounds"].get("settled"):
            settled = statistics.median(x["median_s"] for x in s["rounds"]["settled"])
            rows[-1].update(settled_ms=settled * 1e3, fixed_vs_settled_pct=(fixed / settled - 1) * 100,
                            adaptive_vs_settled_pct=(adaptive / settled - 1) * 100)
    return rows


def planted(repo: Path, shas: dict, db: Path, default_only: bool = False) -> list[dict]:
    """Commit P (1% spin before cuda_wmma) and the two compares."""
    import gpu_noise

    base = next((r for r in ok_gpu_series(db, shas["A"]) if (r["variant"], r["shape"]) == PLANTED), None)
    if base is None:
        raise SystemExit(f"{PLANTED} did not run ok at A: nothing to plant against")
    cycles = gpu_noise.spin_cycles(base["median_s"], 0.01, gpu_noise._sm_clock_mhz(_AsResult(base)))
    throughput.git(repo, "checkout", "-q", shas["A"], "-b", "planted")
    path = repo / "kernels" / gpu_noise.PLANT_TARGETS["cuda_wmma"]
    path.write_text(gpu_noise.plant_source(path.read_text(), "gemm_cuda_wmma", cycles))
    throughput.git(repo, "commit", "-qam", "cuda_wmma: a 1% spin before the GEMM")
    shas["P"] = throughput.git(repo, "rev-parse", "HEAD")
    throughput.git(repo, "checkout", "-q", "main")
    out = []
    compares = (("planted_all", ("--all",)), ("planted_default", ()))
    for name, extra in compares[1:] if default_only else compares:
        s = throughput.flopwatch(repo, name, db, "cuda", "compare", shas["A"], shas["P"], *extra)
        rows = [r for r in s["rows"] if r["device"].startswith("cuda")]
        hit = [r for r in rows if (r["variant"], r["shape"]) == PLANTED]
        others = [r for r in rows if (r["variant"], r["shape"]) != PLANTED and r["variant"] != "cuda_wmma"]
        out.append({"name": name, "exit": s["exit"], "command_wall_s": s["command_wall_s"], "cycles": cycles,
                    "planted": [(r["kind"], (r.get("comparison") or {}).get("change")) for r in hit],
                    "false_alarms": [(r["variant"], r["shape"], r["kind"]) for r in others
                                     if r["kind"] in ("slower", "faster")],
                    "timed_others": sum(not r["note"] for r in others), "others": len(others)})
    return out


class _AsResult:
    """gpu_noise._sm_clock_mhz reads `device_info` of a Result; a stored row has the same field."""

    def __init__(self, row: dict):
        self.device_info = row.get("device_info") or {}


def ci(row: dict) -> str:
    lo, hi = row.get("paired_ci_pct") or (float("nan"), float("nan"))
    return f"[{lo:+.2f}, {hi:+.2f}]%"


def print_rows(rows: list[dict]) -> None:
    """diff: the rules' medians of their round medians; paired: the median of each round's
    adaptive/fixed (`rows_of`); vs itself: how far apart a rule's own rounds were."""
    print(f"\n{'variant':22} {'shape':24} {'dtype':5} {'fixed ms':>10} {'adaptive ms':>11} {'diff':>7} "
          f"{'paired':>7} {'paired 95% CI':>17} {'fixed vs itself':>15} {'adapt vs itself':>15} {'rounds':>6} {'fixed s':>7} "
          f"{'adapt s':>7} {'n fixed':>7} {'n adapt':>7} {'batch':>5}")
    for r in rows:
        print(f"{r['variant']:22} {r['shape']:24} {r['dtype']:5} {r['fixed_ms']:>10.4f} {r['adaptive_ms']:>11.4f} "
              f"{r['diff_pct']:>+6.2f}% {r['paired_pct']:>+6.2f}% {ci(r):>17} {r['fixed_spread_pct']:>14.2f}% "
              f"{r['adaptive_spread_pct']:>14.2f}% {r['rounds']:>6} {r['fixed_s']:>7.2f} {r['adaptive_s']:>7.2f} "
              f"{r['fixed_n']:>7.0f} {r['adaptive_n']:>7.0f} {r['adaptive_batch']:>5}")
    if rows:
        for key, what in (("diff_pct", "within 0.5%"), ("paired_pct", "paired within 0.5%")):
            worst = max(rows, key=lambda r: abs(r[key]))
            print(f"{what}: {sum(abs(r[key]) <= 0.5 for r in rows)} of {len(rows)}; largest "
                  f"{worst[key]:+.2f}% ({worst['variant']} {worst['shape']})")
        print(f"time per round: fixed {sum(r['fixed_s'] for r in rows):.1f} s, adaptive "
              f"{sum(r['adaptive_s'] for r in rows):.1f} s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--variants", default="", help="only these variants' series (comma-separated)")
    p.add_argument("--noisy-rounds", type=int, default=0,
                   help=f"rounds in all for a series whose fixed rule's own rounds spread more than "
                        f"{NOISY_SPREAD_PCT:g}% after --rounds (0: none)")
    p.add_argument("--longest", type=float, default=0.5,
                   help="leave out series whose median exceeds this many seconds (the fixed rule spends "
                        "about 20 launches on them: 24 s a round for a 1.2 s kernel)")
    p.add_argument("--skip-planted", action="store_true")
    p.add_argument("--skip-fidelity", action="store_true", help="only the run and the planted compares")
    p.add_argument("--settled", type=float, default=0.0,
                   help="also time each series for this many seconds per round, the reference both rules are "
                        "held against (0: not)")
    p.add_argument("--ops", default="", help="only these ops of the bundled suite (comma-separated), when not --reuse")
    p.add_argument("--default-only", action="store_true", help="the planted compare at default settings only "
                                                                 "(not also with --all)")
    p.add_argument("--reuse", action="store_true",
                   help="use the suite, build cache and run of throughput.py in the same OUT")
    p.add_argument("--db", default="shared_1gpu.db",
                   help="with --reuse: the store in OUT holding the run of A (throughput.py --scaling: scaling.db)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--table", metavar="FIDELITY_RAW_JSON",
                   help="only print the table of an earlier run's fidelity_raw.json (no GPU needed)")
    args = p.parse_args()
    if args.worker:
        return fidelity_worker(args.worker)
    if args.table:
        print_rows(rows_of(json.loads(Path(args.table).read_text())))
        return 0
    if throughput.machine_kind() != "cuda":
        print("timing_fidelity: needs an NVIDIA GPU", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    throughput.OPS[:] = [op for op in args.ops.split(",") if op]
    if args.reuse:
        repo, shas, db = OUT / "suite", json.loads((OUT / "shas.json").read_text()), OUT / args.db
    else:
        repo, shas = throughput.suite_repo("cuda")
        db = OUT / "fidelity.db"
        for old in OUT.glob("fidelity.db*"):
            old.unlink()
        throughput.flopwatch(repo, "fidelity_run", db, "cuda", "run", shas["A"])
    rows = [] if args.skip_fidelity else fidelity(repo, shas, db, args.rounds, args.longest, args.settled,
                                                    args.noisy_rounds, tuple(v for v in args.variants.split(",") if v))
    plants = [] if args.skip_planted else planted(repo, shas, db, args.default_only)
    (OUT / "fidelity.json").write_text(json.dumps({"series": rows, "planted": plants}, indent=1))
    print_rows(rows)
    settled = [r for r in rows if "settled_ms" in r]
    if settled:
        print(f"\nagainst the settled reference ({args.settled:g} s of sampling per round):")
        print(f"{'variant':22} {'shape':24} {'settled ms':>10} {'fixed':>8} {'adaptive':>9}")
        for r in settled:
            print(f"{r['variant']:22} {r['shape']:24} {r['settled_ms']:>10.4f} {r['fixed_vs_settled_pct']:>+7.2f}% "
                  f"{r['adaptive_vs_settled_pct']:>+8.2f}%")
        for rule in ("fixed", "adaptive"):
            print(f"{rule} within 0.5% of settled: {sum(abs(r[f'{rule}_vs_settled_pct']) <= 0.5 for r in settled)} "
                  f"of {len(settled)}; largest {max(abs(r[f'{rule}_vs_settled_pct']) for r in settled):.2f}%")
    for pl in plants:
        print(f"{pl['name']}: exit {pl['exit']}, {pl['command_wall_s']:.1f} s; planted {PLANTED} → {pl['planted']}; "
              f"false alarms {pl['false_alarms'] or 0} among {pl['others']} other series ({pl['timed_others']} timed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
