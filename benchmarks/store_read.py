"""How fast the store hands a year of history to detect and report, and how fast it takes results.

    python3 benchmarks/store_read.py [--store URL_OR_PATH] [--commits 365] [--variants 25] [--repeat 5]

Without `--store` it first writes the synthetic year of `benchmarks/synthetic_history.py` into a
temporary SQLite store (timing the writes: one transaction per result, as `flopwatch run`
writes). With `--store` pointing at an existing history (a SQLite path, `sqlite:///…` or
`postgresql://…`) it only reads. Then, `--repeat` times each, it times the three bulk reads the
history commands make:

- `results(columns=TIMING_COLUMNS)`: what `detect` reads (run-time samples, no counters);
- `results(columns=SERIES_COLUMNS)`: what the site reads (with resources and counters);
- `series.load(details=False)`: the read plus building every series.

and prints the fastest wall time and the least CPU time of each (and the load average: on a
shared machine the CPU time of this process is the figure least disturbed by other work).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pipeline.history import series
from pipeline.store import Store


def _generator():
    spec = importlib.util.spec_from_file_location("synthetic_history", HERE / "synthetic_history.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _times(fn, repeat: int) -> tuple[list[float], list[float], object]:
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", help="an existing history (path or URL); default: write a synthetic one")
    ap.add_argument("--commits", type=int, default=365)
    ap.add_argument("--variants", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="flopwatch-store-read-") as tmp:
        target = args.store
        if target is None:
            start = time.perf_counter()
            planted = _generator().write_history(Path(tmp), args.commits, args.variants)
            seconds = time.perf_counter() - start
            target = str(Path(planted["repo"]) / ".flopwatch" / "results.db")
            rows = args.commits * args.variants * 4
            print(f"wrote {rows} results in {seconds:.1f} s ({rows / seconds:.0f} results/s, "
                  f"one transaction each; includes generating them)")
        with Store(target) as store:
            for label, fn in (
                ("results(TIMING_COLUMNS)", lambda: store.results(columns=series.TIMING_COLUMNS)),
                ("results(SERIES_COLUMNS)", lambda: store.results(columns=series.SERIES_COLUMNS)),
                ("series.load(details=False)", lambda: series.load(store, details=False)),
            ):
                walls, cpus, out = _times(fn, args.repeat)
                print(f"{label:28s} wall fastest {min(walls):7.3f} s, median {statistics.median(walls):7.3f} s; "
                      f"CPU least {min(cpus):7.3f} s  ({len(out)} {'rows' if 'results' in label else 'series'})")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
