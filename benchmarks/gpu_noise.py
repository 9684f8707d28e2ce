"""False-alarm and detection rates of `flopwatch compare` on one NVIDIA GPU, at a small threshold.

Builds a throw-away git repository from the suite's own GPU variants (every CUDA-capable one but
`cuda_pybind_tiled`, the same kernel as `cuda_smem_tiled` behind a torch-extension build that
alone takes minutes) at one shape per op (GEMM 4096³ bf16, copy 2^26 fp32), with three commits:
  base     the suite;
  same     only README changes: comparing it with base is comparing a commit with itself, so
           every `slower`/`faster` verdict is a false alarm;
  planted  `cuda_wmma` and `cuda_naive` launch a one-thread spin kernel before the GEMM, on the
           same stream, for `--plant` (default 1%) of the GEMM's time measured at base.
Then, as `flopwatch compare` measures: a run of each commit (status, correctness, builds), and
paired timing (`workers.job.child.pair`: both builds alternated call by call in one process) of
  - the fastest and the slowest ok series of the base run, base against `same`;
  - each planted variant, base against `planted`;
`--count` times each, every repetition a fresh paired measurement of `--pair-budget` seconds
(with its own warm-up and random order), decided by `pipeline.compare.compare_rounds` at
`--threshold`, exactly what compare decides. The repetitions of one comparison share one
process (loading both builds once), which is what keeps ≥ 20 of them inside a few minutes.

    python3 benchmarks/compare_noise.py --device cuda --count 20 --threshold 1% --out "$OUT"

Writes OUT/gpu_noise.json (settings, the base run, every verdict with its change and CI, the
calibration of the spin) and OUT/gpu_noise.txt (the table it prints). Exit status 2 without a
CUDA device.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SUITE = ROOT / "kernels"
VARIANT_DIRS = ("gemm/cuda_naive", "gemm/cuda_raw_naive", "gemm/cuda_smem_tiled", "gemm/cuda_register_blocked",
                "gemm/cuda_wmma", "gemm/torch_ref", "copy/cuda_coalesced", "copy/cuda_strided", "copy/torch_copy")
PLANT_TARGETS = {"cuda_wmma": "gemm/cuda_wmma/gemm_wmma.cu", "cuda_naive": "gemm/cuda_naive/gemm_naive.cu"}
CONFIG = ('kernels = ["kernels"]\ninclude_dirs = ["kernels/include"]\n\n[shape_sets]\n'
          'gemm_gpu = [[4096, 4096, 4096]]\ncopy_gpu = [[67108864]]\n')
SPIN = """
// The planted slowdown of the noise benchmark: one thread spins for a fixed number of SM clock
// cycles; launched on the GEMM's stream just before it, it delays the GEMM by that long.
__global__ void flopwatch_planted_spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

