"""Run one job in a child process with a timeout, so a kernel that segfaults, aborts
("Memory access fault by GPU node-2 ... Aborted (core dumped)") or hangs takes only itself down."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from workers.isolation.containment import Scope


@dataclass(frozen=True)
class ChildOutcome:
    returncode: int | None
    signal_name: str
    timed_out: bool
    seconds: float
    stderr_tail: str
    stdout_tail: str
    # Processes of the job still alive when its main process ended (or was killed at the
    # timeout, then only those outside its process group): killed, and counted here.
    left_behind: int = 0
    # The job's processes wrote more than the caller's limit in total: stopped there.
    write_limit_hit: bool = False
    # Seconds the request waited at a warm runner for the job ahead of it to finish timing
    # (`workers.job.handoff`) before its child started; not part of `seconds`.
    waited_s: float = 0.0


# What a job's process may write to one file (its stdout and stderr are files; profiler reports
# of one call stay far below). Beyond it a write fails (EFBIG; SIGXFSZ where not ignored, and
# Python ignores it), so a kernel flooding stdout fills no disk.
MAX_FILE_BYTES = 256 << 20


def tail(path: Path, limit: int = 4000) -> str:
    """The last `limit` bytes of `path`, read from the end (a flood is never read whole)."""
    if not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - limit))
        data = f.read(limit)
    return data.decode(errors="replace")


def _limit_child(pid: int) -> None:
    """Cap the size of any file the child writes. Set from outside with prlimit rather than in a
    preexec_fn: the runner lives in a threaded Ray worker, where code between fork and exec can
    deadlock. The child is a Python interpreter still starting up, long before a kernel writes."""
    import resource

    try:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    except (ProcessLookupError, PermissionError):
        pass  # already gone: nothing left to limit


# How often a running job's total writes are looked at: a job writing at 2 GB/s passes its
# limit by at most this many seconds' worth before it is stopped. Each look reads only the
# job's process tree from /proc (0.2 ms for a torch child on the 2-core CI machine; a scan of
# every process there took 8-22 ms, which a CPU timing beside it would feel).
WRITE_POLL_S = 0.25


def run_child(argv: list[str], timeout_s: float, workdir: Path, env: dict | None = None,
              max_write_bytes: int | None = None) -> ChildOutcome:
    """Run `argv` in its own process group; kill the whole group at the timeout (a hung GPU
    kernel may have helper threads or a profiler parent), or when its processes have written
    more than `max_write_bytes` together. Whatever it started is ended with it, daemons that
    left the group included (`workers.isolation.containment`)."""
    out_path, err_path = workdir / "stdout.txt", workdir / "stderr.txt"
    start = time.monotonic()
    with Scope(own_session=True) as scope:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, cwd=workdir, stdout=out, stderr=err, env=env, start_new_session=True)
            _limit_child(proc.pid)
            timed_out = over_limit = False
            deadline = start + timeout_s
            while True:
                try:
                    proc.wait(timeout=max(0.0, min(WRITE_POLL_S, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() >= deadline:
                    timed_out = True
                    break
                if max_write_bytes is not None and scope.written_bytes() > max_write_bytes:
                    over_limit = True
                    break
            if timed_out or over_limit:
                _kill_group(proc)
            proc.wait()
        # Always, not only at the timeout: whatever the kernel started (a daemon, a stray
        # server) must not outlive the job and disturb the next one.
        left = scope.end()
    return outcome_from(proc.returncode, timed_out, round(time.monotonic() - start, 3), workdir,
                        left_behind=left, write_limit_hit=over_limit)


def outcome_from(code: int | None, timed_out: bool, seconds: float, workdir: Path, left_behind: int = 0,
                 write_limit_hit: bool = False, waited_s: float = 0.0) -> ChildOutcome:
    """The record of a finished child (spawned here or forked by a zygote) that wrote its
    stdout/stderr into `workdir`; a negative `code` is the signal that killed it."""
    sig = ""
    if code is not None and code < 0:
        sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else f"signal {-code}"
    return ChildOutcome(code, sig, timed_out, seconds, tail(workdir / "stderr.txt"), tail(workdir / "stdout.txt"),
                        left_behind, write_limit_hit, waited_s)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
