"""flopwatch's change-point detector against Apache Otava, side by side on the same noisy series.

    python3 benchmarks/detector_otava.py [--generator project|hard] [--seeds 1 2 3] [--series 50]
                                         [--length 365] [--threshold 1%] [--window 50] [--pvalue 0.001]
                                         [--magnitude 0.01] [--json FILE]

Otava is a benchmark-only dependency: it pins numpy 2.2 and scipy 1.16, so install it into a
virtual environment of its own that still sees flopwatch's packages, and run this script with it:

    python3 -m venv --system-site-packages /tmp/otava-venv && /tmp/otava-venv/bin/pip install apache-otava
    taskset -c 1 /tmp/otava-venv/bin/python benchmarks/detector_otava.py --seeds 1 2 3

Per seed and per noise class (`detector_noise.noise`: gaussian 1% and 2%, heavy-tailed, spiky,
bimodal, drifting), `--series` series of `--length` nightly points (a year). Each series gets 0, 1
or 2 planted steps (a quarter none, half one, a quarter two) of 1, 2, 3, 5 or 10% (run time × (1 + s)
for a slowdown, 7 in 10, else × 1/(1 + s)), at least 15 commits apart and 10 from either end; 3 in
10 of them are reverted 10-60 commits later (the revert is a planted step of the same size too).

`--generator hard` takes the series from `benchmarks/detector_hard.py` instead: other noise
(t with 2 degrees of freedom, skewed, bursty, contaminated, 1.5% Gaussian) and another step mix
(2-8%, in clusters 4-12 commits apart, within 10 commits of the series' ends and within 3 of
flopwatch's window edges), `--series` per class as here.

Both detectors see the same values: flopwatch's `changepoint.detect_steps` with `--threshold` as
its smallest reported step, and Otava's analysis as its CLI runs it (`Series.analyze` with
`AnalysisOptions`: window 50, p 0.001, min magnitude 1%). A planted step is found (±2) when a
reported change point lies within 2 commits of it (each report matches one plant, nearest first),
found exactly when one lies at its commit; every report matching no plant is a false alarm;
precision = matched reports / reports. Time is the wall time of the detector calls alone, both in
this one process (threads limited to one; pin the process to a core with taskset). Exit status 0
when, on every seed, flopwatch's recall (±2) is at least Otava's, its false alarms at most a tenth
of Otava's and its time at most Otava's.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import importlib.util
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pipeline.history import changepoint


def _benchmark(name: str):
    """A sibling benchmark script (`detector_noise`, `detector_hard`) imported as a module."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


noise = _benchmark("detector_noise").noise

CLASSES = ("gaussian", "gaussian-2%", "heavy-tailed", "spiky", "bimodal", "drifting")
SIZES = (0.01, 0.02, 0.03, 0.05, 0.10)
TOLERANCE = 2


def plant(n: int, rng: np.random.Generator) -> list[tuple[int, float]]:
    """(index, factor) of the planted steps of one series: values[index:] *= factor."""
    events = int(rng.choice([0, 1, 1, 2]))
    for _ in range(1000):
        steps = []
        for _ in range(events):
            size = float(rng.choice(SIZES))
            factor = 1.0 + size if rng.random() < 0.7 else 1.0 / (1.0 + size)
            at = int(rng.integers(10, n - 10))
            steps.append((at, factor, size))
            if rng.random() < 0.3:
                steps.append((at + int(rng.integers(10, 61)), 1.0 / factor, size))
        at = sorted(s[0] for s in steps)
        if all(10 <= a <= n - 10 for a in at) and all(b - a >= 15 for a, b in itertools.pairwise(at)):
            return sorted(steps)
    raise RuntimeError("could not place the steps")


def make_series(seed: int, per_class: int, n: int) -> list[dict]:
    """The benchmark's series: noise class, values and planted steps (index, size)."""
    out = []
    for c, kind in enumerate(CLASSES):
        rng = np.random.default_rng([seed, c])
        for _ in range(per_class):
            values = 1e-3 * noise(kind, n, rng)
            steps = plant(n, rng)
            for at, factor, _ in steps:
                values[at:] *= factor
            out.append({"noise": kind, "values": values, "steps": [(at, size) for at, _, size in steps]})
    return out


def _hard():
    hard = _benchmark("detector_hard")
    return hard.make_series, hard.SIZES, hard.CLASSES


GENERATORS = {"project": lambda: (make_series, SIZES, CLASSES), "hard": _hard}


def flopwatch_detector(threshold: float):
    def detect(values: np.ndarray) -> list[int]:
        commits = [f"c{i}" for i in range(values.size)]
        return [s.index for s in changepoint.detect_steps(values, commits, threshold=threshold)]
    return detect


def otava_detector(window: int, pvalue: float, magnitude: float):
    """Otava's analysis of one metric, called as its CLI calls it (`otava.main.Otava.analyze`:
    the importer's `Series`, then `Series.analyze(options)`)."""
    from otava.series import AnalysisOptions, Metric, Series

    options = AnalysisOptions()
    options.window_len, options.max_pvalue, options.min_magnitude = window, pvalue, magnitude

    def detect(values: np.ndarray) -> list[int]:
        series = Series("bench", None, time=list(range(values.size)), metrics={"v": Metric(1, 1.0)},
                        data={"v": values.tolist()}, attributes={})
        return sorted(cp.index for cp in series.analyze(options).change_points["v"])
    return detect