"""
FALLBACK_SM_CLOCK_MHZ = 1755.0  # H100 SXM base clock, when nvidia-smi gave none


def plant_source(text: str, entry: str, cycles: int) -> str:
    """The CUDA source with the spin kernel defined before `extern "C" void entry(` and
    launched before the first kernel launch inside that function."""
    start = text.find(f'extern "C" void {entry}(')
    if start < 0:
        raise ValueError(f"no extern \"C\" entry {entry!r} in the source")
    launch = text.find("<<<", start)
    if launch < 0:
        raise ValueError(f"no kernel launch inside {entry!r}")
    line = text.rfind("\n", 0, launch) + 1
    call = f"  flopwatch_planted_spin<<<1, 1, 0, (cudaStream_t)stream>>>({int(cycles)}LL);\n"
    return text[:start] + SPIN + text[start:line] + call + text[line:]


def spin_cycles(median_s: float, fraction: float, sm_clock_mhz: float) -> int:
    """Cycles of SM clock that last `fraction` of a call of `median_s`."""
    return max(1, round(fraction * median_s * sm_clock_mhz * 1e6))


def make_repo(root: Path) -> tuple[object, dict[str, str]]:
    """The base and same commits; returns (repo, {"base", "same"} → SHA)."""
    import git

    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Noise Bench")
        cw.set_value("user", "email", "noise@example.com")
    shutil.copytree(SUITE / "include", root / "kernels" / "include")
    for rel in VARIANT_DIRS:
        shutil.copytree(SUITE / rel, root / "kernels" / rel)
    # The peer would also run on the CPU at the GPU shape (minutes for a 4096³ GEMM): GPU only here.
    ref = root / "kernels" / "gemm" / "torch_ref" / "variant.toml"
    ref.write_text(re.sub(r'^devices = .*$', 'devices = ["cuda"]', ref.read_text(), flags=re.MULTILINE))
    (root / "flopwatch.toml").write_text(CONFIG)
    shas = {}
    for name, readme in (("base", "one"), ("same", "two")):
        (root / "README.md").write_text(f"GPU noise benchmark {readme}\n")
        repo.git.add(A=True)
        shas[name] = repo.index.commit(name).hexsha
    return repo, shas


def commit_planted(repo, root: Path, cycles: dict[str, int]) -> str:
    for variant, cycle_count in cycles.items():
        path = root / "kernels" / PLANT_TARGETS[variant]
        entry = "gemm_" + variant
        path.write_text(plant_source(path.read_text(), entry, cycle_count))
    repo.git.add(A=True)
    return repo.index.commit("planted: spin before " + ", ".join(sorted(cycles))).hexsha


def pair_worker(spec_path: str, out_path: str) -> int:
    """Repetitions of `workers.job.child.pair` in this one process: each a fresh paired measurement."""
    import secrets

    from workers.job import child

    spec = json.loads(Path(spec_path).read_text())
    deadline = time.time() + float(spec["time_limit_s"])
    reps = []
    for _ in range(int(spec["count"])):
        if reps and time.time() > deadline:
            break
        spec["seeds"] = [secrets.randbelow(2**31) for _ in range(2)]
        reps.append(child.pair(spec)["pair_samples"])
    Path(out_path).write_text(json.dumps(reps))
    return 0


def _job_of(outcome, variant: str):
    return next(j for j in outcome.jobs if j.variant == variant)


def _sm_clock_mhz(result) -> float:
    extra = (result.device_info or {}).get("extra", {})
    for key in ("max_sm_clock_mhz", "sm_clock_mhz"):
        try:
            return float(extra.get(key))
        except (TypeError, ValueError):
            continue
    return FALLBACK_SM_CLOCK_MHZ


def _repetitions(work: Path, name: str, outcome_a, outcome_b, variant: str, args, time_left: float) -> list:
    """Unpack both builds of `variant` and run the repetitions in one child process."""
    import ray

    from workers.toolkit.bundle import unpack

    job = _job_of(outcome_b, variant)
    folder = work / "pairs" / name
    for i, outcome in enumerate((outcome_a, outcome_b)):
        unpack(ray.get(outcome.artifacts[variant]), folder / f"artifact{i}")
    spec = {"mode": "pair", "variants": [outcome_a.variants[variant].to_dict(), outcome_b.variants[variant].to_dict()],
            "device_kind": "cuda", "dims": job.shape.dims, "dtype": job.dtype,
            "artifacts": [str(folder / "artifact0"), str(folder / "artifact1")],
            "timing": {"budget_s": args.pair_budget}, "count": args.count, "time_limit_s": max(time_left, 1.0)}
    (folder / "spec.json").write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu_noise", "--pair-worker", str(folder / "spec.json"),
                           str(folder / "reps.json")], cwd=ROOT, env=env, timeout=time_left + 120,
                          check=False)
    if done.returncode != 0 or not (folder / "reps.json").exists():
        raise RuntimeError(f"paired repetitions of {name} failed (exit {done.returncode})")
    return json.loads((folder / "reps.json").read_text())


def decide(reps: list, threshold: float) -> list[dict]:
    """Each repetition decided as `flopwatch compare` decides a paired series."""
    import numpy as np

    from pipeline.history import compare as cmp

    out = []
    for base, head in reps:
        c = cmp.compare_rounds(cmp.Side("ok", tuple(base), paired=True), cmp.Side("ok", tuple(head), paired=True),
                               threshold)
        ratio = float(np.median(np.asarray(head) / np.asarray(base)))
        out.append({"verdict": c.verdict, "change": c.change, "ci": [c.change_lo, c.change_hi],
                    "time_ratio_median": ratio, "pairs": len(base), "p": getattr(c, "p_value", None)})
    return out


def summarise(name: str, variant: str, median_s: float, verdicts: list[dict], alarm: tuple[str, ...]) -> dict:
    import numpy as np

    hits = sum(v["verdict"] in alarm for v in verdicts)
    widths = [v["ci"][1] - v["ci"][0] for v in verdicts]
    return {"comparison": name, "variant": variant, "median_ms": median_s * 1e3, "reps": len(verdicts),
            "hits": hits, "rate": hits / max(len(verdicts), 1),
            "verdicts": {k: sum(v["verdict"] == k for v in verdicts) for k in sorted({v["verdict"] for v in verdicts})},
            "time_ratio_median": float(np.median([v["time_ratio_median"] for v in verdicts])) if verdicts else None,
            "ci_width_median": float(np.median(widths)) if widths else None,
            "pairs_median": int(np.median([v["pairs"] for v in verdicts])) if verdicts else 0}


def table(rows: list[dict], threshold: float) -> str:
    lines = [f"threshold ±{threshold:.1%}; rate = false alarms (same) or detections (planted)",
             (f"{'comparison':10} {'variant':22} {'ms/call':>9} {'reps':>4} {'rate':>11} {'time ratio':>10} "
              f"{'CI width':>8} {'pairs':>6}  verdicts")]
    for r in rows:
        ratio = f"{r['time_ratio_median'] - 1:+.3%}" if r["time_ratio_median"] else "—"
        width = f"{r['ci_width_median']:.3%}" if r["ci_width_median"] is not None else "—"
        lines.append(f"{r['comparison']:10} {r['variant']:22} {r['median_ms']:9.3f} {r['reps']:4d} "
                     f"{r['hits']:3d}/{r['reps']:<3d}{r['rate']:4.0%} {ratio:>10} {width:>8} {r['pairs_median']:6d}  "
                     + ", ".join(f"{k} {n}" for k, n in r["verdicts"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--pair-worker"]:
        return pair_worker(argv[1], argv[2])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda",), required=True)
    p.add_argument("--count", type=int, default=20, help="repetitions per comparison (default 20)")
    p.add_argument("--threshold", default="1%", help="compare's threshold under test (default 1%%)")
    p.add_argument("--pair-budget", type=float, default=0.3,
                   help="seconds of paired timing per repetition (default 0.3; at least 10 pairs are taken)")
    p.add_argument("--budget", type=float, default=0.2, help="timing budget of each commit's run (default 0.2 s)")
    p.add_argument("--plant", type=float, default=0.01, help="planted slowdown as a fraction of the GEMM (default 0.01)")
    p.add_argument("--time-limit", type=float, default=300.0,
                   help="seconds after which repetitions stop early (each comparison keeps at least one; default 300)")
    p.add_argument("--out", default=os.environ.get("OUT", "gpu-noise"), help="output folder (default $OUT)")
    args = p.parse_args(argv)
    started = time.time()

    from pipeline.fleet import cluster
    from pipeline.history import verdicts as stats
    from pipeline.run.progress import Progress
    from pipeline.run.runflow import RunOptions, Session, run_commit
    from pipeline.store import Store
    from workers.measure import device

    threshold = stats.parse_threshold(args.threshold)
    if device.gpu_kind() != "cuda":
        print("gpu_noise: no CUDA device visible to torch on this machine; this measurement needs one NVIDIA GPU "
              "(the CPU figures come from `python3 benchmarks/compare_noise.py` without --device)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    work = Path(tempfile.mkdtemp(prefix="flopwatch-gpu-noise-"))
    repo, shas = make_repo(work / "repo")
    info = cluster.connect(None, 1)
    session = Session(Store(work / "results.db"), work / ".flopwatch", info, Progress(enabled=False))
    meta = {"machine": platform.node(), "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": " ".join(["python3", "benchmarks/compare_noise.py", *argv]), "threshold": threshold,
            "pair_budget_s": args.pair_budget, "budget_s": args.budget, "plant_fraction": args.plant}
    rows, detail = [], []
    try:
        base = run_commit(session, repo, shas["base"], RunOptions(budget_s=args.budget, command="noise"))
        ok = sorted((r for r in base.results if r.status == "ok" and r.device.startswith("cuda")),
                    key=lambda r: r.median_s)
        meta["device"] = ok[0].device if ok else ""
        meta["base_run"] = [{"variant": r.variant, "shape": r.shape, "dtype": r.dtype, "status": r.status,
                             "median_ms": r.median_s * 1e3 if r.median_s else None, "diagnostic": r.diagnostic[:300]}
                            for r in base.results]
        print("base run:\n" + "\n".join(f"  {r['variant']:22} {r['status']:12} "
                                        f"{r['median_ms'] or 0:10.3f} ms {r['diagnostic'][:80]}" for r in meta["base_run"]))
        if len(ok) < 2:
            raise RuntimeError("fewer than two GPU series ran ok at base; see the base run above")
        fastest, slowest = ok[0], ok[-1]
        by_name = {r.variant: r for r in ok}
        same = run_commit(session, repo, shas["same"], RunOptions(only=(fastest.variant, slowest.variant),
                                                                   with_peer=False, budget_s=args.budget,
                                                                   command="noise"))
        targets = [v for v in PLANT_TARGETS if v in by_name]
        cycles = {v: spin_cycles(by_name[v].median_s, args.plant, _sm_clock_mhz(by_name[v])) for v in targets}
        meta["plant"] = {v: {"cycles": c, "sm_clock_mhz": _sm_clock_mhz(by_name[v]),
                             "gemm_median_ms": by_name[v].median_s * 1e3} for v, c in cycles.items()}
        planted_sha = commit_planted(repo, work / "repo", cycles)
        planted = run_commit(session, repo, planted_sha, RunOptions(only=tuple(targets), with_peer=False,
                                                                     budget_s=args.budget, command="noise"))
        bad = [r for r in planted.results if r.status != "ok"]
        if bad:
            raise RuntimeError(f"planted build/run failed: {bad[0].variant} {bad[0].status}: {bad[0].diagnostic[:300]}")
        plan = [("same", fastest.variant, same), ("same", slowest.variant, same)] + \
               [("planted", v, planted) for v in targets]
        for i, (name, variant, head) in enumerate(plan):
            left = args.time_limit - (time.time() - started)
            share = max(left / (len(plan) - i), 5.0)
            reps = _repetitions(work, f"{name}-{variant}", base, head, variant, args, share)
            verdicts = decide(reps, threshold)
            alarm = (stats.SLOWER, stats.FASTER) if name == "same" else (stats.SLOWER,)
            rows.append(summarise(name, variant, by_name[variant].median_s, verdicts, alarm))
            detail.append({"comparison": name, "variant": variant, "verdicts": verdicts})
            print(table(rows[-1:], threshold).splitlines()[-1], flush=True)
    except Exception as exc:  # noqa: BLE001 -- keep what was measured, say what stopped it
        meta["error"] = f"{type(exc).__name__}: {exc}"
        print(f"gpu_noise: stopped: {meta['error']}", file=sys.stderr)
    finally:
        cluster.shutdown(info)
    meta["elapsed_s"] = time.time() - started
    text = table(rows, threshold)
    (out / "gpu_noise.json").write_text(json.dumps({**meta, "summary": rows, "detail": detail}, indent=1))
    (out / "gpu_noise.txt").write_text(f"{meta.get('device', '')} {meta['date']} ({meta['elapsed_s']:.0f} s)\n{text}\n"
                                       + (f"stopped: {meta['error']}\n" if "error" in meta else ""))
    print(text)
    print(f"{meta['elapsed_s']:.0f} s; full output in {out}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if "error" in meta else 0


if __name__ == "__main__":
    sys.exit(main())
