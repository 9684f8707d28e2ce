"""Recall, false alarms and time of the change-point detector on hard noise, against the detector
it replaced, on the same series.

    python3 benchmarks/detector_noise.py [--series 20] [--length 1095] [--threshold 5%] [--baseline e7bfc3d]
                                         [--json FILE]

Per noise class, `--series` series of `--length` nightly points without any step (every step
reported there is a false alarm) and as many with one planted slowdown (found: a step reported
at exactly the planted commit; any other step is a false alarm). The classes, as relative
run-time noise of a per-commit median:

- gaussian: 1% normal noise (the easy case); gaussian-2%: 2% normal noise (used by
  `benchmarks/detector_otava.py`, not by default here);
- heavy-tailed: Student's t with 3 degrees of freedom, scale 1% (SD 1.7%, rare large excursions);
- spiky: 0.5% normal noise, and on 5% of the nights a noisy neighbour adds 5–20%;
- bimodal: 0.5% normal noise, and on a random 25% of the nights the device runs in a slower
  clock state (+4%);
- drifting: 0.5% normal noise on a slow wander (two sinusoids of 3% and 2% amplitude, periods
  of about 400 and 170 nights) and a 3% per year linear drift.

Planted slowdowns are 8% (run time × 1.087), at a random commit at least 30 from either end; a
fifth of them within the last 30 commits (the tail a nightly sees first). The baseline detector
is `pipeline/history/changepoint.py` as of `--baseline` (read with `git show`): E-Divisive over
the whole series with its permutation test and the whole-series screen. Both run in this
process on the same series, one after the other; time is wall time per series (report the load
average alongside: the machine may be shared). Exit status 0 when the current detector's recall
is at least the baseline's and its false alarms at most the baseline's in every class.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pipeline.history import changepoint
from pipeline.history.verdicts import parse_threshold

STEP = 0.08  # planted throughput loss: run time × 1/(1 - 0.08)


def noise(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Relative run-time deviations of n nightly medians (1.0 = the series' level)."""
    if kind == "gaussian":
        return 1.0 + rng.normal(0.0, 0.01, n)
    if kind == "gaussian-2%":
        return 1.0 + rng.normal(0.0, 0.02, n)
    if kind == "heavy-tailed":
        return 1.0 + 0.01 * rng.standard_t(3, n)
    if kind == "spiky":
        spikes = np.where(rng.random(n) < 0.05, rng.uniform(0.05, 0.20, n), 0.0)
        return 1.0 + rng.normal(0.0, 0.005, n) + spikes
    if kind == "bimodal":
        return 1.0 + rng.normal(0.0, 0.005, n) + np.where(rng.random(n) < 0.25, 0.04, 0.0)
    if kind == "drifting":
        t = np.arange(n)
        phase = rng.uniform(0, 2 * np.pi, 2)
        wander = 0.03 * np.sin(2 * np.pi * t / 400 + phase[0]) + 0.02 * np.sin(2 * np.pi * t / 170 + phase[1])
        return 1.0 + rng.normal(0.0, 0.005, n) + wander + 0.03 * t / 365
    raise ValueError(kind)


CLASSES = ("gaussian", "heavy-tailed", "spiky", "bimodal", "drifting")


def make_series(kind: str, n: int, count: int, seed: int) -> list[tuple[np.ndarray, int | None]]:
    """count series without a step, then count with one planted slowdown (values, planted index)."""
    rng = np.random.default_rng([seed, CLASSES.index(kind)])
    out: list[tuple[np.ndarray, int | None]] = [(1e-3 * noise(kind, n, rng), None) for _ in range(count)]
    for i in range(count):
        at = int(rng.integers(n - 30, n - 5)) if i % 5 == 4 else int(rng.integers(30, n - 30))
        values = 1e-3 * noise(kind, n, rng)
        values[at:] *= 1.0 / (1.0 - STEP)
        out.append((values, at))
    return out


def baseline_module(rev: str):
    """pipeline/history/changepoint.py as of `rev`, imported under another name."""
    text = subprocess.run(["git", "-C", str(HERE.parent), "show", f"{rev}:pipeline/history/changepoint.py"],
                          check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="flopwatch-baseline-")) / "baseline_changepoint.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("baseline_changepoint", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def score(detect, series, threshold: float) -> dict:
    """Found (planted step at its exact index), false alarms and seconds per series."""
    found = false = 0
    seconds = []
    for values, at in series:
        commits = [f"c{i}" for i in range(values.size)]
        start = time.perf_counter()
        steps = detect(values, commits, threshold=threshold)
        seconds.append(time.perf_counter() - start)
        hit = at is not None and any(s.index == at for s in steps)
        found += hit
        false += len(steps) - hit
    planted = sum(at is not None for _, at in series)
    return {"found": found, "planted": planted, "false_alarms": false, "series": len(series),
            "seconds_mean": float(np.mean(seconds)), "seconds_max": float(np.max(seconds))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", type=int, default=20, help="series per class without a step, and as many with one")
    ap.add_argument("--length", type=int, default=1095, help="points per series (nightly commits)")
    ap.add_argument("--threshold", default="5%", help="smallest step reported (default 5%%: cpu/rocm history)")
    ap.add_argument("--baseline", default="e7bfc3d", help="git revision of the detector to compare with")
    ap.add_argument("--classes", nargs="*", default=list(CLASSES), choices=CLASSES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    threshold = parse_threshold(args.threshold)
    baseline = baseline_module(args.baseline)
    load_before = os.getloadavg()
    rows, ok = [], True
    print(f"{args.series} + {args.series} series of {args.length} points per class, threshold {threshold:.1%}, "
          f"planted {-STEP:+.0%}; baseline {args.baseline}")
    print("| noise | detector | found | false alarms | s/series (mean) | s/series (max) |")
    print("|---|---|---|---|---|---|")
    for kind in args.classes:
        series = make_series(kind, args.length, args.series, args.seed)
        before = score(baseline.detect_steps, series, threshold)
        now = score(changepoint.detect_steps, series, threshold)
        for name, r in (("baseline", before), ("windowed", now)):
            print(f"| {kind} | {name} | {r['found']}/{r['planted']} | {r['false_alarms']} | "
                  f"{r['seconds_mean']:.3f} | {r['seconds_max']:.3f} |", flush=True)
        ok &= now["found"] >= before["found"] and now["false_alarms"] <= before["false_alarms"]
        rows.append({"noise": kind, "baseline": before, "windowed": now})
    summary = {"length": args.length, "series_per_class": 2 * args.series, "threshold": threshold,
               "baseline": args.baseline, "window": changepoint.WINDOW, "rows": rows,
               "loadavg_before": [round(x, 2) for x in load_before],
               "loadavg_after": [round(x, 2) for x in os.getloadavg()], "no_worse": ok}
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
