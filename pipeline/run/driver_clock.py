"""Where the driver's own time goes: Ray start, probes, checkout, planning, cache lookups,
store writes, the report, shut-down. The jobs' time is accounted per device by
`pipeline.run.accounting`; this is everything a user waits for besides it.

One `DriverClock` lives in a command's `Session`; stages wrap their work in `clock.phase(name)`.
Phases may nest (a store write inside the jobs' stream): a nested phase's time is taken out of
the enclosing one, so the phases add up to the time spent inside any of them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

# Display order and names; a phase not listed here is shown after them under its own name.
PHASE_LABELS = {
    "python": "python start and imports", "ray_start": "ray start", "probe": "probe", "checkout": "checkout",
    "plan": "plan", "cache": "cache", "builds_and_jobs": "builds + jobs", "paired": "paired timing",
    "store": "store", "report": "report", "shutdown": "shutdown",
}


def process_age_s() -> float | None:
    """Seconds since this process was started (Linux /proc), so the interpreter's start and
    imports count too; None where that cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 of stat: starttime, in clock ticks after boot
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


class DriverClock:
    """Seconds per driver phase of one command."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[list] = []  # [name, started, time taken by nested phases]
        self.started = time.perf_counter()
        age = process_age_s()
        if age is not None:
            self.seconds["python"] = round(age, 3)
        self._age_at_start = age or 0.0

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        frame = [name, time.perf_counter(), 0.0]
        self._stack.append(frame)
        try:
            yield
        finally:
            self._stack.pop()
            spent = time.perf_counter() - frame[1]
            self.seconds[name] = round(self.seconds.get(name, 0.0) + spent - frame[2], 4)
            if self._stack:
                self._stack[-1][2] += spent

    def command_s(self) -> float:
        """Wall of the command so far, the interpreter's start included where known."""
        return round(time.perf_counter() - self.started + self._age_at_start, 3)

    def as_dict(self) -> dict:
        return {"phases": dict(self.seconds), "command_s": self.command_s()}


def line(summary: dict) -> str:
    """"driver 6.1 s of 14.0 s: ray start 2.9 s · probe 1.2 s · …" for the end of a command."""
    phases = summary.get("phases", {})
    order = [k for k in PHASE_LABELS if k in phases] + sorted(k for k in phases if k not in PHASE_LABELS)
    outside = sum(v for k, v in phases.items() if k not in ("builds_and_jobs", "paired"))
    parts = " · ".join(f"{PHASE_LABELS.get(k, k)} {phases[k]:.1f} s" for k in order)
    return f"command {summary.get('command_s', 0.0):.1f} s; outside the jobs {outside:.1f} s — {parts}"
