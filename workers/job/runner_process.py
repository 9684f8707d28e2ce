"""A slot's hold on its warm runner's process, however the process came to be: spawned by the
slot (`Spawned`), or a *seed* the local Ray head started before Ray and that the slot adopted
(`Adopted`, `adopt`; the seed's side is `workers.job.seed`).

The slot's client (`workers.job.zygote.Zygote`) needs the same few things of either: the pipes
of the protocol, the pid (the runner leads its own process group, which a broken runner is
killed as), whether it is alive, and its end. A spawned runner is the slot's child and
`subprocess.Popen` answers all of that. An adopted one is the head's child, not the slot's: its
exit status is not the slot's to read, so its liveness comes from a pidfd (`os.pidfd_open`; a
pidfd turns readable when the process exits, reaped or not) or, where there is none,
`os.kill(pid, 0)`, and its end shows first as end of file on its stdout, as a spawned runner's
does.

Adoption (`adopt`): the slot makes the runner's two pipes itself and sends the seed, over the
Unix socket in the head's private folder (`ENV_SOCKET` names it to the head's Ray workers), the
runner's ends of them (SCM_RIGHTS) with what it would have given `Popen`: the environment,
the working folder, the resource limits, and the code key and interpreter the runner must have
imported with. The seed answers with its pid or why it refuses; the slot's "go" makes it the
slot's runner (a slot that gave up before saying it leaves the seed free for another). The slot
then holds the only write end of the runner's stdin, so the runner sees end of file when the
slot is gone, as a spawned one does. Any failure is `NoSeed` and the slot spawns as before.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import time

ENV_SOCKET = "FLOPWATCH_RUNNER_SEED_SOCKET"  # set by flopwatch's local Ray head for its Ray workers
# How long a slot tries to adopt before it spawns (an answer takes milliseconds: the seed's
# handshake does not wait for its imports).
ADOPT_TIMEOUT_S = 2.0
GO = b"go\n"
# What a runner's process had to match when it imported torch and the workers: the interpreter's
# module path and the thread counts OpenMP and the BLAS libraries read as torch loads. A seed
# whose values differ from the slot's is refused (the slot spawns).
IMPORT_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONUSERBASE",
              "PYTHONOPTIMIZE", "LD_LIBRARY_PATH", "LD_PRELOAD", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
              "OPENBLAS_NUM_THREADS")
LIMITS = tuple(sorted(name for name in dir(resource) if name.startswith("RLIMIT_")))


class NoSeed(Exception):
    """No seed was adopted; `why` in one word for the slot's marks ("absent", "refused", "lost")."""

    def __init__(self, why: str, detail: str = ""):
        super().__init__(f"{why}: {detail}" if detail else why)
        self.why = why


class Spawned:
    """A runner the slot started itself (its `Popen`)."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self.pid, self.stdin, self.stdout = popen.pid, popen.stdin, popen.stdout

    @staticmethod
    def start(argv: list[str], env: dict) -> Spawned:
        return Spawned(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env, start_new_session=True, text=True,
                                        bufsize=1))

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        """Its exit code once it has ended (subprocess.TimeoutExpired past `timeout`)."""
        return self.popen.wait(timeout)

    def kill_group(self) -> None:
        _killpg(self.pid)


class Adopted:
    """A seed this slot adopted: not its child (the head reaps it), so no exit code."""

    def __init__(self, pid: int, stdin_fd: int, stdout_fd: int, pidfd: int | None = None):
        self.pid, self._pidfd = pid, pidfd
        # As `Popen(text=True, bufsize=1)` has them: requests written as lines, replies read raw.
        self.stdin = open(stdin_fd, "w", buffering=1)  # noqa: SIM115 (held for the runner's life)
        self.stdout = open(stdout_fd, "rb", buffering=0)  # noqa: SIM115

    def alive(self) -> bool:
        if self._pidfd is not None:
            return not select.select([self._pidfd], [], [], 0)[0]
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    def wait(self, timeout: float | None = None) -> int | None:
        """None once it has ended (its code is its parent's); subprocess.TimeoutExpired past `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.alive():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"runner {self.pid}", timeout)
            if self._pidfd is not None:
                select.select([self._pidfd], [], [], left)
            else:
                time.sleep(0.01 if left is None else min(0.01, left))
        return None

    def kill_group(self) -> None:
        if self.alive():  # not a group whose leader's pid was reused after it ended
            _killpg(self.pid)

    def __del__(self):
        if getattr(self, "_pidfd", None) is not None:
            os.close(self._pidfd)
            self._pidfd = None


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def request(env: dict, code_key: str) -> dict:
    """What a slot sends a seed beside the pipes: all a spawned runner would have had from the slot."""
    return {"code": code_key, "python": sys.executable, "env": env, "cwd": os.getcwd(),
            "cpus": sorted(os.sched_getaffinity(0)),
            "limits": {name: list(resource.getrlimit(getattr(resource, name))) for name in LIMITS}}


def adopt(path: str, env: dict, code_key: str, timeout_s: float = ADOPT_TIMEOUT_S) -> Adopted:
    """Adopt a seed listening at `path` as this slot's runner, with `env` as its environment;
    NoSeed when there is none, it refuses, or it does not answer within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stdin_r = stdin_w = stdout_r = stdout_w = -1
    adopted = False
    try:
        sock.settimeout(timeout_s)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:  # no seed planted, or none left
            raise NoSeed("absent", exc.strerror or "") from None
        if peer_uid(sock) != os.getuid():
            raise NoSeed("refused", "the socket is another user's")
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        message = json.dumps(request(env, code_key)).encode() + b"\n"
        sent = socket.send_fds(sock, [message], [stdin_r, stdout_w])
        sock.sendall(message[sent:])
        reply = json.loads(read_line(sock, deadline))
        if not isinstance(reply.get("adopted"), int):
            raise NoSeed("refused", str(reply.get("refused", reply)))
        # Taken while the seed waits for "go": the pid is still the seed's.
        pidfd = _pidfd(reply["adopted"])
        try:
            sock.sendall(GO)
        except OSError:
            if pidfd is not None:
                os.close(pidfd)
            raise
        adopted = True
        return Adopted(reply["adopted"], stdin_w, stdout_r, pidfd)
    except NoSeed:
        raise
    except (OSError, ValueError) as exc:  # the seed died mid-way, or took too long
        raise NoSeed("lost", f"{type(exc).__name__}: {exc}") from None
    finally:
        sock.close()
        # The runner's ends are the runner's alone now: the slot's copies would keep its end of
        # file (the slot gone) from reaching it, and the slot's from reaching the slot.
        for fd in (stdin_r, stdout_w) + (() if adopted else (stdin_w, stdout_r)):
            if fd >= 0:
                os.close(fd)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfds (Linux < 5.3): `os.kill(pid, 0)` instead
        return None


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def read_line(sock: socket.socket, deadline: float) -> bytes:
    """One line from `sock`; TimeoutError past `deadline`, ConnectionError at end of file."""
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer in time")
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before answering")
        data += chunk
    return data.split(b"\n", 1)[0]
