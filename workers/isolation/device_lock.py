"""Who may use a slot's GPU while a job times on it.

A slot's warm runner prepares the next jobs' processes while the current job runs
(`workers.job.spare`). Two processes on one GPU share it by time slices, so a preparation's
kernels must never overlap a timing loop (warm-up and samples). A preparation is a few short
steps (the first use of a few kernels, after its context, which is made outside the lock: it
runs no kernel); each step holds the device lock shared, and a timing loop holds it
exclusively. A second lock, the gate, gives timing loops the right of way: a timing loop
takes the gate first, so no step starts once a loop is waiting, and the loop waits only for the
step in progress (≤ 0.3 s on an H200). The correctness checks take no lock: they are not timed,
and that is where the preparation hides.

A loop need not sit idle while it waits: `claim` takes the gate and hands the loop a `Claim`
whose `ready()` asks for the device without blocking, so the adaptive rule warms the kernel up
while the step in progress ends and takes its first sample only once the device is its own
(`workers.measure.timing`, "the device to itself"). Warm-up launches beside a step are not samples;
the step itself may take a little longer.

The locks are files named by FLOPWATCH_DEVICE_LOCK (and that name + ".gate"), set by the warm
runner for its children, locked with flock(2): the kernel releases a lock when its holder dies,
so a crashed preparation never blocks a job. Without the variable (a spawned child, a CPU slot)
both holds are no-ops.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

ENV = "FLOPWATCH_DEVICE_LOCK"
# How long a timing loop waits for a preparation step to end before it times anyway: a step
# takes at most a few tenths of a second; one that hangs must not cost the job.
MAX_WAIT_S = 30.0


def path() -> str | None:
    return os.environ.get(ENV) or None


def new_path() -> str:
    """A fresh lock file for one device (its slot names it to the warm runner and to the
    profiler's child, which both run on that device)."""
    import tempfile

    fd, where = tempfile.mkstemp(prefix="flopwatch-device-lock-")
    os.close(fd)
    return where


@contextlib.contextmanager
def _held(where: str, mode: int, max_wait_s: float | None) -> Iterator[float | None]:
    """Hold the lock file `where` in `mode`; yields the seconds waited for it (None: it could
    not be had within `max_wait_s` and the caller goes on without it). `max_wait_s` None: wait
    as long as it takes."""
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
            except BlockingIOError:
                if time.perf_counter() - began > max_wait_s:
                    break
                time.sleep(0.002)
        yield (time.perf_counter() - began) if got else None
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class Claim:
    """A timing loop's claim on its device, gate already held (`claim`): `ready()` takes the
    device lock if it is free now, `wait()` waits for it; once held it stays held until the
    claim ends. Without a lock file the device is always ready."""

    def __init__(self, where: str | None, began: float, max_wait_s: float):
        self._where, self._began, self._deadline = where, began, began + max_wait_s
        self._fd: int | None = None
        self.held_after_s: float | None = 0.0 if where is None else None  # claim start → device held
        self.blocked_s = 0.0  # of that, the time spent blocked in `wait()` (the GPU idle meanwhile)
        self.gave_up = False  # not had within max_wait_s: the loop went on without it

    def ready(self) -> bool:
        if self.held_after_s is not None or self.gave_up:
            return True
        if self._fd is None:
            try:
                self._fd = os.open(self._where, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError:
                self.gave_up = True
                return True
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.perf_counter() > self._deadline:
                self.gave_up = True
                return True
            return False
        self.held_after_s = time.perf_counter() - self._began
        return True

    def wait(self) -> None:
        t0 = time.perf_counter()
        while not self.ready():
            time.sleep(0.002)
        self.blocked_s += time.perf_counter() - t0

    def waited_s(self) -> float | None:
        """Seconds from the claim to the device held (None: no lock here, or given up)."""
        return None if self._where is None or self.gave_up else self.held_after_s

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = None


@contextlib.contextmanager
def claim(max_wait_s: float = MAX_WAIT_S) -> Iterator[Claim]:
    """A timing loop's hold that lets it warm up while a preparation step ends: the gate is
    taken at once (no new step starts), the device when the `Claim` asks for it."""
    where = path()
    began = time.perf_counter()
    if where is None:
        yield Claim(None, began, max_wait_s)
        return
    with _held(where + ".gate", fcntl.LOCK_EX, max_wait_s) as gate:
        c = Claim(where, began, max_wait_s)
        if gate is None:
            c.gave_up = True
        else:
            c.blocked_s = gate  # another loop's (a profiler's) turn on this device
        try:
            yield c
        finally:
            c.release()


@contextlib.contextmanager
def timing(max_wait_s: float = MAX_WAIT_S) -> Iterator[float | None]:
    """A hold of the device from its start (a paired loop, a profiler): a `claim` that waits
    for the device at once. Yields the seconds waited (None: no lock here, or not had within
    `max_wait_s`)."""
    with claim(max_wait_s) as c:
        c.wait()
        yield c.waited_s()


@contextlib.contextmanager
def preparing() -> Iterator[float | None]:
    """One preparation step's hold: it waits while a timing loop waits or runs (however long
    that takes: nobody needs the step before the loop ends), and the loop waits for it."""
    where = path()
    if where is None:
        yield None
        return
    began = time.perf_counter()
    with _held(where + ".gate", fcntl.LOCK_SH, None):
        fd = os.open(where, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)  # before the gate is let go: a loop behind it waits for this step
    try:
        yield time.perf_counter() - began
    finally:
        os.close(fd)
