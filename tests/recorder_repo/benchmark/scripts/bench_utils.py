"""What every benchmark script shares: the package's version, arguments, the timing, results."""

import argparse
import csv
import os
import signal
import subprocess
import sys
import time
from importlib.metadata import version

TOY_VERSION = version("toy-kernels")


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--reps", type=int, default=100)
    # misbehaviour, for the recorder's tests
    parser.add_argument("--crash-after", type=int, default=0, help="raise after this many sizes")
    parser.add_argument("--hang-after", type=int, default=0, help="hang after this many sizes")
    parser.add_argument("--hang-deaf", action="store_true", help="ignore SIGALRM from the start")
    parser.add_argument("--daemon-pid-file", default="", help="start a daemon, write its pid here")
    parser.add_argument("--write-outside", default="", help="write --write-mib MiB to this file")
    parser.add_argument("--write-mib", type=int, default=0)
    args = parser.parse_args()
    if args.hang_deaf:
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
    return args


def misbehave(args, sizes_done: int) -> None:
    if args.daemon_pid_file and sizes_done == 1:
        daemon = ("import os, time\nif os.fork(): os._exit(0)\nos.setsid()\n"
                  f"open({args.daemon_pid_file!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n")
        subprocess.run([sys.executable, "-c", daemon], check=True)
        while not os.path.exists(args.daemon_pid_file) or not _read(args.daemon_pid_file):
            time.sleep(0.01)
    if args.write_outside and sizes_done == 1:
        with open(args.write_outside, "wb") as f:
            for _ in range(args.write_mib):
                f.write(b"x" * (1 << 20))
                f.flush()
                time.sleep(0.005)
    if args.crash_after and sizes_done == args.crash_after:
        raise RuntimeError(f"planted failure after {sizes_done} sizes")
    if args.hang_after and sizes_done == args.hang_after:
        while True:
            time.sleep(1)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def time_loop(fn, reps: int) -> float:
    """Mean milliseconds of `fn` over `reps` calls."""
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) * 1e3 / reps


def save(rows: list[dict]) -> None:
    """Results next to the scripts, as Liger-Kernel keeps them (benchmark/data/)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "results.csv")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=sorted(rows[0]))
        writer.writerows(rows)
