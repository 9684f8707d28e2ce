"""How long this process has been running, its interpreter's start and imports included."""

from __future__ import annotations

import os


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
