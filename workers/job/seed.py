"""Seeds: warm runners that flopwatch's local Ray head starts before Ray, for its slots to adopt.

On a fresh node the first job waited for two things in a row: the head's `ray.init` (4.1-4.5 s
on a 4-GPU node), then each slot's runner, spawned once its actor was up, importing torch
(3.3-6.5 s) and Triton (0.6 s). The imports need neither Ray nor the slot. So the head plants
one seed per slot it will start (its GPUs and the CPU slot) before it calls `ray.init`: a
`python -m workers.job.seed` that takes the runner's imports (`zygote.take_imports`, the same
list a spawned runner takes), touches no device, and waits to be adopted. A slot's first runner
is then a seed whose imports ran beside Ray's start (`workers.job.runner_process.adopt`): it is
handed the slot's pipes, environment (the visible GPU, the device lock, the spare kind, the CPU
set), working folder and resource limits, takes them as its own, pins all its threads to the
slot's CPUs (a spawned runner pins itself before torch starts any thread; a seed has imported
torch already), and from there on is `zygote.serve_imported`, as a spawned runner after its
imports. Its ready line's marks are the seed's: "seeded", its imports, "adopted".

One seed per slot rather than one server that forks a runner per slot: each runner is then a
process whose only history is its own imports, as a spawned one, the pid a slot adopts is the
runner's from the start, and nothing must outlive its runners to reap them but the head, which
does already. The imports are the ones the slots' runners took anyway, moved ahead of
`ray.init`; a single server would import once, but its runners would be forks of a process
torch's threads had run in, made only once its imports were done.

What keeps a seed from being the wrong runner: it listens on a socket in the head's private
folder (mode 700) and answers only its own user (SO_PEERCRED); it refuses a slot of other code
(the code key), another interpreter, or another environment where the imports read it
(`runner_process.IMPORT_ENV`: a seed imported torch with the head's, as Ray gives its workers);
it is adopted once. All seeds share one listening socket: each slot's connection goes to one
seed, and once none is left a connection is refused at once. A seed nobody adopts ends after
`IDLE_S`, and with its head (PR_SET_PDEATHSIG) before that. Anything that fails leaves the slot
to spawn its runner as before. FLOPWATCH_RUNNER_SEEDS=0 in the head's environment plants none
(to measure what they save).
"""

from __future__ import annotations

import argparse
import array  # noqa: F401  (socket.recv_fds needs it: imported before the handshake runs beside the imports)
import ctypes
import json
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from workers.core.process_age import process_age_s
from workers.isolation import affinity
from workers.job import spare, zygote
from workers.job.runner_process import GO, IMPORT_ENV, peer_uid, read_line

MODULE = "workers.job.seed"
ENV_OFF = "FLOPWATCH_RUNNER_SEEDS"  # "0" in the head's environment: no seeds (each slot spawns its runner)
SOCKET = "seeds"  # the seeds' socket, in the head's folder
IDLE_S = 60.0  # a seed nobody adopted in this long (after its imports) ends
# How long a seed gives a slot's handshake: longer than the slot's own `ADOPT_TIMEOUT_S`, so a
# slot that said "go" said it before the seed gave up on it.
HANDSHAKE_S = 5.0
MAX_REQUEST = 1 << 20


def wanted(env) -> bool:
    return env.get(ENV_OFF) != "0"


# -- the head's side ---------------------------------------------------------------------------

def plant(path: Path, count: int, code_key: str, env: dict, triton: bool,
          idle_s: float = IDLE_S) -> list[subprocess.Popen]:
    """Start `count` seeds listening together at `path`, with `env` as their environment and
    Triton imported too where `triton` (a GPU node). Each is reaped by a thread of the calling
    process, whose child it stays once adopted; they end with the thread that started them."""
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        listener.listen(max(8, 2 * count))
        argv = [sys.executable, "-m", MODULE, "--listen-fd", str(listener.fileno()), "--code-key", code_key,
                "--idle-s", f"{idle_s:g}", "--head-pid", str(os.getpid())] + (["--triton"] if triton else [])
        seeds = [subprocess.Popen(argv, env=env, cwd=path.parent, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  pass_fds=(listener.fileno(),), start_new_session=True) for _ in range(count)]
    finally:
        listener.close()  # the seeds' copies listen; with none left a slot's connection is refused
    for proc in seeds:
        threading.Thread(target=proc.wait, name="flopwatch-seed-reaper", daemon=True).start()
    return seeds


# -- the seed ----------------------------------------------------------------------------------

