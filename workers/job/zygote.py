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
and has made its context while the job before ran (`workers.job.spare`); it is handed the request
and goes on exactly as a freshly forked child.

Requests may queue: a GPU slot sends the next job while one runs, and the zygote starts it once
every running job has said that its timing loop is over (`workers.job.handoff`), so a finished
job's last check and exit overlap the next job's start, and no job's kernel or check runs
beside another's timing loop. A CPU job never says so: CPU jobs run one at a time.

Protocol (the zygote side runs as `python -m workers.job.zygote`): one JSON request per line on
stdin, `{"id", "cwd", "args", "timeout_s", "max_write_bytes"}`; the replies on the zygote's
original stdout are `{"id", "pid"}` when the job's child starts (its timeout counts from
then), then `{"id", "returncode", "timed_out", "left_behind", "write_limit_hit", "seconds"}`.
The zygote is a child subreaper, and so is each job's child: processes a job leaves behind,
daemons included, stay in its own tree while it runs and are killed when it ends, counted in
its `left_behind`. End of file on stdin (the slot is gone) ends the running jobs and the zygote. The loop itself
is `workers.job.zygote_loop`; this module is its entry point and the slot's client of it.

A slot's first runner need not be spawned by the slot: on flopwatch's own local Ray it adopts a
*seed*, a runner the head started before Ray that imported torch while Ray started
(`workers.job.seed`); it is handed the pipes and environment the slot would have spawned it
with, and from its ready line on it is the same runner (`workers.job.runner_process`).
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
from pathlib import Path

from workers.isolation import affinity, device_lock
from workers.isolation.containment import become_subreaper
from workers.isolation.sandbox import ChildOutcome, outcome_from, tail
from workers.job import runner_process, spare
from workers.job.runner_process import Adopted, Spawned
from workers.job.zygote_loop import JobLoop, drop

# -- zygote side -------------------------------------------------------------------------------

def serve() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints of imported modules must not corrupt the protocol
    # Pinned to the slot's CPUs before any thread exists (torch's among them): every thread and
    # every job child from here on inherits the set.
    affinity.apply(dict(os.environ))
    marks = {"serving": time.time()}  # when each start-up step ended (the slot's timeline)
    take_imports(marks, triton=os.environ.get(spare.ENV_KIND, "cpu") != "cpu")
    serve_imported(proto, marks)


def take_imports(marks: dict, triton: bool) -> None:
    """Import what every job needs, once, without touching a device (`import torch` does not
    create a context; `torch.cuda.is_available()` would initialise the driver, so it is not
    called); `triton`: Triton and its compiler key too (a GPU slot's). The runner's list, for a
    spawned runner and a seed (`workers.job.seed`) alike; each step's end in `marks`."""
    import torch  # noqa: F401

    marks["torch"] = time.time()
    import workers.bindings
    import workers.job.child
    import workers.measure.correctness
    import workers.measure.timing  # noqa: F401

    marks["workers"] = time.time()
    if triton:
        take_triton(marks)


def take_triton(marks: dict) -> None:
    """Triton and its compiler key (`_import_triton`), unless `marks` says they were taken."""
    if "triton" not in marks:
        _import_triton()
        marks["triton"] = time.time()


def serve_imported(proto, marks: dict) -> None:
    """The runner once its imports are done: say it is ready (with `marks`) on `proto`, then run
    the jobs its slot sends on stdin until the slot is gone."""
    # Orphans of the jobs (a daemon a kernel double-forked) become this process's children, so
    # each job's scope can find and end them (`workers.isolation.containment`).
    become_subreaper()
    lock = _device_lock() if spare.wanted(dict(os.environ)) else None
    proto.write(json.dumps({"ready": os.getpid(), "marks": marks}) + "\n")
    runner = JobLoop(proto, spare.wanted(dict(os.environ)))
    try:
        runner.loop()
    finally:
        drop(runner.prepared)
        if lock:
            for name in (lock, lock + ".gate"):
                Path(name).unlink(missing_ok=True)


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
    """The file of this runner's device lock (`workers.isolation.device_lock`), named to its children:
    the slot's (it holds the lock itself while a profiler runs), or one of its own, which it
    returns to be removed at its end."""
    if device_lock.path():
        return None
    os.environ[device_lock.ENV] = device_lock.new_path()
    return os.environ[device_lock.ENV]


