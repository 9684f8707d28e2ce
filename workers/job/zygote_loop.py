"""The warm runner's loop (`workers.job.zygote` runs it): requests in on stdin, replies out, jobs
started as `workers.job.handoff` allows, each in a scope of its own; spares kept prepared; each
job's timeout and write limit enforced; everything ended when the slot is gone.

Every job runs in a child of its own, forked here or handed to a spare (`workers.job.spare`): a
new session, its stdio in the job folder, `workers.job.child.main`. Each child is a subreaper of
its own tree, so that the orphans of a job that still runs never land in this process's tree,
where the scope of another job running beside it would count them.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass

from workers.job import handoff, spare
from workers.isolation.containment import Scope, become_subreaper
from workers.isolation.sandbox import WRITE_POLL_S

def _child(cwd: str, args: list[str], new_session: bool = True, handoff_fd: int | None = None) -> None:
    """In the forked child: a new session (a spare has one already), stdio to the job folder,
    then `workers.job.child.main`. `handoff_fd`: where it says that its timing loop is over
    (`workers.job.handoff`; a spare was given its own)."""
    try:
        if new_session:
            os.setsid()
        # Orphans of whatever the job starts stay in its own tree while it runs, so that each of
        # two overlapping jobs keeps its own (`Scope` in the runner counts them per job).
        become_subreaper()
        if handoff_fd is not None:
            os.environ[handoff.ENV_FD] = str(handoff_fd)
        os.chdir(cwd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
            f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        _limit_files()
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        import faulthandler

        faulthandler.enable(file=sys.stderr)  # a segfault prints the Python stack, as in a spawned child
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from workers.job import child

        code = child.main(["workers.job.child", *args])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    except BaseException:  # never return into the zygote's loop from a child
        import traceback

        traceback.print_exc()
        os._exit(70)


def _limit_files() -> None:
    """The cap a spawned child gets from `sandbox` (a kernel flooding stdout fills no disk). Set
    in the child itself: the zygote is single-threaded, so code after fork is safe here."""
    import resource

    from workers.isolation.sandbox import MAX_FILE_BYTES

    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    except (ValueError, OSError):
        pass  # a lower hard limit is already in place


def _end_group(pid: int) -> None:
    """Kill the job's process group (as `sandbox` does at the timeout)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# Jobs alive at once in one runner: the one that may still time, and the one before it, ending.
MAX_RUNNING = 2
# How long a job waits for a spare still preparing while another job runs (the runner's loop
# serves that job's end meanwhile only after the wait): a fresh fork does the same work.
READY_WAIT_BUSY_S = 2.0


@dataclass
class _Running:
    """A job the runner started and has not yet reported."""

    req_id: object
    pid: int
    pidfd: int
    scope: Scope
    started: float
    deadline: float
    max_write_bytes: int | None
    handoff_fd: int | None  # read end of the job's `workers.job.handoff` pipe
    waited_s: float = 0.0  # from its request's arrival to its start
    released: bool = False  # it said its timing loop is over (or can no longer say so)


