"""Where the driver's own time goes: Ray start, probes, checkout, planning, cache lookups,
store writes, the report, shut-down. The jobs' time is accounted per device by
`pipeline.run.accounting`; this is everything a user waits for besides it.

One `DriverClock` lives in a command's `Session`; stages wrap their work in `clock.phase(name)`.
Phases may nest (a store write inside the jobs' stream): a nested phase's time is taken out of
the enclosing one, so the phases add up to the time spent inside any of them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from workers.core.process_age import process_age_s

# Display order and names; a phase not listed here is shown after them under its own name.
PHASE_LABELS = {
    "python": "python start and imports", "ray_start": "ray start", "probe": "probe", "checkout": "checkout",
    "plan": "plan", "cache": "cache", "builds_and_jobs": "builds + jobs", "paired": "paired timing",
    "store": "store", "report": "report", "shutdown": "shutdown",
}


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
        self.began_at = time.time() - self._age_at_start  # epoch seconds of the command's start

    def since_start(self, epoch: float) -> float:
        """An epoch mark (another process's, on this machine) as seconds into this command."""
        return round(epoch - self.began_at, 3)

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
