"""How long detection and the report take on a long nightly history, how much memory and disk they
use, and how fast the dashboard opens: a year of one GPU, or three years of a fleet.

    python3 benchmarks/site_scale.py [--fleet] [--out DIR] [--commits N] [--variants N] [--shapes N]
                                     [--devices N] [--repeat 1] [--json FILE]

Generates the history with `benchmarks/synthetic_history.py` (the year: 365 commits × 100 series;
`--fleet`: 1,095 commits × 1,000 series), every night but the last. Then, on a fresh copy per
repeat, each command its own process as in CI:

1. cold: `flopwatch detect` with no window cache (detection of the whole history, the regressions
   stored, the whole site written: what a first nightly on an imported history does);
2. nightly: the last night's results are added, then `flopwatch detect` again: with the window
   cache of step 1 only the windows the new night changed are searched (the nightly's detect and
   report, without its benchmark run and bisections);
3. `flopwatch report` alone.

Per step: wall time, CPU time and peak memory of the process (os.wait4), windows searched. Then:
the site's size and file count, whether detection found every planted step at its planted commit
and nothing else, and the dashboard's load time in headless Chromium (`benchmarks/page_timing.py`,
median of 3). Thresholds are the per-device defaults (pipeline/project/config.py) unless `--threshold`
is given (the year's 4% and 5% plants need `--threshold 3%`). The load average
before and after is printed: the machine may be shared, compare figures taken at similar load.
"""

from __future__ import annotations