class JobLoop:
    """The zygote's loop: requests in on stdin, replies out on `proto`, jobs started one after
    the other as `workers.job.handoff` allows, each in a scope of its own."""

    def __init__(self, proto, spare_kind: str | None):
        self.proto, self.spare_kind = proto, spare_kind
        self.stdin = sys.stdin.fileno()
        self.inbox = b""
        self.waiting: deque[dict] = deque()
        self.running: dict[int, _Running] = {}
        self.prepared: list[spare.Spare] = []  # oldest first
        self.idle_since = time.monotonic()
        self.next_write_poll = 0.0

    def loop(self) -> None:
        while True:
            while self.waiting and self._may_start():
                self._start(self.waiting.popleft())
            fds = [self.stdin] + [j.pidfd for j in self.running.values()] + \
                  [j.handoff_fd for j in self.running.values() if j.handoff_fd is not None]
            ready = select.select(fds, [], [], self._timeout())[0]
            if self.stdin in ready and not self._read_requests():
                self._parent_gone()
                return
            for job in list(self.running.values()):
                if job.handoff_fd is not None and job.handoff_fd in ready:
                    self._heard(job)
                if job.pidfd in ready:
                    self._finish(job)
            self._enforce_limits()
            if self.prepared and not self.running and not self.waiting \
                    and time.monotonic() - self.idle_since >= spare.IDLE_S:
                drop(self.prepared)  # nobody needs them soon: free their GPU contexts

    def _may_start(self) -> bool:
        """A job starts when every running job has finished timing (a job's kernel and checks
        never run beside another job's timing loop) and fewer than MAX_RUNNING run."""
        return len(self.running) < MAX_RUNNING and all(j.released for j in self.running.values())

    def _timeout(self) -> float | None:
        now = time.monotonic()
        waits = [j.deadline - now for j in self.running.values()]
        if any(j.max_write_bytes is not None for j in self.running.values()):
            waits.append(self.next_write_poll - now)
        if self.prepared and not self.running:
            waits.append(self.idle_since + spare.IDLE_S - now)
        return max(0.0, min(waits)) if waits else None

    def _read_requests(self) -> bool:
        """Take what arrived on stdin; False at end of file (the slot is gone)."""
        try:
            chunk = os.read(self.stdin, 65536)
        except OSError:
            return False
        if not chunk:
            return False
        self.inbox += chunk
        while b"\n" in self.inbox:
            line, self.inbox = self.inbox.split(b"\n", 1)
            if line.strip():
                self.waiting.append({**json.loads(line), "_received": time.monotonic()})
        return True

    def _start(self, req: dict) -> None:
        waited_s = time.monotonic() - req.get("_received", time.monotonic())
        scope = Scope(own_session=True, nested=False)  # what already runs (other jobs, spares) is not its
        pid, handoff_fd = None, None
        if self.prepared:
            oldest = self.prepared.pop(0)
            wait_s = READY_WAIT_BUSY_S if self.running else spare.READY_WAIT_S
            if oldest.ready(wait_s) and oldest.hand(req["cwd"], req["args"]):
                pid, handoff_fd = oldest.pid, oldest.take_status_fd()
                scope.adopt(pid)
            else:
                if oldest.failed:
                    self.spare_kind = None  # this GPU will not take another context: no more spares
                    drop(self.prepared)
                oldest.discard()
        if pid is None:
            handoff_fd, write_end = os.pipe()
            runner = os.getpid()
            pid = os.fork()
            if pid == 0:
                # Not the runner's reply pipe: the slot must see its end of file when the runner
                # dies, and this job dies with it, as a spare's does.
                os.close(handoff_fd)
                os.close(self.proto.fileno())
                spare.die_with(runner)
                _child(req["cwd"], req["args"], handoff_fd=write_end)
            os.close(write_end)
            self._exclude_from_others(pid)
        self.proto.write(json.dumps({"id": req.get("id"), "pid": pid}) + "\n")
        now = time.monotonic()
        self.running[pid] = _Running(req.get("id"), pid, os.pidfd_open(pid), scope, now,
                                     now + float(req["timeout_s"]), req.get("max_write_bytes"), handoff_fd,
                                     waited_s=waited_s)
        self.next_write_poll = now + WRITE_POLL_S
        # The next jobs' processes prepare while this one runs; they are no job's.
        while self.spare_kind and len(self.prepared) < spare.IN_FLIGHT:
            self.prepared.append(spare.fork(self.spare_kind, _handed, close_fds=(self.proto.fileno(),)))
            self._exclude_from_others(self.prepared[-1].pid)

    def _exclude_from_others(self, pid: int) -> None:
        """`pid` appeared below the runner while these jobs' scopes are open; it is none of theirs."""
        for job in self.running.values():
            job.scope.exclude(pid)

    def _heard(self, job: _Running) -> None:
        try:
            said = os.read(job.handoff_fd, 16)
        except OSError:
            said = b""
        if handoff.TIMING_DONE in said or not said:  # said so, or the pipe's writer is gone
            job.released = True
            os.close(job.handoff_fd)
            job.handoff_fd = None

    def _finish(self, job: _Running, timed_out: bool = False, over_limit: bool = False) -> None:
        if timed_out or over_limit:
            _end_group(job.pid)
        _, st = os.waitpid(job.pid, 0)
        left = job.scope.end()
        for fd in (job.pidfd, job.handoff_fd):
            if fd is not None:
                os.close(fd)
        del self.running[job.pid]
        self.idle_since = time.monotonic()
        self.proto.write(json.dumps({"id": job.req_id, "returncode": os.waitstatus_to_exitcode(st),
                                     "timed_out": timed_out, "left_behind": left, "write_limit_hit": over_limit,
                                     "seconds": round(time.monotonic() - job.started, 3),
                                     "waited_s": round(job.waited_s, 3)}) + "\n")

    def _enforce_limits(self) -> None:
        """Kill a job at its timeout, or when its processes wrote more than its limit."""
        now = time.monotonic()
        poll = now >= self.next_write_poll
        if poll:
            self.next_write_poll = now + WRITE_POLL_S
        for job in list(self.running.values()):
            if now >= job.deadline:
                self._finish(job, timed_out=True)
            elif poll and job.max_write_bytes is not None and job.scope.written_bytes() > job.max_write_bytes:
                self._finish(job, over_limit=True)

    def _parent_gone(self) -> None:
        """The slot (or its whole node) is gone: no job may run on with nobody to report to."""
        for job in list(self.running.values()):
            _end_group(job.pid)
            os.waitpid(job.pid, 0)
            job.scope.end()
        self.running.clear()


def drop(spares: list[spare.Spare]) -> None:
    while spares:
        spares.pop().discard()


def _handed(cwd: str, args: list[str], handoff_fd: int | None = None) -> None:
    """What a spare does with its job: what a freshly forked child does, in the session it has."""
    _child(cwd, args, new_session=False, handoff_fd=handoff_fd)


