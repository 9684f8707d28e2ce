"""The warm runner of one device slot: a long-lived parent that has imported torch and the
workers but never touched a GPU, and forks one child per job.

A fresh interpreter per job paid ~3 s (interpreter, `import torch`, the bindings) for about a
second of measurement. A forked child starts with all of that already in memory and then does
exactly what a spawned child did: it creates its own GPU context, checks, times, writes
`result.json` and exits. Isolation is unchanged: the child runs in its own session (process
group) with its stdout/stderr in the job folder, so a segfault, an abort on a GPU memory fault
or a hang kills only that child, and the parent classifies it from the exit status like a
spawned child's. The zygote itself must never initialise CUDA/HIP (a context does not survive
fork): it imports modules only. On a GPU slot the child is usually forked ahead of its request
and has made its context while the job before ran (`workers.spare`); it is handed the request
and goes on exactly as a freshly forked child.

Requests may queue: a GPU slot sends the next job while one runs, and the zygote starts it once
every running job has said that its timing loop is over (`workers.handoff`), so a finished
job's last check and exit overlap the next job's start, and no job's kernel or check runs
beside another's timing loop. A CPU job never says so: CPU jobs run one at a time.

Protocol (the zygote side runs as `python -m workers.zygote`): one JSON request per line on
stdin, `{"id", "cwd", "args", "timeout_s", "max_write_bytes"}`; the replies on the zygote's
original stdout are `{"id", "pid"}` when the job's child starts (its timeout counts from
then), then `{"id", "returncode", "timed_out", "left_behind", "write_limit_hit", "seconds"}`.
The zygote is a child subreaper, and so is each job's child: processes a job leaves behind,
daemons included, stay in its own tree while it runs and are killed when it ends, counted in
its `left_behind`. End of file on stdin (the slot is gone) ends the running jobs and the zygote.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from workers import device_lock, handoff, spare
from workers.containment import Scope, become_subreaper
from workers.sandbox import WRITE_POLL_S, ChildOutcome, outcome_from, tail

# -- zygote side -------------------------------------------------------------------------------

def _child(cwd: str, args: list[str], new_session: bool = True, handoff_fd: int | None = None) -> None:
    """In the forked child: a new session (a spare has one already), stdio to the job folder,
    then `workers.child.main`. `handoff_fd`: where it says that its timing loop is over
    (`workers.handoff`; a spare was given its own)."""
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
        from workers import child

        code = child.main(["workers.child", *args])
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

    from workers.sandbox import MAX_FILE_BYTES

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
    handoff_fd: int | None  # read end of the job's `workers.handoff` pipe
    waited_s: float = 0.0  # from its request's arrival to its start
    released: bool = False  # it said its timing loop is over (or can no longer say so)


class _Runner:
    """The zygote's loop: requests in on stdin, replies out on `proto`, jobs started one after
    the other as `workers.handoff` allows, each in a scope of its own."""

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
                _drop(self.prepared)  # nobody needs them soon: free their GPU contexts

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
                    _drop(self.prepared)
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


def serve() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints of imported modules must not corrupt the protocol
    # Import what every job needs, without touching a device (`import torch` does not create a
    # context; `torch.cuda.is_available()` would initialise the driver, so it is not called).
    import torch  # noqa: F401

    import workers.bindings
    import workers.child
    import workers.correctness
    import workers.timing  # noqa: F401

    if os.environ.get(spare.ENV_KIND, "cpu") != "cpu":
        _import_triton()
    # Orphans of the jobs (a daemon a kernel double-forked) become this process's children, so
    # each job's scope can find and end them (`workers.containment`).
    become_subreaper()
    lock = _device_lock() if spare.wanted(dict(os.environ)) else None
    proto.write(json.dumps({"ready": os.getpid()}) + "\n")
    runner = _Runner(proto, spare.wanted(dict(os.environ)))
    try:
        runner.loop()
    finally:
        _drop(runner.prepared)
        if lock:
            for name in (lock, lock + ".gate"):
                Path(name).unlink(missing_ok=True)


def _drop(spares: list[spare.Spare]) -> None:
    while spares:
        spares.pop().discard()


def _handed(cwd: str, args: list[str], handoff_fd: int | None = None) -> None:
    """What a spare does with its job: what a freshly forked child does, in the session it has."""
    _child(cwd, args, new_session=False, handoff_fd=handoff_fd)


def _import_triton() -> None:
    """Triton's import (about a second) paid once here rather than by every Triton job. It
    creates no GPU context: its driver starts at the first launch. Its compiler key too: a hash
    of Triton's own sources and shared library that every process computes once, before its
    first kernel is looked up in the disk cache (benchmarks/triton_first_call.py); host work
    only, so it is taken here and every forked job inherits it."""
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 — not installed, or broken: a Triton job reports it itself
        return
    try:
        try:
            from triton.runtime.cache import triton_key
        except ImportError:
            from triton.compiler.compiler import triton_key
        triton_key()
    except Exception:  # noqa: BLE001 — another Triton: its jobs take the key themselves, as before
        pass


def _device_lock() -> str | None:
    """The file of this runner's device lock (`workers.device_lock`), named to its children:
    the slot's (it holds the lock itself while a profiler runs), or one of its own, which it
    returns to be removed at its end."""
    if device_lock.path():
        return None
    os.environ[device_lock.ENV] = device_lock.new_path()
    return os.environ[device_lock.ENV]


# -- slot side ---------------------------------------------------------------------------------

class ZygoteDied(RuntimeError):
    pass


def _read_line(proc: subprocess.Popen, unread: bytes, timeout_s: float | None) -> tuple[dict, bytes]:
    """The next reply line of `proc` and what was read beyond it (`timeout_s` None: however
    long it takes). Read from the pipe's descriptor with a buffer of our own: a fast job's two
    replies (pid, outcome) often arrive together, and a buffered `readline` would take both,
    leaving `select` to wait out the timeout for the second."""
    assert proc.stdout
    fd = proc.stdout.fileno()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while b"\n" not in unread:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and (left <= 0 or not select.select([fd], [], [], left)[0]):
            raise ZygoteDied(f"no answer in {timeout_s:g} s")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise ZygoteDied(f"exited with code {proc.wait()}")
        unread += chunk
    line, rest = unread.split(b"\n", 1)
    return json.loads(line), rest


class Zygote:
    """Client of one zygote process; restarts it when it has died. Thread-safe: a GPU slot
    keeps its next job queued at the runner (`workers.handoff`), so two threads of the slot
    wait here at once, each for the replies to its own request (a reader thread sorts the
    replies by request id)."""

    def __init__(self, env: dict):
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.started = 0
        # Bytes read from the zygote's stdout that do not yet end a line (see `_read`).
        self._unread = b""
        self._lock = threading.Lock()  # starting the zygote, writing requests, the reply queues
        self._ids = itertools.count(1)
        # The reply queue of each request in flight, and the zygote process it was sent to.
        self._replies: dict[int, tuple[queue.SimpleQueue, subprocess.Popen]] = {}
        self._timeouts: dict[int, float] = {}  # timeout of each request in flight

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "workers.zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env,
                                     start_new_session=True, text=True, bufsize=1)
        self._unread = b""
        self.started += 1
        ready = self._read(300.0)
        if "ready" not in ready:
            raise ZygoteDied(f"unexpected first line {ready}")
        threading.Thread(target=self._sort_replies, args=(self.proc, self._unread), daemon=True,
                         name="flopwatch-zygote-replies").start()
        self._unread = b""  # the reader thread's from here on

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ensure_started(self) -> None:
        """Start the zygote now (a slot does so at its start, so that the imports overlap the
        builds instead of the first job)."""
        with self._lock:
            if not self.alive():
                self.start()

    def _read(self, timeout_s: float | None) -> dict:
        """The zygote's next reply line, before its reader thread takes over (its "ready")."""
        line, self._unread = _read_line(self.proc, self._unread, timeout_s)
        return line

    def _sort_replies(self, proc: subprocess.Popen, unread: bytes) -> None:
        """Reader thread of one zygote process (its own pipe and buffer, whatever process the
        client starts next): each reply to the queue of its request; at the zygote's end, a
        ZygoteDied to every request that was sent to it."""
        try:
            while True:
                reply, unread = _read_line(proc, unread, None)
                with self._lock:
                    waiting = self._replies.get(reply.get("id"))
                if waiting is not None:
                    waiting[0].put(reply)
        except (ZygoteDied, OSError, ValueError) as exc:
            died = exc if isinstance(exc, ZygoteDied) else ZygoteDied(f"{type(exc).__name__}: {exc}")
            with self._lock:
                for waiting, sent_to in self._replies.values():
                    if sent_to is proc:
                        waiting.put(died)

    def _reply(self, waiting: queue.SimpleQueue, timeout_s: float) -> dict:
        try:
            reply = waiting.get(timeout=timeout_s)
        except queue.Empty:
            raise ZygoteDied(f"no answer in {timeout_s:g} s") from None
        if isinstance(reply, ZygoteDied):
            raise reply
        return reply

    def run(self, args: list[str], timeout_s: float, workdir: Path, max_write_bytes: int | None = None) -> ChildOutcome:
        """Have the zygote run `workers.child` with `args` in `workdir` in a child of its own;
        the same outcome record as `sandbox.run_child`. A zygote that died is started again
        (once per job)."""
        for attempt in (1, 2):
            pid, waiting = None, queue.SimpleQueue()
            with self._lock:
                try:
                    if not self.alive():
                        self.start()
                    req_id = next(self._ids)
                    proc = self.proc
                    self._replies[req_id] = (waiting, proc)
                    self._timeouts[req_id] = timeout_s
                    # The job starts once those ahead of it have timed (or ended): its pid may
                    # take as long as their timeouts.
                    start_within = sum(self._timeouts.values()) + 60.0
                    proc.stdin.write(json.dumps({"id": req_id, "cwd": str(workdir), "args": args,
                                                 "timeout_s": timeout_s, "max_write_bytes": max_write_bytes}) + "\n")
                    proc.stdin.flush()
                except (ZygoteDied, BrokenPipeError, OSError, ValueError):
                    self._discard(None)
                    if attempt == 2:
                        raise
                    continue
            try:
                pid = self._reply(waiting, start_within)["pid"]
                done = self._reply(waiting, timeout_s + 60.0)
            except ZygoteDied:
                self._discard(pid, proc)
                if attempt == 2 or pid is not None:
                    raise
                continue  # died before this job started: start a fresh one and go on
            finally:
                with self._lock:
                    self._replies.pop(req_id, None)
                    self._timeouts.pop(req_id, None)
            return outcome_from(done["returncode"], done["timed_out"], done["seconds"], workdir,
                                left_behind=done.get("left_behind", 0), write_limit_hit=done.get("write_limit_hit", False),
                                waited_s=done.get("waited_s", 0.0))
        raise AssertionError("unreachable")

    def _discard(self, child_pid: int | None, proc: subprocess.Popen | None = None) -> None:
        """Kill a broken zygote (the one `proc` names, if it is still the current one) and the
        child it may have left behind."""
        if child_pid:
            try:
                os.killpg(child_pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        with self._lock:
            if self.proc is None or (proc is not None and self.proc is not proc):
                return  # already replaced by a fresh one
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None
            self._unread = b""

    def close(self) -> None:
        with self._lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._discard(None, proc)
        self.proc = None


__all__ = ["Zygote", "ZygoteDied", "serve", "tail"]

if __name__ == "__main__":
    serve()
