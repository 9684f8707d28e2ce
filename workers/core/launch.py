"""When a result measures its call path rather than its kernel: the `launch_bound` rule.

Every GPU result carries the launch floor of its own call path (`Result.launch_floor_s`,
measured by `workers.measure.launch_floor`): the same entry timed the same way at its smallest
valid size, or an empty launch where the entry cannot shrink. A Python entry that launches
five kernels through an autograd Function costs tens of µs whatever the size; at Liger's test
sizes (M=4, V=8) every such row reads that cost, and its "% of peer" compares two Python paths.
A result whose median is within LAUNCH_BOUND_FACTOR of its floor is marked launch-bound wherever
it is shown (run table, report, `--json`, compare).
"""

from __future__ import annotations

# A median within this factor of the floor is on it: at most half of the time is the kernel's own.
LAUNCH_BOUND_FACTOR = 2.0


def launch_bound(median_s: float | None, floor_s: float | None) -> bool:
    """Whether a median sits within LAUNCH_BOUND_FACTOR of its launch floor (False when either
    is unknown)."""
    if not median_s or not floor_s or floor_s <= 0:
        return False
    return median_s <= LAUNCH_BOUND_FACTOR * floor_s


def row_launch_bound(row: dict) -> bool:
    """`launch_bound` of a result row (a stored row or a `Result` as a dict)."""
    return launch_bound(row.get("median_s"), row.get("launch_floor_s"))
