"""Run one job in a child process with a timeout, so a kernel that segfaults, aborts
("Memory access fault by GPU node-2 ... Aborted (core dumped)") or hangs takes only itself down."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ChildOutcome:
    returncode: int | None
    signal_name: str
    timed_out: bool
    seconds: float
    stderr_tail: str
    stdout_tail: str


def tail(path: Path, limit: int = 4000) -> str:
    if not path.exists():
        return ""
    data = path.read_bytes()[-limit:]
    return data.decode(errors="replace")


def run_child(argv: list[str], timeout_s: float, workdir: Path, env: dict | None = None) -> ChildOutcome:
    """Run `argv` in its own process group; kill the whole group at the timeout (a hung GPU
    kernel may have helper threads or a profiler parent)."""
    out_path, err_path = workdir / "stdout.txt", workdir / "stderr.txt"
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, cwd=workdir, stdout=out, stderr=err, env=env, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
    return outcome_from(proc.returncode, timed_out, round(time.monotonic() - start, 3), workdir)


def outcome_from(code: int | None, timed_out: bool, seconds: float, workdir: Path) -> ChildOutcome:
    """The record of a finished child (spawned here or forked by a zygote) that wrote its
    stdout/stderr into `workdir`; a negative `code` is the signal that killed it."""
    sig = ""
    if code is not None and code < 0:
        sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else f"signal {-code}"
    return ChildOutcome(code, sig, timed_out, seconds, tail(workdir / "stderr.txt"), tail(workdir / "stdout.txt"))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
