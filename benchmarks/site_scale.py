"""How long `flopwatch report` and `flopwatch detect` take on a year of nightly history, and how
big the site gets.

    python3 benchmarks/site_scale.py [--out DIR] [--commits 365] [--variants 25] [--repeat 3] [--json FILE]

Generates the history with `benchmarks/synthetic_history.py` (365 commits × 100 series, two
planted slowdowns), then times, as separate processes the way CI runs them, a fresh
`flopwatch report` (no site yet) and `flopwatch detect --threshold 3%` (which finds and stores
the regressions and rewrites the site), `--repeat` times each on a fresh copy of the store. It
prints the wall times, the site's size and file count, what detect found against what was
planted, and the load average before and after (the machine may be shared: compare figures
taken at similar load).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def _generator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("synthetic_history", HERE / "synthetic_history.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _flopwatch(*argv: str) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", *argv], env=env, capture_output=True, text=True,
                          check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"flopwatch {' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds, done.stdout


def _size(site: Path) -> tuple[int, int]:
    files = [p for p in site.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="work folder (default: a temporary one, removed after)")
    ap.add_argument("--commits", type=int, default=365)
    ap.add_argument("--variants", type=int, default=25, help="variants (× 4 shapes = series)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="flopwatch-scale-"))
    try:
        planted = _generator().write_history(out / "history", commits=args.commits, variants=args.variants)
        source = Path(planted["repo"])
        runs = []
        load_before = os.getloadavg()
        for i in range(args.repeat):
            repo = out / f"run{i}"
            shutil.copytree(source, repo, symlinks=True)
            report_s, _ = _flopwatch("report", "--repo", str(repo), "--branch", "main")
            detect_s, text = _flopwatch("detect", "--repo", str(repo), "--threshold", "3%", "--json")
            found = json.loads(text)["regressions"]
            size, files = _size(repo / ".flopwatch" / "site")
            runs.append({"report_s": round(report_s, 2), "detect_s": round(detect_s, 2),
                         "total_s": round(report_s + detect_s, 2), "site_bytes": size, "site_files": files,
                         "found": sorted((r["variant"], r["bad_sha"][:10], round(r["change"], 4)) for r in found)})
            print(f"run {i + 1}: report {report_s:.1f} s + detect {detect_s:.1f} s = {report_s + detect_s:.1f} s; "
                  f"site {size / 2**20:.1f} MiB in {files} files; {len(found)} regression(s)", flush=True)
            shutil.rmtree(repo)
        load_after = os.getloadavg()
        want = sorted((p["variant"], p["bad_sha"][:10]) for p in planted["plants"])
        got = [sorted((v, sha) for v, sha, _ in r["found"]) for r in runs]
        summary = {"commits": args.commits, "series": 4 * args.variants, "runs": runs,
                   "median_total_s": statistics.median(r["total_s"] for r in runs),
                   "planted_found_exactly": all(g == want for g in got),
                   "loadavg_before": [round(x, 2) for x in load_before],
                   "loadavg_after": [round(x, 2) for x in load_after], "cpus": os.cpu_count()}
        print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))
        if args.json:
            args.json.write_text(json.dumps(summary, indent=1))
        return 0 if summary["planted_found_exactly"] else 1
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