# -- slot side ---------------------------------------------------------------------------------

class ZygoteDied(RuntimeError):
    pass


RunnerProcess = Spawned | Adopted  # the runner's process as the slot holds it (`workers.job.runner_process`)


def _read_line(proc: RunnerProcess, unread: bytes, timeout_s: float | None) -> tuple[dict, bytes]:
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
            code = proc.wait()
            raise ZygoteDied("exited" if code is None else f"exited with code {code}")
        unread += chunk
    line, rest = unread.split(b"\n", 1)
    return json.loads(line), rest


class Zygote:
    """Client of one zygote process; restarts it when it has died. Thread-safe: a GPU slot
    keeps its next job queued at the runner (`workers.job.handoff`), so two threads of the slot
    wait here at once, each for the replies to its own request (a reader thread sorts the
    replies by request id)."""

    def __init__(self, env: dict, seeds: str | None = None, code_key: str = ""):
        """`env`: the runner's environment. `seeds`: where flopwatch's local Ray head keeps
        runners already importing (`workers.job.seed`), for the first start to adopt one of
        `code_key` (this flopwatch's code) instead of spawning."""
        self.env, self.seeds, self.code_key = env, seeds, code_key
        self.proc: RunnerProcess | None = None
        self.started = 0
        # When the last start's steps ended (epoch seconds): spawned, or the seed's start
        # ("seeded") and its adoption; the runner's own imports ("serving", "torch", "workers",
        # "triton"), and ready. A seed tried and not adopted: "seed_absent", "seed_refused" or
        # "seed_lost", when the slot gave up on it.
        self.marks: dict[str, float] = {}
        # Bytes read from the zygote's stdout that do not yet end a line (see `_read`).
        self._unread = b""
        self._lock = threading.Lock()  # starting the zygote, writing requests, the reply queues
        self._ids = itertools.count(1)
        # The reply queue of each request in flight, and the zygote process it was sent to.
        self._replies: dict[int, tuple[queue.SimpleQueue, RunnerProcess]] = {}
        self._timeouts: dict[int, float] = {}  # timeout of each request in flight

    def start(self) -> None:
        marks = {}
        self.proc = None
        # A slot's first runner: a seed if the head planted one. A runner that died is spawned
        # (the seeds left are other slots').
        if self.seeds and not self.started:
            try:
                self.proc = runner_process.adopt(self.seeds, self.env, self.code_key)
            except runner_process.NoSeed as exc:
                marks[f"seed_{exc.why}"] = time.time()
        if self.proc is None:
            marks["spawned"] = time.time()
            self.proc = runner_process.Spawned.start([sys.executable, "-m", "workers.job.zygote"], self.env)
        self._unread = b""
        self.started += 1
        ready = self._read(300.0)
        if "ready" not in ready:
            raise ZygoteDied(f"unexpected first line {ready}")
        self.marks = {**marks, **(ready.get("marks") or {}), "ready": time.time()}
        threading.Thread(target=self._sort_replies, args=(self.proc, self._unread), daemon=True,
                         name="flopwatch-zygote-replies").start()
        self._unread = b""  # the reader thread's from here on

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

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

    def _sort_replies(self, proc: RunnerProcess, unread: bytes) -> None:
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
        """Have the zygote run `workers.job.child` with `args` in `workdir` in a child of its own;
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

    def _discard(self, child_pid: int | None, proc: RunnerProcess | None = None) -> None:
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
            self.proc.kill_group()
            self.proc.wait()
            self.proc = None
            self._unread = b""

    def close(self) -> None:
        with self._lock:
            proc = self.proc
        if proc is not None and proc.alive():
            proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._discard(None, proc)
        self.proc = None


__all__ = ["Zygote", "ZygoteDied", "serve", "tail"]

if __name__ == "__main__":
    serve()
