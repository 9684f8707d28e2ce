"""How long a GPU takes to settle under a kernel's load: the data behind the timing rule's
warm-up (`workers/measure/timing.py`, MIN_WARMUP_S).

For a few kernels that draw the most power (bf16 GEMMs through cuBLAS) and one that does not
(a bandwidth-bound copy), from two starting states — after 2 s idle, and after 1 s of the same
load followed by a 0.4 s gap (what the previous job and the next job's start-up leave) — the
kernel is timed back to back for 3 s, each sample flushed as flopwatch flushes it, in batches of
about 20 ms of GPU work. Printed: the median of each time window relative to the median of the
last second (the settled state), so the window where the readings come within 0.5% of it is
the warm-up a faithful measurement needs. SM clock and power are sampled by nvidia-smi.

    OUT=/some/folder python3 benchmarks/gpu_settling.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

WINDOWS = [(0.0, 0.1), (0.1, 0.2), (0.2, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, 1.0), (1.0, 1.5), (1.5, 2.0)]
SETTLED = (2.0, 3.0)
TRACE_S = 3.0


def kernels(torch):
    def gemm(n):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(n, n, device="cuda", dtype=torch.float32)
        return lambda: c.copy_(torch.matmul(a, b.T))

    def copy(n):
        src = torch.randn(n, device="cuda")
        dst = torch.empty_like(src)
        return lambda: torch.mul(src, 1, out=dst)

    return {"gemm bf16 4096": gemm(4096), "gemm bf16 8192": gemm(8192), "copy fp32 2^26": copy(1 << 26)}


def trace(torch, call, flush, seconds: float) -> list[tuple[float, float]]:
    """(seconds since start, sample seconds) for back-to-back flushed samples."""
    start_ev, end_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush.zero_()
    start_ev.record()
    call()
    end_ev.record()
    end_ev.synchronize()
    per = start_ev.elapsed_time(end_ev) / 1e3 + 1.5e-4
    batch = max(1, min(100, round(0.02 / per)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(batch)]
    out, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for s, e in events:
            flush.zero_()
            s.record()
            call()
            e.record()
        torch.cuda.synchronize()
        now = time.perf_counter() - t0
        out += [(now, s.elapsed_time(e) / 1e3) for s, e in events]
    return out


def windows(samples: list[tuple[float, float]]) -> dict:
    settled = statistics.median(d for t, d in samples if SETTLED[0] <= t < SETTLED[1])
    rel = {}
    for lo, hi in WINDOWS:
        got = [d for t, d in samples if lo <= t < hi]
        rel[f"{lo:g}-{hi:g}s"] = round((statistics.median(got) / settled - 1) * 100, 2) if got else None
    return {"settled_ms": settled * 1e3, "rel_pct": rel}


def main() -> int:
    import torch

    out_dir = Path(os.environ.get("OUT", "settling-out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "100"], stdout=subprocess.PIPE, text=True)
    clocks: list[tuple[float, str]] = []
    threading.Thread(target=lambda: [clocks.append((time.time(), line.strip())) for line in smi.stdout],
                     daemon=True).start()
    flush = torch.empty(256 * 2**20, dtype=torch.int32, device="cuda")  # 1 GiB: past L2 on any GPU
    results = []
    for name, call in kernels(torch).items():
        for state in ("idle", "after load"):
            if state == "idle":
                torch.cuda.synchronize()
                time.sleep(2.0)
            else:
                trace(torch, call, flush, 1.0)
                time.sleep(0.4)
            began = time.time()
            samples = trace(torch, call, flush, TRACE_S)
            w = windows(samples)
            smi_in = [c for t, c in clocks if began <= t <= began + TRACE_S]
            results.append({"kernel": name, "start": state, **w, "samples": len(samples),
                            "smi_first": smi_in[:3], "smi_last": smi_in[-3:]})
            print(f"{name:16} {state:10} settled {w['settled_ms']:.4f} ms  "
                  + "  ".join(f"{k} {v:+.2f}%" for k, v in w["rel_pct"].items() if v is not None)
                  + f"  | nvidia-smi MHz,W first {smi_in[:2]} last {smi_in[-2:]}", flush=True)
    smi.terminate()
    (out_dir / "settling.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
