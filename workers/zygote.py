"""The warm runner of one device slot: a long-lived parent that has imported torch and the
workers but never touched a GPU, and forks one child per job.

A fresh interpreter per job paid ~3 s (interpreter, `import torch`, the bindings) for about a
second of measurement. A forked child starts with all of that already in memory and then does
exactly what a spawned child did: it creates its own GPU context, checks, times, writes
`result.json` and exits. Isolation is unchanged: the child runs in its own session (process
group) with its stdout/stderr in the job folder, so a segfault, an abort on a GPU memory fault
or a hang kills only that child, and the parent classifies it from the exit status like a
spawned child's. The zygote itself must never initialise CUDA/HIP (a context does not survive
fork): it imports modules only, and answers one request at a time. On a GPU slot the child is
usually forked ahead of its request and has made its context while the job before ran
(`workers.spare`); it is handed the request and goes on exactly as a freshly forked child.

Protocol (the zygote side runs as `python -m workers.zygote`): one JSON request per line on
stdin, `{"cwd", "args", "timeout_s", "max_write_bytes"}`; the replies on the zygote's original
stdout are `{"pid": N}` when the child is forked, then `{"returncode", "timed_out",
"left_behind", "write_limit_hit", "seconds"}`. The zygote is a child subreaper: processes a job
leaves behind, daemons included, are killed when the job ends and counted in `left_behind`.
End of file on stdin (the slot is gone) ends a running job and the zygote.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from workers import device_lock, spare
from workers.containment import Scope, become_subreaper
from workers.sandbox import WRITE_POLL_S, ChildOutcome, outcome_from, tail

# -- zygote side -------------------------------------------------------------------------------

def _child(cwd: str, args: list[str], new_session: bool = True) -> None:
    """In the forked child: a new session (a spare has one already), stdio to the job folder,
    then `workers.child.main`."""
    try:
        if new_session:
            os.setsid()
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


def _parent_gone(fd: int) -> bool:
    """The slot writes nothing while a job runs: stdin readable then means end of file, the
    slot (or its whole node) is gone, and the job must not run on with nobody to report to."""
    try:
        return os.read(fd, 1) == b""
    except OSError:
        return True


def _wait(pid: int, timeout_s: float, scope: Scope, max_write_bytes: int | None) -> tuple[int, bool, bool]:
    """Wait for `pid` up to `timeout_s`; at the timeout, when the job's processes have written
    more than `max_write_bytes`, or when the slot is gone, kill its process group. Returns (wait
    status as a returncode, timed_out, write_limit_hit); the caller ends the rest of the scope."""
    deadline = time.monotonic() + timeout_s
    fd = os.pidfd_open(pid)
    stdin = sys.stdin.fileno()
    timed_out = over_limit = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready = select.select([fd, stdin], [], [], min(left, WRITE_POLL_S))[0]
            if fd in ready:
                break  # exited; not reaped yet
            if stdin in ready and _parent_gone(stdin):
                _end_group(pid)
                os.waitpid(pid, 0)
                scope.end()
                os._exit(0)
            if max_write_bytes is not None and scope.written_bytes() > max_write_bytes:
                over_limit = True
                break
        if timed_out or over_limit:
            _end_group(pid)
        _, st = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(st), timed_out, over_limit
    finally:
        os.close(fd)


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
    spare_kind = spare.wanted(dict(os.environ))
    lock = _device_lock() if spare_kind else None
    proto.write(json.dumps({"ready": os.getpid()}) + "\n")
    prepared: list[spare.Spare] = []  # oldest first
    try:
        while True:
            if prepared and not select.select([sys.stdin], [], [], spare.IDLE_S)[0]:
                _drop(prepared)  # nobody needs them soon: free their GPU contexts
            line = sys.stdin.readline()  # not `for line in sys.stdin`: its read-ahead would hide EOF from select
            if not line:
                break
            req = json.loads(line)
            start = time.monotonic()
            with Scope(own_session=True) as scope:
                pid = None
                if prepared:
                    oldest = prepared.pop(0)
                    if oldest.ready() and oldest.hand(req["cwd"], req["args"]):
                        pid = oldest.pid
                        scope.adopt(pid)
                    else:
                        if oldest.failed:
                            spare_kind = None  # this GPU will not take another context: no more spares
                            _drop(prepared)
                        oldest.discard()
                if pid is None:
                    pid = os.fork()
                    if pid == 0:
                        _child(req["cwd"], req["args"])
                proto.write(json.dumps({"pid": pid}) + "\n")
                # The next jobs' processes prepare while this one runs; they are not this job's.
                while spare_kind and len(prepared) < spare.IN_FLIGHT:
                    prepared.append(spare.fork(spare_kind, _handed, close_fds=(proto.fileno(),)))
                    scope.exclude(prepared[-1].pid)
                code, timed_out, over_limit = _wait(pid, float(req["timeout_s"]), scope, req.get("max_write_bytes"))
                left = scope.end()
            proto.write(json.dumps({"returncode": code, "timed_out": timed_out, "left_behind": left,
                                    "write_limit_hit": over_limit, "seconds": round(time.monotonic() - start, 3)})
                        + "\n")
    finally:
        _drop(prepared)
        if lock:
            for name in (lock, lock + ".gate"):
                Path(name).unlink(missing_ok=True)


def _drop(spares: list[spare.Spare]) -> None:
    while spares:
        spares.pop().discard()


def _handed(cwd: str, args: list[str]) -> None:
    """What a spare does with its job: what a freshly forked child does, in the session it has."""
    _child(cwd, args, new_session=False)


def _import_triton() -> None:
    """Triton's import (about a second) paid once here rather than by every Triton job. It
    creates no GPU context: its driver starts at the first launch."""
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 — not installed, or broken: a Triton job reports it itself
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


class Zygote:
    """Client of one zygote process; restarts it when it has died. Not thread-safe: one job at
    a time, which is what a device slot runs."""

    def __init__(self, env: dict):
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.started = 0
        # Bytes read from the zygote's stdout that do not yet end a line (see `_read`).
        self._unread = b""

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "workers.zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env,
                                     start_new_session=True, text=True, bufsize=1)
        self._unread = b""
        self.started += 1
        ready = self._read(300.0)
        if "ready" not in ready:
            raise ZygoteDied(f"unexpected first line {ready}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _read(self, timeout_s: float) -> dict:
        """The zygote's next reply line. Read from the pipe's descriptor with a buffer of our
        own: a fast job's two replies (pid, outcome) often arrive together, and a buffered
        `readline` would take both, leaving `select` to wait out the timeout for the second."""
        assert self.proc and self.proc.stdout
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._unread:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ZygoteDied(f"no answer in {timeout_s:g} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ZygoteDied(f"exited with code {self.proc.wait()}")
            self._unread += chunk
        line, self._unread = self._unread.split(b"\n", 1)
        return json.loads(line)

    def run(self, args: list[str], timeout_s: float, workdir: Path, max_write_bytes: int | None = None) -> ChildOutcome:
        """Fork a child running `workers.child` with `args` in `workdir`; the same outcome record
        as `sandbox.run_child`. A zygote that died is started again (once per job)."""
        for attempt in (1, 2):
            if not self.alive():
                self.start()
            pid = None
            try:
                self.proc.stdin.write(json.dumps({"cwd": str(workdir), "args": args, "timeout_s": timeout_s,
                                                  "max_write_bytes": max_write_bytes}) + "\n")
                self.proc.stdin.flush()
                pid = self._read(60.0)["pid"]
                done = self._read(timeout_s + 60.0)
            except (ZygoteDied, BrokenPipeError, OSError, ValueError):
                self._discard(pid)
                if attempt == 2 or pid is not None:
                    raise
                continue  # died between jobs: start a fresh one and go on
            return outcome_from(done["returncode"], done["timed_out"], done["seconds"], workdir,
                                left_behind=done.get("left_behind", 0), write_limit_hit=done.get("write_limit_hit", False))
        raise AssertionError("unreachable")

    def _discard(self, child_pid: int | None) -> None:
        """Kill a broken zygote and the child it may have left behind."""
        for pid in (child_pid, self.proc.pid if self.proc else None):
            if pid:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if self.proc:
            self.proc.wait()
        self.proc = None
        self._unread = b""

    def close(self) -> None:
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._discard(None)
        self.proc = None


__all__ = ["Zygote", "ZygoteDied", "serve", "tail"]

if __name__ == "__main__":
    serve()
