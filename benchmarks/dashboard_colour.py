"""How often the dashboard colours a cell of a quiet series: the noise band's false-colour rate.

    python3 benchmarks/dashboard_colour.py [--commits 365] [--last-n 20]

Generates the synthetic year (`benchmarks/synthetic_history.py`), then replays the dashboard at
every commit from the 60th on: for each series without a planted step, the cell it would have
shown that morning (`pipeline.history.dashboard.cell`). Counts the cells coloured against the
previous commit and against the median of the last N, split into the nights the generator made
busy (+4% run time on one night; those, and the night after, should be coloured) and all others
(noise: those should not).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pipeline.history import dashboard, series
from pipeline.store import Store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=365)
    ap.add_argument("--last-n", type=int, default=20)
    args = ap.parse_args(argv)
    spec = importlib.util.spec_from_file_location("synthetic_history", HERE / "synthetic_history.py")
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen
    spec.loader.exec_module(gen)
    with tempfile.TemporaryDirectory() as tmp:
        planted = gen.write_history(Path(tmp), commits=args.commits)
        with Store(Path(planted["repo"]) / ".flopwatch" / "results.db") as store:
            all_series = series.load(store, planted["shas"], details=False)
    skip = {s["variant"] for s in planted["steps"]} | {"hip_broken", "hip_wrong_tile"}
    counts: Counter = Counter()
    for s in all_series:
        if s.variant in skip:
            continue
        busy = set(planted["spikes"].get("|".join(s.key), ()))
        for t in range(60, len(s.points)):
            c = dashboard.cell(dataclasses.replace(s, points=s.points[: t + 1]), args.last_n)
            night = "busy" if t in busy or t - 1 in busy else "quiet"
            counts[night, "cells"] += 1
            counts[night, "prev"] += c.move_prev != dashboard.SAME
            counts[night, "median"] += c.move_median != dashboard.SAME
    for night in ("quiet", "busy"):
        n = counts[night, "cells"]
        print(f"{night} nights: {n} cells; coloured vs previous {counts[night, 'prev']} "
              f"({counts[night, 'prev'] / n:.2%}), vs median of last {args.last_n} {counts[night, 'median']} "
              f"({counts[night, 'median'] / n:.2%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