def match(planted: list[int], reported: list[int], tolerance: int) -> dict[int, int]:
    """Planted index → the reported index it is matched with (nearest pairs first, each once)."""
    pairs = sorted((abs(p - r), p, r) for p in planted for r in reported if abs(p - r) <= tolerance)
    used_p, used_r, out = set(), set(), {}
    for _, p, r in pairs:
        if p not in used_p and r not in used_r:
            used_p.add(p)
            used_r.add(r)
            out[p] = r
    return out


def score(detect, series: list[dict], sizes=SIZES, classes=CLASSES) -> dict:
    seconds = 0.0
    by_size = {s: {"planted": 0, "exact": 0, "within": 0} for s in sizes}
    false_by_class = {k: 0 for k in classes}
    reports = 0
    for s in series:
        start = time.perf_counter()
        reported = detect(s["values"])
        seconds += time.perf_counter() - start
        planted = [at for at, _ in s["steps"]]
        matched = match(planted, reported, TOLERANCE)
        exact = set(planted) & set(reported)
        for at, size in s["steps"]:
            row = by_size[size]
            row["planted"] += 1
            row["exact"] += at in exact
            row["within"] += at in matched
        reports += len(reported)
        false_by_class[s["noise"]] += len(reported) - len(matched)
    planted = sum(r["planted"] for r in by_size.values())
    within = sum(r["within"] for r in by_size.values())
    false = sum(false_by_class.values())
    return {"seconds": round(seconds, 2), "planted": planted, "exact": sum(r["exact"] for r in by_size.values()),
            "within": within, "recall_exact": sum(r["exact"] for r in by_size.values()) / planted,
            "recall": within / planted, "reports": reports, "false_alarms": false,
            "precision": (reports - false) / reports if reports else 1.0,
            "by_size": {f"{s:.0%}": r for s, r in by_size.items()}, "false_by_class": false_by_class}


def table(seed: int, results: dict[str, dict], sizes=SIZES, classes=CLASSES) -> str:
    names = list(results)
    lines = [f"seed {seed}: " + ", ".join(f"{k} {results[k]['seconds']:.2f} s" for k in names),
             "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for size in sizes:
        key = f"{size:.0%}"
        cells = [f"{r['by_size'][key]['exact']} / {r['by_size'][key]['within']} of {r['by_size'][key]['planted']}"
                 for r in results.values()]
        lines.append(f"| found {key} steps (exact / ±2) | " + " | ".join(cells) + " |")
    lines.append("| recall exact / ±2 | " + " | ".join(
        f"{r['recall_exact']:.1%} / **{r['recall']:.1%}**" for r in results.values()) + " |")
    for kind in classes:
        lines.append(f"| false alarms, {kind} | " + " | ".join(str(r["false_by_class"][kind])
                                                           for r in results.values()) + " |")
    lines.append("| false alarms, all | " + " | ".join(f"**{r['false_alarms']}**" for r in results.values()) + " |")
    lines.append("| precision | " + " | ".join(f"{r['precision']:.1%}" for r in results.values()) + " |")
    lines.append("| time | " + " | ".join(f"**{r['seconds']:.2f} s**" for r in results.values()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from pipeline.history.verdicts import parse_threshold

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--generator", choices=GENERATORS, default="project",
                    help="project: the classes and steps above; hard: benchmarks/detector_hard.py")
    ap.add_argument("--series", type=int, default=50, help="series per noise class")
    ap.add_argument("--length", type=int, default=365, help="points per series (nightly commits)")
    ap.add_argument("--threshold", default="1%", help="flopwatch's smallest reported step")
    ap.add_argument("--window", type=int, default=50, help="Otava's window")
    ap.add_argument("--pvalue", type=float, default=0.001, help="Otava's maximum p-value")
    ap.add_argument("--magnitude", type=float, default=0.01, help="Otava's minimum relative change")
    ap.add_argument("--no-otava", action="store_true", help="flopwatch only (Otava not installed)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    detectors = {"flopwatch": flopwatch_detector(parse_threshold(args.threshold))}
    if not args.no_otava:
        detectors["otava"] = otava_detector(args.window, args.pvalue, args.magnitude)
    make, sizes, classes = GENERATORS[args.generator]()
    print(f"generator {args.generator}: {len(classes)} noise classes × {args.series} series × {args.length} points; flopwatch threshold "
          f"{args.threshold}; Otava window {args.window}, p {args.pvalue}, magnitude {args.magnitude}; "
          f"numpy {np.__version__}; load {os.getloadavg()[0]:.2f}")
    summary, ok = {"generator": args.generator, "seeds": {}}, True
    for seed in args.seeds:
        series = make(seed, args.series, args.length)
        results = {}
        # Alternate which runs first, so that neither always gets a warm cache.
        for name in (list(detectors) if seed % 2 else list(detectors)[::-1]):
            results[name] = score(detectors[name], series, sizes, classes)
        results = {name: results[name] for name in detectors}
        print(table(seed, results, sizes, classes), flush=True)
        if "otava" in results:
            f, o = results["flopwatch"], results["otava"]
            met = {"recall": f["recall"] >= o["recall"], "false_alarms": f["false_alarms"] * 10 <= o["false_alarms"],
                   "time": f["seconds"] <= o["seconds"]}
            print(f"targets, seed {seed}: " + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in met.items()))
            ok &= all(met.values())
            results["targets_met"] = met
        summary["seeds"][seed] = results
    summary["load_after"] = round(os.getloadavg()[0], 2)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
