"""Verify flopwatch on a real NVIDIA GPU: the suite, profiler counters, timing fidelity, and
the broken-kernel set. Each step is one command so that it fits a machine lease; every step
writes its full output under OUT (default ./gpu-verify) and prints a short table last.

    python3 benchmarks/verify_gpu.py suite      # every cuda variant + peer, with --profile
    python3 benchmarks/verify_gpu.py fidelity   # torch.matmul: flopwatch vs triton do_bench, 5 runs
    python3 benchmarks/verify_gpu.py broken     # broken CUDA kernels, then a good one on the same GPU
    python3 benchmarks/verify_gpu.py raw        # the raw launch path both vendors share (module_api)
    python3 benchmarks/verify_gpu.py selftest   # flopwatch selftest: every path of this node
    python3 benchmarks/verify_gpu.py triton     # the Triton gemm variants + peer, with --profile
    python3 benchmarks/verify_gpu.py hostile    # a CUDA kernel's daemon is killed; a shape too big is invalid
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

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT", ROOT / "gpu-verify"))


def flopwatch(*args: str, log: str, env: dict | None = None) -> dict:
    """Run the CLI with --json; keep its stderr in OUT/log; return the summary."""
    cmd = [sys.executable, "-m", "pipeline.cli", "run", "--json", "--db", str(OUT / "results.db"),
           "--site", str(OUT / "site"), *args]
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})})
    (OUT / log).write_text(proc.stderr)
    print(f"$ flopwatch run {' '.join(args)}  (exit {proc.returncode}, {time.time() - t0:.0f} s)", flush=True)
    if not proc.stdout.strip():
        print(proc.stderr[-3000:])
        raise SystemExit(f"flopwatch printed no summary (exit {proc.returncode})")
    summary = json.loads(proc.stdout)
    summary["exit"] = proc.returncode
    return summary


def _rate(r: dict) -> str:
    rate = r.get("rate")
    if not rate:
        return "—"
    return f"{rate / 1e12:.1f} TFLOP/s" if r.get("flops") else f"{rate / 1e9:.0f} GB/s"


def suite(args) -> None:
    cmd = ["--profile", "--budget", str(args.budget)]
    for s in args.shape:
        cmd += ["--shape", s]
    summary = flopwatch(*cmd, log="suite.log")
    (OUT / "suite.json").write_text(json.dumps(summary, indent=1))
    rows = [r for r in summary["results"] if r["device"].startswith("cuda")]
    print(f"\n{'variant':24} {'shape':18} {'status':9} {'throughput':>14} {'%peer':>6} "
          f"{'tensor':>9} {'coal%':>6} {'L1hit%':>6} {'L2hit%':>6} {'occ%':>5} {'regs':>4}")
    for r in sorted(rows, key=lambda r: (r["op"], r["shape"], -(r.get("rate") or 0))):
        c = r.get("counters") or {}
        kernels = (r.get("resources") or {}).get("kernels") or {}
        regs = next((k.get("registers") for k in kernels.values() if k.get("registers")), "")

        def f(key: str, fmt: str = "{:.0f}") -> str:
            return fmt.format(c[key]) if isinstance(c.get(key), (int, float)) else "—"

        pct = f"{r['pct_of_peer']:.0f}" if r.get("pct_of_peer") else ""
        print(f"{r['variant']:24} {r['shape'][:18]:18} {r['status']:9} {_rate(r):>14} {pct:>6} "
              f"{f('tensor_insts', '{:.3g}'):>9} {f('coalescing_pct'):>6} {f('l1_hit_pct'):>6} "
              f"{f('l2_hit_pct'):>6} {f('occupancy_pct'):>5} {regs!s:>4}")
        if r["status"] != "ok" or c.get("profile_error"):
            print(f"    {r['diagnostic'][:200]} {c.get('profile_error', '')[:200]}")


def fidelity(args) -> None:
    """flopwatch's median for the torch peer vs triton's do_bench (its own 256 MB L2 flush between
    repetitions, median of the events) on the very same function, measured right after each of
    `--runs` flopwatch runs so that clock and thermal drift affect both alike."""
    import importlib.util

    import torch
    import triton.testing

    spec = importlib.util.spec_from_file_location("ref", ROOT / "kernels" / "gemm" / "torch_ref" / "ref.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    shapes = ["4096x4096x4096", "8192x8192x8192"]
    runs: dict[str, list[tuple[float, float]]] = {s: [] for s in shapes}
    for i in range(args.runs):
        summary = flopwatch("--variant", "torch_ref", "--budget", str(args.budget), "--no-report",
                            *sum((["--shape", s] for s in shapes), []), log=f"fidelity_{i}.log")
        fw = {"x".join(p.split("=")[1] for p in r["shape"].split(",")): r["median_s"]
              for r in summary["results"] if r["device"].startswith("cuda") and r["status"] == "ok"}
        for s in shapes:
            m, n, k = (int(v) for v in s.split("x"))
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16) / 10
            b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / 10
            c = torch.empty(m, n, device="cuda", dtype=torch.float32)
            indep = triton.testing.do_bench(lambda: ref.gemm_nt(a, b, c), warmup=100, rep=1000,
                                            return_mode="median") / 1e3
            runs[s].append((fw[s], indep))
    rows = []
    for s in shapes:
        m, n, k = (int(v) for v in s.split("x"))
        fw = [x for x, _ in runs[s]]
        db = [y for _, y in runs[s]]
        med, med_db = statistics.median(fw), statistics.median(db)
        rows.append({"shape": s, "pairs_s": runs[s], "flopwatch_median_s": med, "do_bench_median_s": med_db,
                     "diff_pct": (med - med_db) / med_db * 100,
                     "pair_diffs_pct": [(x - y) / y * 100 for x, y in runs[s]],
                     "spread_pct": (max(fw) - min(fw)) / med * 100,
                     "cv_pct": statistics.pstdev(fw) / statistics.mean(fw) * 100,
                     "tflops": 2 * m * n * k / med / 1e12})
    (OUT / "fidelity.json").write_text(json.dumps(rows, indent=1))
    print(f"\n{'shape':16} {'flopwatch':>11} {'do_bench':>10} {'diff':>7} {'TFLOP/s':>8} {'5-run spread':>13} {'CV':>6}")
    for r in rows:
        print(f"{r['shape']:16} {r['flopwatch_median_s'] * 1e3:>8.3f} ms {r['do_bench_median_s'] * 1e3:>7.3f} ms "
              f"{r['diff_pct']:>6.2f}% {r['tflops']:>8.1f} {r['spread_pct']:>12.2f}% {r['cv_pct']:>5.2f}%")
        print("   per run (flopwatch / do_bench, ms): " + ", ".join(
            f"{x * 1e3:.3f}/{y * 1e3:.3f}" for x, y in r["pairs_s"]))


def broken(args) -> None:
    bad = flopwatch("--kernels", "tests/broken_kernels_cuda", "--budget", "0.5", "--no-report", log="broken.log")
    good = flopwatch("--variant", "cuda_smem_tiled", "--shape", "4096x4096x4096", "--budget", "0.5",
                     "--no-report", log="after_broken.log")
    (OUT / "broken.json").write_text(json.dumps({"broken": bad, "after": good}, indent=1))
    print(f"\nbroken set: exit {bad['exit']}")
    for r in bad["results"]:
        if r["device"].startswith("cuda") and r["variant"].startswith("cuda_"):
            print(f"  {r['variant']:24} {r['status']:10} {r['diagnostic'][:150]}")
    print(f"next run on the same GPU: exit {good['exit']}")
    for r in good["results"]:
        if r["device"].startswith("cuda"):
            print(f"  {r['variant']:24} {r['status']:10} {_rate(r)}")


def raw(args) -> None:
    """The shared raw-launch path (workers/bindings/module_api.py) with CUDA's names: the GPU
    test against a float64 reference, then the pipeline's run of cuda_raw_naive."""
    test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "cuda", "tests/cuda/test_gpu_kernels.py",
                           "-k", "raw"], cwd=ROOT, capture_output=True, text=True, check=False)
    (OUT / "raw_pytest.log").write_text(test.stdout + test.stderr)
    run = flopwatch("--variant", "cuda_raw_naive", "--shape", "4096x4096x4096",
                    "--budget", "0.5", "--no-report", log="raw.log")
    (OUT / "raw.json").write_text(json.dumps(run, indent=1))
    print(f"\npytest -k raw: exit {test.returncode}: {(test.stdout.strip().splitlines() or [''])[-1]}")
    for r in run["results"]:
        print(f"  {r['variant']:24} {r['device']:28} {r['status']:10} {_rate(r):>14} {r['diagnostic'][:100]}")


