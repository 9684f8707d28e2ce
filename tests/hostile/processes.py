"""Find the processes a test started, by a mark in their environment (a process cannot shed
the environment it was started with: /proc/PID/environ holds it for its whole life)."""

from __future__ import annotations

import os
import time
from pathlib import Path

MARK = "FLOPWATCH_HOSTILE_RUN"


def marked(name: str, value: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment has name=value."""
    needle = f"{name}={value}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            if needle not in environ and not environ.endswith(needle[:-1]):
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if state != "Z":
            found.append((int(entry.name), cmd))
    return found


def survivors(name: str, value: str, patience_s: float = 0.0) -> list[tuple[int, str]]:
    """The marked processes still alive after waiting up to `patience_s` for them to end (Ray's
    own processes take a few seconds to exit after their cluster is shut down)."""
    deadline = time.monotonic() + patience_s
    while True:
        alive = marked(name, value)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.5)
