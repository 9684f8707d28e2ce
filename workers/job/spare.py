"""A GPU slot's next job processes, prepared while the current job runs.

Every job runs in a process of its own (a fault must kill only its job), and a fresh process
on a GPU first pays for the driver, its context, the cuBLAS handle and the first use of torch's
kernels that draw inputs, compute the reference and check the output: 0.5 s per job on an H200
(`benchmarks/spare_prep.py`), with the GPU idle meanwhile. A *spare* is a child the warm runner
(`workers.job.zygote`) forks ahead of its job: it does all that once on a tiny problem
(`workers.job.child.prepare`), then waits. A job request is handed to the oldest spare, and from
there it is exactly a forked job child: its own session, its stdio in the job folder, the job's
scope, timeout and write limit. Isolation is unchanged: a spare has run no code of the suite.

The preparation shares the GPU with the running job, so each of its steps that runs kernels or
allocates holds the device lock shared (`workers.isolation.device_lock`) and no such step runs
while a timing loop runs or waits; the driver's start and the context are made outside it
(`workers.job.child.CONTEXT_LOCK_ENV`: measured not to move a median, and the longest step). Preparing
takes ~0.4 s under the lock while a fast job leaves ~0.15 s outside its timing loop, so
`IN_FLIGHT` spares prepare across the windows of as many jobs. A spare that failed to prepare
(a GPU in exclusive-process mode refuses a second context) is dropped, the job gets a freshly
forked child as before, and the runner keeps no spares from then on. Idle spares are dropped
after `IDLE_S`: a slot kept between commands does not hold GPU contexts for nothing.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
from collections.abc import Callable

# Spares preparing or waiting at a time: with one, jobs waited 5.2 s in all for preparations on
# an H200 (docs/benchmarks.md); two have the windows of two jobs. Each holds a GPU context
# (~0.5 GiB) while it waits.
IN_FLIGHT = 2
# A spare nobody asked for in this long is dropped (its context freed).
IDLE_S = 30.0
# How long a job request waits for a spare still preparing before it takes a fresh child.
READY_WAIT_S = 60.0
PR_SET_PDEATHSIG = 1
ENV_KIND = "FLOPWATCH_SPARE_KIND"  # the slot's device kind; set for GPU slots only
ENV_OFF = "FLOPWATCH_SPARE"  # "0": no spares (a fresh child per job, to measure what they save)


def wanted(env: dict) -> str | None:
    """The device kind to prepare spares for, or None: a CPU slot (a CPU job starts in
    milliseconds: nothing to hide, unless FLOPWATCH_SPARE=1 asks), or spares turned off."""
    kind = env.get(ENV_KIND) or None
    if kind is None or env.get(ENV_OFF) == "0" or (kind == "cpu" and env.get(ENV_OFF) != "1"):
        return None
    return kind


class Spare:
    """The warm runner's handle on one spare."""

    def __init__(self, pid: int, command_fd: int, status_fd: int):
        self.pid, self._command_fd, self._status_fd = pid, command_fd, status_fd
        self.failed = False  # it said its preparation failed (not merely: it was not ready)

    def ready(self, wait_s: float = READY_WAIT_S) -> bool:
        """Whether it prepared, waiting up to `wait_s` for it to say so."""
        if not select.select([self._status_fd], [], [], wait_s)[0]:
            return False
        said = os.read(self._status_fd, 1)
        self.failed = said != b"R"
        return not self.failed

    def hand(self, cwd: str, args: list[str]) -> bool:
        """Give it the job; it becomes the job's process. False if it is gone."""
        try:
            os.write(self._command_fd, (json.dumps({"cwd": cwd, "args": args}) + "\n").encode())
        except OSError:
            self._close()
            return False
        os.close(self._command_fd)
        self._command_fd = -1
        return True

    def take_status_fd(self) -> int:
        """After `hand`: the pipe on which the job now says that its timing loop is over
        (`workers.job.handoff`); the caller closes it."""
        fd, self._status_fd = self._status_fd, -1
        return fd

    def discard(self) -> None:
        """Kill it and reap it."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self._close()

    def _close(self) -> None:
        for fd in (self._command_fd, self._status_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._command_fd = self._status_fd = -1


def fork(kind: str, run_job: Callable[..., None], close_fds: tuple[int, ...] = ()) -> Spare:
    """Fork a spare for a `kind` GPU. `run_job(cwd, args, handoff_fd)` is what it does with the
    job it is handed (never returns; `handoff_fd`: its `workers.job.handoff` pipe, the one it said
    it was ready on); `close_fds`: the runner's descriptors it must not keep open (the reply
    pipe to the slot, whose end of file tells the slot that the runner is gone)."""
    command_r, command_w = os.pipe()
    status_r, status_w = os.pipe()
    runner = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(command_w)
            os.close(status_r)
            for fd in close_fds:
                os.close(fd)
            _serve(kind, command_r, status_w, run_job, runner)
        finally:
            os._exit(70)
    os.close(command_r)
    os.close(status_w)
    return Spare(pid, command_w, status_r)


def _serve(kind: str, command_fd: int, status_fd: int, run_job: Callable[..., None], runner: int) -> None:
    """In the spare: a session of its own (as a job child has), prepare, say so, wait. The
    status pipe stays open: the job it is handed says on it when its timing loop is over."""
    os.setsid()
    die_with(runner)
    ok = _prepare(kind)
    os.write(status_fd, b"R" if ok else b"F")
    if not ok:
        os.close(status_fd)
    request = b""
    while not request.endswith(b"\n"):
        chunk = os.read(command_fd, 65536)
        if not chunk:  # the runner dropped this spare, or is gone
            os._exit(0)
        request += chunk
    os.close(command_fd)
    job = json.loads(request)
    run_job(job["cwd"], job["args"], status_fd)


def _prepare(kind: str) -> bool:
    from workers.isolation import device_lock
    from workers.job import child

    try:
        child.prepare(kind, step=device_lock.preparing)
        return True
    except Exception:  # noqa: BLE001 — any failure means: not a usable spare
        import traceback

        traceback.print_exc()
        return False


def die_with(runner: int) -> None:
    """This process dies with the runner `runner` (SIGKILL from the kernel): a spare nobody could
    hand a job, a job nobody could report (the runner's own end of file tells the slot)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != runner:  # the runner died before the line above took effect
        os._exit(0)