def selftest(args) -> None:
    """`flopwatch selftest` as a table (OUT/selftest.txt, progress in OUT/selftest.log) and as
    rows (OUT/selftest.json); killed after --timeout seconds so a later step still runs."""
    t0 = time.time()
    cmd = [sys.executable, "-m", "pipeline.cli", "selftest", "--budget", str(min(args.budget, 0.5)),
           "--save", str(OUT / "selftest.json")]
    with open(OUT / "selftest.txt", "w") as out, open(OUT / "selftest.log", "w") as log:
        try:
            code = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=log, timeout=args.timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            code = 124
    print((OUT / "selftest.txt").read_text())
    print(f"$ flopwatch selftest  (exit {code}, {time.time() - t0:.0f} s)", flush=True)
    (OUT / "selftest.exit").write_text(str(code))


def triton_variants(args) -> None:
    """The two Triton gemm variants and their peer, checked, timed and profiled; the static
    analysis of every compiled configuration comes along in the results."""
    cmd = ["--variant", "triton_tiled", "--variant", "triton_autotuned", "--profile", "--budget", str(args.budget)]
    for s in args.shape or ["4096x4096x4096"]:
        cmd += ["--shape", s]
    summary = flopwatch(*cmd, log="triton.log")
    (OUT / "triton.json").write_text(json.dumps(summary, indent=1))
    print(f"\n{'variant':18} {'device':8} {'shape':22} {'status':9} {'throughput':>14} {'%peer':>6} "
          f"{'tensor':>9} {'L2hit%':>6} {'occ%':>5} {'dur_us':>7}")
    for r in summary["results"]:
        c = r.get("counters") or {}

        def f(key: str, fmt: str = "{:.0f}") -> str:
            return fmt.format(c[key]) if isinstance(c.get(key), (int, float)) else "—"

        pct = f"{r['pct_of_peer']:.0f}" if r.get("pct_of_peer") else ""
        dur = f"{c['duration_ns'] / 1e3:.0f}" if isinstance(c.get("duration_ns"), (int, float)) else "—"
        print(f"{r['variant']:18} {r['device'][:8]:8} {r['shape'][:22]:22} {r['status']:9} {_rate(r):>14} "
              f"{pct:>6} {f('tensor_insts', '{:.3g}'):>9} {f('l2_hit_pct'):>6} {f('occupancy_pct'):>5} {dur:>7}")
        if r["status"] != "ok" or c.get("profile_error"):
            print(f"    {r['diagnostic'][:300]} {c.get('profile_error', '')[:300]}")
        if r["variant"].startswith("triton") and r["device"].startswith("cuda"):
            for name, k in ((r.get("resources") or {}).get("kernels") or {}).items():
                if k.get("arch") == "sm_90a":
                    print(f"    {name}: regs={k.get('registers')} smem={k.get('smem_bytes')} "
                          f"spills={k.get('spill_stores')} tensor_insts={k.get('tensor_insts')}")


