"""Nothing a job or a build starts may outlive it, nor write without bound.

A kernel (or a build step: Triton imports the variant's module to compile it) can start
processes that leave its process group: a double fork with `setsid` makes a daemon that no
`killpg` reaches, and it is re-parented to init. Marking the process that runs jobs as a
*child subreaper* (`prctl(PR_SET_CHILD_SUBREAPER)`, Linux ≥ 3.4, no privileges needed) makes
orphans of its descendants its own children instead, so they stay in its process tree.
`Scope` uses that: everything in the tree that was not there when the scope opened belongs to
the job, and `Scope.end()` kills it and says how many were still alive ("left processes
behind (N killed)"). A cgroup would do the same more strictly, but needs a delegated
hierarchy, which CI machines and Ray workers do not have.

Disk: each file a job writes is capped by RLIMIT_FSIZE (`sandbox.MAX_FILE_BYTES`, enforced by
the kernel); `Scope.written_bytes()` adds up what the job's processes wrote in total
(`/proc/PID/io` `wchar`: every write(2), whatever the file system, tmpfs included), which the
caller polls against its limit. Writes through a memory map are not counted by that figure.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
_PROC = Path("/proc")
# Processes killed by every scope of this process so far: a scope opened inside another (a
# build step run with `sandbox.run_child` inside the build's scope) ends first and kills what
# its step left; the outer scope still counts those as left behind by the build.
_killed_in_process = 0
# Whose a process is can only be told from its place in the tree, and an orphan has lost it:
# so scopes of one process never overlap in time. A scope opened in another thread waits for
# the open one to end (the selftest builds in threads while it runs jobs: they take turns); a
# scope opened inside another in the same thread is part of it (or its sibling, `nested=False`:
# a warm runner's overlapping jobs, each a subreaper of its own tree while it runs, so that an
# orphan appears in the runner's tree only once its job has ended).
_one_at_a_time = threading.RLock()


def _prctl(option: int, arg) -> int:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):
        return -1


def is_subreaper() -> bool:
    flag = ctypes.c_int(0)
    return _prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) == 0 and flag.value != 0


def become_subreaper(on: bool = True) -> bool:
    """Make this process the reaper of its descendants' orphans (or stop being it); False where
    Linux says no."""
    return _prctl(PR_SET_CHILD_SUBREAPER, int(on)) == 0


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state letter, session id) of `pid` from /proc/PID/stat, or None when it is
    gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    # The command name is in parentheses and may itself contain ") ": split at the last one.
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0], int(fields[3])


def _parents() -> dict[int, int]:
    """{pid: parent pid} of every process this user can see."""
    out = {}
    for entry in os.scandir(_PROC):
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                out[int(entry.name)] = st[0]
    return out


def _children(pid: int) -> list[int] | None:
    """The children of `pid` from /proc/PID/task/*/children (each thread lists those it
    started); None where the kernel does not offer that file."""
    found: list[int] = []
    try:
        tasks = os.listdir(_PROC / str(pid) / "task")
    except OSError:
        return []  # gone
    for tid in tasks:
        try:
            found += [int(c) for c in (_PROC / str(pid) / "task" / tid / "children").read_text().split()]
        except FileNotFoundError:
            if not (_PROC / str(pid) / "task" / tid).exists():
                continue  # the thread ended meanwhile
            return None
        except OSError:
            continue
    return found


def descendants(root: int, prune: frozenset[int] = frozenset()) -> set[int]:
    """Every process below `root`, not looking inside the subtrees of `prune`. Walks down from
    `root` through the kernel's children lists (a job's tree costs a few reads, however many
    processes the machine runs); without them, from every process's parent."""
    found: set[int] = set()
    stack = [root]
    while stack:
        below = _children(stack.pop())
        if below is None:
            return _descendants_by_scan(root, prune)
        for child in below:
            if child not in found and child not in prune:
                found.add(child)
                stack.append(child)
    return found


def _descendants_by_scan(root: int, prune: frozenset[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found and child not in prune:
                found.add(child)
                stack.append(child)
    return found


def _wchar(pid: int) -> int:
    try:
        for line in (_PROC / str(pid) / "io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class Scope:
    """The processes one job or build starts, from `Scope()` to `end()` (or a `with` block).

    The opening process becomes a subreaper; what was already below it (a slot's warm runner,
    a local Ray cluster of the driver) is left alone, everything else that appears below it
    is the scope's. One scope at a time per process (threads take turns): that is how slots
    and build tasks run anyway, one job or build each.
    """

    def __init__(self, own_session: bool = False, nested: bool = True):
        """`own_session`: the scope's processes all run outside this process's session (a job
        child starts a new session, and nothing can join a session from outside it), so a
        process another thread of this one starts meanwhile, in its session, is never taken
        for the job's. A build's compilers run in this session: a build scope takes all.
        `nested`: scopes this thread opens while this one is open are part of it (their kills
        count as its own); False for a warm runner's scopes of jobs that overlap in time, each
        a sibling of the others, which `exclude` each other's processes."""
        _one_at_a_time.acquire()
        self._nested = nested
        self.me = os.getpid()
        self._skip_session = os.getsid(0) if own_session else None
        # A process that is a subreaper for good (a slot's warm runner) stays one; any other
        # is one only while a scope is open, so orphans of unrelated processes it started
        # before or after (a local Ray cluster) go to init as usual.
        self._was_subreaper = is_subreaper()
        self.contained = self._was_subreaper or become_subreaper()
        self.before = frozenset(descendants(self.me))
        self._killed_before = _killed_in_process
        self._left: int | None = None  # set by end()

    def adopt(self, pid: int) -> None:
        """`pid`, already below this process when the scope opened, is the scope's from now on
        (a warm runner's prepared child handed this job), with whatever it starts."""
        self.before = self.before - {pid}

    def exclude(self, pid: int) -> None:
        """`pid`, started while the scope is open, is not the scope's, nor is anything it starts
        (the prepared child of the next job)."""
        self.before = self.before | {pid}

    def members(self) -> set[int]:
        found = descendants(self.me, prune=self.before)
        if self._skip_session is None:
            return found
        return {pid for pid in found if (_stat(pid) or (0, "", -1))[2] != self._skip_session}

    def written_bytes(self) -> int:
        """Bytes written so far by the scope's live processes (a reaped child's count is added
        to its parent's by the kernel, so a job's main process carries its finished helpers)."""
        return sum(_wchar(pid) for pid in self.members())

    def kill(self) -> set[int]:
        """SIGKILL every live process of the scope, without reaping: safe from another thread
        while the owner waits on one of them (`subprocess` would read a child reaped behind
        its back as exit code 0). Returns the pids killed."""
        killed = set()
        for pid in self.members():
            st = _stat(pid)
            if st is not None and st[1] != "Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except (ProcessLookupError, PermissionError):
                    pass
        return killed

    def end(self) -> int:
        """Kill every process of the scope and reap them; returns how many were alive, counting
        those that scopes opened inside this one killed. The caller has reaped its main child
        first (a killed child's orphans come to this process and are reaped here, so nothing is
        left, not even a zombie). Closes the scope; ending it again returns the same count."""
        global _killed_in_process
        if self._left is not None:
            return self._left
        killed: set[int] = set()
        deadline = time.monotonic() + 10.0
        try:
            while True:
                members = self.members()
                if not members or time.monotonic() > deadline:
                    inner = _killed_in_process - self._killed_before if self._nested else 0
                    _killed_in_process += len(killed)
                    self._left = len(killed) + inner
                    return self._left
                killed |= self.kill()
                for pid in members:
                    _reap(pid)
                if self.members():
                    time.sleep(0.01)  # SIGKILL is asynchronous: the next look finds them gone or zombies
        finally:
            if self.contained and not self._was_subreaper:
                become_subreaper(False)
            _one_at_a_time.release()

    def __enter__(self) -> Scope:
        return self

    def __exit__(self, *exc) -> None:
        self.end()


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child (yet): its parent dies next, and it comes to us


def note(count: int) -> str:
    """The words a result carries when its job or build left processes behind."""
    return f"left processes behind ({count} killed)" if count else ""
