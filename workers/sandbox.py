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


def run_child(argv: list[str], timeout_s: float, workdir: Path, env: dict | None = None) -> ChildOutcome:
    """Run `argv` in its own process group; kill the whole group at the timeout (a hung GPU
    kernel may have helper threads or a profiler parent)."""
    out_path, err_path = workdir / "stdout.txt", workdir / "stderr.txt"
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, cwd=workdir, stdout=out, stderr=err, env=env, start_new_session=True)
        _limit_child(proc.pid)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        # Always, not only at the timeout: whatever the kernel started in its process group
        # (a daemon, a stray server) must not outlive the job and disturb the next one.
        _kill_group(proc)
    code = proc.returncode
    sig = ""
    if code is not None and code < 0:
        sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else f"signal {-code}"
    return ChildOutcome(code, sig, timed_out, round(time.monotonic() - start, 3), tail(err_path), tail(out_path))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
