"""What a GPU slot's spare process spends preparing, and whether preparing beside a timing loop
moves its medians. One NVIDIA/AMD GPU.

1. Breakdown. From a parent that imported torch and the workers without touching the GPU (as
   the warm runner does), fork a child N times; each times the steps of `workers.job.child.prepare`:
   the driver (torch.cuda.init), the context (set_device + first allocation), the first-use
   kernels per dtype, an event pair.
2. Interference. A process of its own times a few kernels with `workers.measure.timing.time_gpu`
   (default adaptive rule) under three conditions, alternating, `--rounds` rounds: quiet; while
   another process keeps creating GPU contexts (fork, context, exit, again); while it keeps
   running the whole preparation. Reported: each kernel's median per condition (median of the
   round medians), the difference from quiet, and quiet's own spread across rounds.

    python3 benchmarks/spare_prep.py [--children 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHURN = """
import os, sys, torch
sys.path.insert(0, {root!r})
from workers.job import child
full = {full!r}
while True:
    pid = os.fork()
    if pid == 0:
        if full:
            child.prepare("cuda")
        else:
            torch.cuda.set_device(0)
            torch.empty(1, device="cuda")
            torch.cuda.synchronize()
        os._exit(0)
    os.waitpid(pid, 0)
"""


def in_forked_child(measure: Callable[[], dict]) -> dict:
    """`measure()` in a child forked from this process (which has not touched the GPU, as the
    warm runner), its dict back through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, json.dumps(measure()).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


def breakdown(children: int) -> list[dict]:
    import torch

    from workers.job import child
    from workers.measure import correctness
    from workers.ops import get_op, torch_dtype

    def steps() -> dict:
        out = {}
        t = time.perf_counter()

        def lap(name):
            nonlocal t
            now = time.perf_counter()
            out[name] = round(now - t, 4)
            t = now

        torch.cuda.init()
        lap("driver")
        torch.cuda.set_device(0)
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()
        lap("context")
        op = get_op("gemm")
        dims = {"M": 64, "N": 64, "K": 64}
        for name in ("bf16", "fp16", "fp32"):
            inputs = op.make_inputs(dims, torch_dtype(name), "nt", "cuda", child.generator(0, "cuda"))
            torch.cuda.synchronize()
            lap(f"{name}_inputs")
            ref = op.reference(inputs, "nt")
            torch.cuda.synchronize()
            lap(f"{name}_reference")
            g = correctness.guarded_output(op.output_shape(dims), torch.float32, "cuda")
            g.out.copy_(ref)
            correctness.evaluate(g, ref, *op.TOLERANCE[name])
            correctness.moved_elements(g.out, g.out.clone())
            torch.cuda.synchronize()
            lap(f"{name}_checks")
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.empty(1 << 20, dtype=torch.int32, device="cuda").zero_()
        e.record()
        e.synchronize()
        lap("events")
        return out

    return [in_forked_child(steps) for _ in range(children)]


def interference(rounds: int) -> dict:
    import torch

    from workers.measure import device
    from workers.measure.timing import TimingSettings, time_gpu

    torch.cuda.set_device(0)
    flush = device.flush_bytes(device.info("cuda"))
    a4 = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    a8 = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    src = torch.randn(1 << 26, device="cuda")
    dst = torch.empty_like(src)
    x = torch.randn(4096, 4096, device="cuda")
    kernels = {"matmul bf16 4096": lambda: torch.matmul(a4, a4.T),
               "matmul bf16 8192": lambda: torch.matmul(a8, a8.T),
               "copy 256 MiB": lambda: dst.copy_(src),
               "softmax 4096x4096": lambda: torch.softmax(x, dim=1)}
    conditions = ("quiet", "contexts", "preparation")
    medians: dict[str, dict[str, list[float]]] = {k: {c: [] for c in conditions} for k in kernels}
    for rnd in range(rounds):
        order = conditions if rnd % 2 == 0 else tuple(reversed(conditions))
        for cond in order:
            churn = None
            if cond != "quiet":
                code = CHURN.format(root=str(ROOT), full=cond == "preparation")
                churn = subprocess.Popen([sys.executable, "-c", code])
                time.sleep(3.0)  # its first contexts are up
            try:
                for name, call in kernels.items():
                    t = time_gpu(call, TimingSettings(), flush)
                    medians[name][cond].append(t.median_s)
            finally:
                if churn is not None:
                    churn.kill()
                    churn.wait()
    out = {}
    for name, by in medians.items():
        quiet = statistics.median(by["quiet"])
        out[name] = {c: {"median_ms": statistics.median(v) * 1e3,
                         "diff_pct": (statistics.median(v) / quiet - 1) * 100,
                         "rounds_ms": [x * 1e3 for x in v]} for c, v in by.items()}
        out[name]["quiet"]["spread_pct"] = (max(by["quiet"]) / min(by["quiet"]) - 1) * 100
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--children", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--part", choices=("breakdown", "interference"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.part == "breakdown":
        import torch  # noqa: F401  (the parent imports, never touches the GPU: as the warm runner)

        import workers.job.child  # noqa: F401
        print(json.dumps(breakdown(args.children)))
        return 0
    if args.part == "interference":
        print(json.dumps(interference(args.rounds)))
        return 0
    run = lambda part: json.loads(subprocess.run(  # noqa: E731
        [sys.executable, __file__, "--part", part, "--children", str(args.children), "--rounds", str(args.rounds)],
        capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
    rows = run("breakdown")
    print(f"preparation of a forked child, seconds ({len(rows)} children):")
    for step in rows[0]:
        vals = [r[step] for r in rows]
        print(f"  {step:18} median {statistics.median(vals):.4f}  min {min(vals):.4f}  max {max(vals):.4f}")
    totals = [sum(r.values()) for r in rows]
    print(f"  {'total':18} median {statistics.median(totals):.4f}  min {min(totals):.4f}  max {max(totals):.4f}")
    result = run("interference")
    print(f"\nmedians beside a process that keeps preparing ({args.rounds} rounds, adaptive rule):")
    print(f"  {'kernel':20} {'quiet ms':>10} {'spread':>7} {'contexts':>9} {'preparation':>12}")
    for name, by in result.items():
        print(f"  {name:20} {by['quiet']['median_ms']:>10.4f} {by['quiet']['spread_pct']:>6.2f}% "
              f"{by['contexts']['diff_pct']:>+8.2f}% {by['preparation']['diff_pct']:>+11.2f}%")
    Path(os.environ.get("OUT", ".")).joinpath("spare_prep.json").write_text(
        json.dumps({"breakdown": rows, "interference": result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
