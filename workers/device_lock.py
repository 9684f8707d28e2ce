"""Who may use a slot's GPU while a job times on it.

A slot's warm runner prepares the next job's process (a GPU context, first-use kernels) while
the current job runs (`workers.spare`). Two processes on one GPU share it by time slices, so
the preparation must never overlap the timing loop (warm-up and samples): the preparing process
holds this lock shared, the timing loop holds it exclusively. The correctness checks take no
lock: they are not timed, and that is where the preparation hides.

The lock is a file named by FLOPWATCH_DEVICE_LOCK (set by the warm runner for its children),
locked with flock(2): the kernel releases it when its holder dies, so a crashed preparation
never blocks a job. Without the variable (a spawned child, a CPU slot) both are no-ops.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

ENV = "FLOPWATCH_DEVICE_LOCK"
# How long a timing loop waits for a preparation to end before it times anyway: a preparation
# takes about a second; one that hangs must not cost the job (its own timeout is far longer).
MAX_WAIT_S = 30.0


def path() -> str | None:
    return os.environ.get(ENV) or None


@contextlib.contextmanager
def _held(mode: int, max_wait_s: float | None) -> Iterator[float | None]:
    """Hold the lock in `mode`; yields the seconds waited for it (None: no lock here, or it
    could not be had within `max_wait_s` and the caller goes on without it). `max_wait_s`
    None: wait as long as it takes."""
    where = path()
    if where is None:
        yield None
        return
    try:
        fd = os.open(where, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield None
        return
    began = time.perf_counter()
    got = False
    try:
        if max_wait_s is None:
            fcntl.flock(fd, mode)
            got = True
        while not got:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                got = True
                break
            except BlockingIOError:
                if time.perf_counter() - began > max_wait_s:
                    break
                time.sleep(0.002)
        yield (time.perf_counter() - began) if got else None
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def timing(max_wait_s: float = MAX_WAIT_S):
    """The timing loop's hold: no preparation runs on the GPU meanwhile."""
    return _held(fcntl.LOCK_EX, max_wait_s)


def preparing(max_wait_s: float | None = None):
    """A preparation's hold: it waits while a job times (however long that takes: nobody needs
    it before the job ends), and a job's timing loop waits for it to end."""
    return _held(fcntl.LOCK_SH, max_wait_s)