import argparse
import importlib.util
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


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _flopwatch(*argv: str) -> dict:
    """Run one flopwatch command; its wall and CPU seconds, peak memory and output."""
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    out = tempfile.TemporaryFile(mode="w+")
    err = tempfile.TemporaryFile(mode="w+")
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "pipeline.cli", *argv], env=env, stdout=out, stderr=err)
    _, code, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(code)
    out.seek(0)
    err.seek(0)
    if child.returncode != 0:
        raise SystemExit(f"flopwatch {' '.join(argv)} exited {child.returncode}:\n{err.read()[-2000:]}")
    return {"wall_s": round(seconds, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_mib": round(usage.ru_maxrss / 1024), "stdout": out.read()}


def _size(site: Path) -> tuple[int, int]:
    files = [p for p in site.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def _found(stdout: str) -> list[tuple]:
    return sorted((r["variant"], r["shape"], r["device"], r["bad_sha"]) for r in json.loads(stdout)["regressions"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fleet", action="store_true", help="three years of a fleet (synthetic_history.FLEET)")
    ap.add_argument("--out", type=Path, help="work folder, kept: a later run with the same sizes reuses its history "
                                             "(default: a temporary one, removed after)")
    for name in ("commits", "variants", "shapes", "devices"):
        ap.add_argument(f"--{name}", type=int)
    ap.add_argument("--threshold", help="detect's --threshold (default: per device kind, as a nightly)")
    ap.add_argument("--postgres", action="store_true",
                    help="start a private PostgreSQL server (tests/pg_server.py: Debian's pg_ctl on a free port) "
                         "and keep the history in a database of it (as --store)")
    ap.add_argument("--store", metavar="URL", help="keep the history in this store (e.g. an empty PostgreSQL "
                                                  "database): the generated SQLite history is imported into it "
                                                  "first (`flopwatch store import`, timed); one repeat only")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    if (args.store or args.postgres) and args.repeat > 1:
        ap.error("--store/--postgres: one repeat only (the runs write into the store)")
    if args.postgres:
        sys.path.insert(0, str(HERE.parent / "tests"))
        import pg_server

        if pg_server.why_not_available():
            ap.error(f"--postgres: {pg_server.why_not_available()}")
        server = pg_server.Server().start()
        try:
            with server.database("flopwatch_scale"):
                return main([a for a in (argv if argv is not None else sys.argv[1:]) if a != "--postgres"]
                            + ["--store", server.url("flopwatch_scale")])
        finally:
            server.stop()
    gen = _module("synthetic_history")
    timing = _module("page_timing")
    preset = gen.FLEET if args.fleet else {"commits": 365, "variants": 25, "shapes": 4, "devices": 1}
    size = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in preset.items()}
    out = args.out or Path(tempfile.mkdtemp(prefix="flopwatch-scale-"))
    try:
        kept = out / "history" / "planted.json"
        if kept.exists() and json.loads(kept.read_text())["settings"] == dict(size, fleet=args.fleet):
            planted = json.loads(kept.read_text())  # an earlier run's history (--out): generated once
        else:
            t0 = time.perf_counter()
            planted = gen.write_history(out / "history", fleet=args.fleet, nights=size["commits"] - 1, **size)
            kept.write_text(json.dumps(planted))
            print(f"history: {size['commits']} commits × {size['devices'] * size['variants'] * size['shapes']} "
                  f"series in {time.perf_counter() - t0:.0f} s", flush=True)
        source = Path(planted["repo"])
        store_args = ("--store", args.store) if args.store else ()
        imported = None
        if args.store:
            imported = _flopwatch("store", "import", str(source / ".flopwatch" / "results.db"), "--repo", str(source),
                                  *store_args)
            print(f"imported into {args.store.split('@')[-1]} in {imported['wall_s']} s", flush=True)
        want = sorted((s["variant"], s["shape"], s["device"], s["bad_sha"]) for s in planted["steps"])
        runs = []
        load_before = os.getloadavg()
        for i in range(args.repeat):
            repo = out / f"run{i}"
            shutil.copytree(source, repo, symlinks=True)
            limit = (("--threshold", args.threshold) if args.threshold else ()) + store_args
            cold = _flopwatch("detect", "--repo", str(repo), "--branch", "main", "--json", *limit)
            gen.add_night({**planted, "repo": str(repo)}, size["commits"] - 1, args.store)
            nightly = _flopwatch("detect", "--repo", str(repo), "--branch", "main", "--json", *limit)
            report = _flopwatch("report", "--repo", str(repo), "--branch", "main", *store_args)
            site = repo / ".flopwatch" / "site"
            site_bytes, files = _size(site)
            loads = [timing.load_times(site / "index.html") for _ in range(3)]
            run = {"cold": {k: v for k, v in cold.items() if k != "stdout"} | json.loads(cold["stdout"])["windows"],
                   "nightly": {k: v for k, v in nightly.items() if k != "stdout"}
                   | json.loads(nightly["stdout"])["windows"],
                   "report": {k: v for k, v in report.items() if k != "stdout"},
                   "site_bytes": site_bytes, "site_files": files,
                   "dashboard_interactive_ms": round(statistics.median(x["dom_interactive_ms"] for x in loads)),
                   "dashboard_load_ms": round(statistics.median(x["load_ms"] for x in loads)),
                   "found_cold": _found(cold["stdout"]) == want, "found_nightly": _found(nightly["stdout"]) == want}
            runs.append(run)
            print(f"run {i + 1}: cold detect+report {cold['wall_s']} s ({cold['cpu_s']} s CPU, {cold['peak_mib']} MiB, "
                  f"{run['cold']['searched']} windows searched); nightly detect+report {nightly['wall_s']} s "
                  f"({nightly['cpu_s']} s CPU, {nightly['peak_mib']} MiB, {run['nightly']['searched']} searched); "
                  f"report {report['wall_s']} s; site {site_bytes / 1e6:.1f} MB in {files} files; dashboard "
                  f"interactive {run['dashboard_interactive_ms']} ms, loaded {run['dashboard_load_ms']} ms; "
                  f"planted steps exactly: {run['found_cold'] and run['found_nightly']}", flush=True)
            shutil.rmtree(repo)
        summary = {"size": size, "series": size["devices"] * size["variants"] * size["shapes"],
                   "store": args.store.split("@")[-1] if args.store else "sqlite (the repository's results.db)",
                   "import_s": imported["wall_s"] if imported else None,
                   "planted_steps": len(want), "runs": runs,
                   "planted_found_exactly": all(r["found_cold"] and r["found_nightly"] for r in runs),
                   "loadavg_before": [round(x, 2) for x in load_before],
                   "loadavg_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}
        print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))
        if args.json:
            args.json.write_text(json.dumps(summary, indent=1))
        return 0 if summary["planted_found_exactly"] else 1
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
