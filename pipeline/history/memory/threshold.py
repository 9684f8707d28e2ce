"""When a peak memory grew: by more than a share of it *and* more than a number of bytes.

Both, because each alone misleads: 5% of a 4 KiB peak is an allocator's rounding (512 bytes a
block), and 1 MiB of a 40 GiB peak is nothing a kernel developer acts on. The default, 5% and
1 MiB, lets a planted +20% allocation of a few MiB through and keeps two runs of one build (which
agree to the byte, `workers.measure.memory`) silent; `--memory-threshold` sets both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3}
_PART = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>%|[kmg]i?b|b)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class MemoryThreshold:
    """A growth counts when it is more than `share` of the smaller figure and more than `bytes`."""

    share: float = 0.05
    bytes: int = 1 << 20

    @property
    def text(self) -> str:
        return f"{self.share:.0%} and {_bytes_text(self.bytes)}"


DEFAULT = MemoryThreshold()


def parse(text: str) -> MemoryThreshold:
    """`5%`, `2MiB`, `5%,1MiB` (either order; one part leaves the other at its default; MiB, MB,
    KiB, B …). Raises ValueError naming what it cannot read."""
    share, size = DEFAULT.share, DEFAULT.bytes
    parts = [p for p in text.split(",") if p.strip()]
    if not parts or len(parts) > 2:
        raise ValueError(f"{text!r}: give a share, a size or both, e.g. 5%,1MiB")
    for part in parts:
        m = _PART.match(part)
        if not m:
            raise ValueError(f"{part.strip()!r} is neither a share (5%) nor a size (1MiB, 512KiB, 2MB)")
        number, unit = float(m["number"]), (m["unit"] or "").lower()
        if unit == "%":
            share = number / 100
        elif unit:
            size = int(number * _UNITS[unit])
        else:
            raise ValueError(f"{part.strip()!r} has no unit: write 5% for a share or 1MiB for a size")
    return MemoryThreshold(share, size)


def growth(before: float, after: float) -> float:
    """The relative change from `before` to `after` (+0.2: 20% more); inf from nothing to something."""
    if before <= 0:
        return float("inf") if after > 0 else 0.0
    return after / before - 1.0


def grew(before: float | None, after: float | None, threshold: MemoryThreshold = DEFAULT) -> bool:
    """Whether the peak grew beyond `threshold` from `before` to `after` (False when either is unknown)."""
    if before is None or after is None:
        return False
    return after - before > threshold.bytes and growth(before, after) > threshold.share


def moved(before: float, after: float, threshold: MemoryThreshold = DEFAULT) -> bool:
    """Whether two figures differ beyond `threshold`, either way."""
    return grew(before, after, threshold) or grew(after, before, threshold)


def _bytes_text(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"