class _Waiting:
    """A seed's wait for its slot: handshakes on the shared socket in a thread of their own,
    beside the imports; the first slot that said "go" is `taken`."""

    def __init__(self, listener: socket.socket, code_key: str, env: dict):
        self.listener, self.code_key, self.env = listener, code_key, env
        self.cond = threading.Condition()
        self.taken: dict | None = None
        self.offering = False  # a slot was told "adopted" and its "go" is awaited
        self.closed = False  # the seed is ending: no more offers

    def until_taken(self, idle_s: float) -> dict | None:
        """The adopting slot's request, or None once `idle_s` passed without one."""
        deadline = time.monotonic() + idle_s
        with self.cond:
            while self.taken is None and (self.offering or time.monotonic() < deadline):
                self.cond.wait(None if self.offering else max(0.0, deadline - time.monotonic()))
            self.closed = True
            return self.taken

    def serve(self) -> None:
        while True:
            with self.cond:
                if self.closed or self.taken is not None:
                    return
            try:
                if not select.select([self.listener], [], [], 0.5)[0]:
                    continue
            except (OSError, ValueError):  # closed: the seed is ending
                return
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):  # another seed took that one
                continue
            except OSError:
                return
            with conn:
                self._handshake(conn)
            if self.taken is not None:
                # Adopted once: a slot that comes later is refused at once instead of waiting
                # in this socket's queue for a seed that will not answer.
                self.listener.close()
                return

    def _handshake(self, conn: socket.socket) -> None:
        deadline = time.monotonic() + HANDSHAKE_S
        fds: list[int] = []
        try:
            conn.settimeout(HANDSHAKE_S)
            if peer_uid(conn) != os.getuid():
                return
            data, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 2)
            while b"\n" not in data and data and len(data) < MAX_REQUEST:
                more = conn.recv(MAX_REQUEST)
                if not more:
                    break
                data += more
            req = json.loads(data.split(b"\n", 1)[0])
            why = self._refusal(req, fds)
            with self.cond:
                why = why or ("ending" if self.closed else None)
                self.offering = why is None
            if why:
                conn.sendall(json.dumps({"refused": why}).encode() + b"\n")
                return
            try:
                conn.sendall(json.dumps({"adopted": os.getpid()}).encode() + b"\n")
                go = read_line(conn, deadline) + b"\n" == GO
            except OSError:
                go = False
            with self.cond:
                self.offering = False
                if go:
                    self.taken = {**req, "fds": fds, "at": time.time()}
                self.cond.notify_all()
        except (OSError, ValueError, TypeError, AttributeError):
            pass  # a broken or vanished slot: wait for the next
        finally:
            if self.taken is None or self.taken.get("fds") is not fds:
                for fd in fds:
                    os.close(fd)

    def _refusal(self, req: dict, fds: list[int]) -> str | None:
        """Why this seed must not become that slot's runner, or None."""
        if len(fds) != 2:
            return "the runner's pipes were not sent"
        if req.get("code") != self.code_key:
            return f"code key {req.get('code')!r}, this seed's is {self.code_key!r}"
        if req.get("python") != sys.executable:
            return f"interpreter {req.get('python')!r}, this seed's is {sys.executable!r}"
        env = req.get("env")
        if not isinstance(env, dict):
            return "no environment"
        differ = [name for name in IMPORT_ENV if env.get(name) != self.env.get(name)]
        if differ:
            return f"imported with other {', '.join(differ)}"
        if not os.path.isdir(str(req.get("cwd"))):
            return "its working folder is gone"
        try:
            for name, (soft, hard) in (req.get("limits") or {}).items():
                if hasattr(resource, name):
                    resource.setrlimit(getattr(resource, name), (soft, hard))
        except (ValueError, OSError) as exc:
            return f"its resource limits cannot be had here ({exc})"
        return None


def become_runner(taken: dict, marks: dict) -> None:
    """The adopted seed turns into the slot's runner: the slot's pipes, environment, folder and
    CPUs, then the runner's loop (`zygote.serve_imported`); returns when the slot is gone."""
    stdin_fd, stdout_fd = taken["fds"]
    _no_death_signal()  # from here on it lives as long as its slot (its stdin's end of file), as a spawned runner
    os.environ.clear()
    os.environ.update(taken["env"])
    os.chdir(taken["cwd"])
    os.dup2(stdin_fd, 0)
    os.close(stdin_fd)
    proto = os.fdopen(stdout_fd, "w", buffering=1)
    os.dup2(2, 1)  # stray prints must not corrupt the protocol (stderr is /dev/null, as a spawned runner's)
    pin_threads(taken.get("cpus"), dict(os.environ))
    if os.environ.get(spare.ENV_KIND, "cpu") != "cpu":
        zygote.take_triton(marks)  # a GPU slot's runner has Triton (planted on a node without GPUs: not yet)
    marks["adopted"] = taken["at"]
    zygote.serve_imported(proto, marks)


def pin_threads(cpus, env: dict) -> None:
    """Every thread of this process on the slot's CPU set (`affinity.ENV_CPUS`), within the CPUs
    the slot's own process has (`cpus`): what a spawned runner inherits and then pins itself to
    before torch starts a thread. Threads started from here on inherit it."""
    for wanted_cpus in (set(cpus or ()), affinity.parse_cpulist(env.get(affinity.ENV_CPUS, ""))):
        if wanted_cpus:
            _set_all_threads(wanted_cpus)


def _set_all_threads(cpus: set[int]) -> None:
    done: set[int] = set()
    while True:  # again until no thread appeared meanwhile (one it missed started threads of its own)
        tids = {int(t) for t in os.listdir("/proc/self/task")} - done
        if not tids:
            return
        for tid in tids:
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:  # gone, or CPUs it may not use (another cpuset): left as it was
                pass
        done |= tids


def _no_death_signal() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(spare.PR_SET_PDEATHSIG, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="a warm runner waiting for its slot "
                                                                       "(started by flopwatch's local Ray head)")
    p.add_argument("--listen-fd", type=int, required=True)
    p.add_argument("--code-key", required=True)
    p.add_argument("--idle-s", type=float, default=IDLE_S)
    p.add_argument("--head-pid", type=int, required=True)
    p.add_argument("--triton", action="store_true")
    args = p.parse_args(argv)
    marks = {"seeded": time.time() - (process_age_s() or 0.0)}  # when this process started
    spare.die_with(args.head_pid)  # an unadopted seed ends with its head
    listener = socket.socket(fileno=args.listen_fd)
    listener.setblocking(False)  # shared with the other seeds: one of them accepts each slot
    waiting = _Waiting(listener, args.code_key, dict(os.environ))
    threading.Thread(target=waiting.serve, name="flopwatch-seed-handshake", daemon=True).start()
    zygote.take_imports(marks, triton=args.triton)
    taken = waiting.until_taken(args.idle_s)
    listener.close()
    if taken is None:
        return 0
    become_runner(taken, marks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