def hostile(args) -> None:
    """Containment and the shape check on the GPU path (docs/measurement.md, "Containment"):
    a CUDA variant whose host code double-forks a `setsid` daemon in a job that has a GPU
    context must end `ok` with "left processes behind (1 killed)" and leave nothing running;
    a 1000000³ bf16 gemm must be `invalid` before anything is allocated, naming the bytes it
    needs and the bytes free on the device."""
    import uuid

    sys.path.insert(0, str(ROOT))
    from tests.hostile.processes import marked

    mark = uuid.uuid4().hex
    # No kept local Ray: its head and warm runners outlive a command on purpose, and would be
    # counted here as left running.
    env = {"FLOPWATCH_VERIFY_MARK": mark, "FLOPWATCH_RAY_REUSE": "0"}
    run = flopwatch("--kernels", "tests/hostile/kernels_cuda", "--budget", "0.5", "--no-report", "--spawn-per-job",
                    log="hostile_spawned.log", env=env)
    warm = flopwatch("--kernels", "tests/hostile/kernels_cuda", "--budget", "0.5", "--no-report",
                     log="hostile.log", env=env)
    time.sleep(5)  # Ray's processes end a moment after the command
    left = marked("FLOPWATCH_VERIFY_MARK", mark)
    (OUT / "hostile.json").write_text(json.dumps({"spawned": run, "warm": warm, "left_running": left}, indent=1))
    expected = {"cuda_daemon": ("ok", "left processes behind (1 killed)"),
                "cuda_huge_shape": ("invalid", "free on the device; not run")}
    failed = 0
    print(f"\n{'path':8} {'variant':16} {'status':8} {'as expected':11} diagnostic")
    for path, summary in (("spawned", run), ("warm", warm)):
        for r in summary["results"]:
            if not r["device"].startswith("cuda"):
                continue
            status, words = expected.get(r["variant"], ("?", "?"))
            if r["variant"] == "peer.gemm":  # the built-in peer, at both variants' shapes
                status, words = expected["cuda_huge_shape"] if "1000000" in r["shape"] else ("ok", "")
            good = r["status"] == status and words in r["diagnostic"]
            failed += not good
            print(f"{path:8} {r['variant']:16} {r['status']:8} {'yes' if good else 'NO':11} {r['diagnostic'][:150]}")
    print(f"processes of the two runs still running afterwards: {len(left)} {left[:3]}")
    print("hostile: PASS" if not failed and not left and run["results"] and warm["results"] else "hostile: FAIL")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("step", choices=["suite", "fidelity", "broken", "selftest", "triton", "raw", "hostile"])
    p.add_argument("--budget", type=float, default=2.0)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--shape", action="append", default=[])
    p.add_argument("--timeout", type=float, default=170, help="selftest: seconds before it is stopped")
    args = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    {"suite": suite, "fidelity": fidelity, "broken": broken, "selftest": selftest,
     "triton": triton_variants, "raw": raw, "hostile": hostile}[args.step](args)


if __name__ == "__main__":
    main()
