"""Where the test suite's CPU goes, per test file: BSD process accounting (Debian's `acct`: one
record per ended process, with its CPU time, parent and start) joined with each test's start and
end on its pytest-xdist worker. A process is charged to the test its worker was running when the
process's outermost ancestor below the worker started.

    touch /tmp/pacct && accton /tmp/pacct
    FLOPWATCH_SUITE_TIMELINE=/tmp/timeline PYTHONPATH=benchmarks \\
        python3 -m pytest -q -n 4 --dist loadgroup -p suite_cpu
    accton off
    python3 benchmarks/suite_cpu.py /tmp/pacct /tmp/timeline [--top 30]

Processes that left their worker's tree (a daemon re-parented to init, a job forked by a warm
runner that started its own session) are counted apart, by name."""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import os
import subprocess
import time
from pathlib import Path

TIMELINE_ENV = "FLOPWATCH_SUITE_TIMELINE"


# -- the pytest plugin (`-p suite_cpu`): each test's start and end, per worker -------------------

def _hookwrapper():
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        folder = os.environ.get(TIMELINE_ENV)
        began = time.time()
        yield
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            with open(Path(folder) / f"{os.getpid()}.tsv", "a") as f:
                f.write(f"{began:.2f}\t{time.time():.2f}\t{item.nodeid}\n")

    return pytest_runtest_protocol


try:
    pytest_runtest_protocol = _hookwrapper()
except ImportError:  # run as a script without pytest
    pass


# -- the report ------------------------------------------------------------------------------------

def accounting(path: Path) -> list[tuple[int, int, str, float, float]]:
    """(pid, parent pid, name, CPU seconds, start epoch) of every ended process in `path`."""
    out = subprocess.run(["dump-acct", str(path)], capture_output=True, text=True, check=True).stdout
    records = []
    for line in out.splitlines():
        f = [x.strip() for x in line.split("|")]
        started = time.mktime(dt.datetime.strptime(f[14], "%a %b %d %H:%M:%S %Y").timetuple())
        records.append((int(f[9]), int(f[10]), f[0], (float(f[2]) + float(f[3])) / 100.0, started))
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pacct")
    parser.add_argument("timeline")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    tests: dict[int, list[tuple[float, float, str]]] = collections.defaultdict(list)
    for tsv in Path(args.timeline).glob("*.tsv"):
        for line in tsv.read_text().splitlines():
            began, ended, nodeid = line.split("\t", 2)
            tests[int(tsv.stem)].append((float(began), float(ended), nodeid.split("@")[0]))
    records = accounting(Path(args.pacct))
    by_pid: dict[int, list] = collections.defaultdict(list)
    for r in records:
        by_pid[r[0]].append(r)

    def owner(r):
        """(the worker, the start of the outermost ancestor below it), or (None, None)."""
        top = r
        for _ in range(64):
            if r[1] in tests:
                return r[1], top[4]
            parents = [p for p in by_pid.get(r[1], []) if p[4] <= r[4] + 1]
            if not parents:
                return None, None
            top = r = parents[-1]
        return None, None

    per_file, names = collections.Counter(), collections.defaultdict(collections.Counter)
    apart, workers_own = collections.Counter(), 0.0
    for r in records:
        if r[0] in tests:
            workers_own += r[3]
            continue
        worker, began = owner(r)
        if worker is None:
            apart[r[2]] += r[3]
            continue
        during = [t for t in tests[worker] if t[0] - 1 <= began <= t[1] + 1]
        file = during[0][2].split("::")[0] if during else "(between tests)"
        per_file[file] += r[3]
        names[file][r[2]] += r[3]
    total = sum(r[3] for r in records)
    print(f"{total:.0f} s of CPU in {len(records)} ended processes; the pytest workers' own {workers_own:.0f} s; "
          f"charged to test files {sum(per_file.values()):.0f} s; outside the workers' trees {sum(apart.values()):.0f} s "
          f"({', '.join(f'{n} {s:.0f}' for n, s in apart.most_common(4))})\n")
    print("| file | CPU s of its processes | most of it |\n|---|---:|---|")
    for file, seconds in per_file.most_common(args.top):
        top = ", ".join(f"{n} {s:.0f}" for n, s in names[file].most_common(3))
        print(f"| `{file}` | {seconds:.1f} | {top} |")


if __name__ == "__main__":
    main()
