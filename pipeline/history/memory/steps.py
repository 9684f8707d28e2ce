"""The steps of one series' peak memory along its commits.

The figures are deterministic (`pipeline.history.memory.threshold`), so a series' memory is a run
of levels: consecutive commits whose figures lie within the threshold of the level's first figure
are one level, and a figure beyond it starts the next. Every boundary where the later level is
larger beyond the threshold is a step (good = the last commit of the level before, bad = the first
of the level after); a single commit can be a level: nothing but code moves the figure. Pure.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.history.memory.threshold import DEFAULT, MemoryThreshold, grew, growth, moved


@dataclass(frozen=True)
class Step:
    """A peak memory growth between two consecutive measured commits."""

    good_sha: str
    bad_sha: str
    before: int
    after: int

    @property
    def change(self) -> float:
        return growth(self.before, self.after)


def levels(points: Sequence[tuple[str, int]], threshold: MemoryThreshold = DEFAULT) -> list[list[tuple[str, int]]]:
    """`points` ((sha, bytes), oldest first) cut into levels (module docstring)."""
    out: list[list[tuple[str, int]]] = []
    for point in points:
        if out and not moved(out[-1][0][1], point[1], threshold):
            out[-1].append(point)
        else:
            out.append([point])
    return out


def find(points: Sequence[tuple[str, int]], threshold: MemoryThreshold = DEFAULT) -> list[Step]:
    """The growth steps of a series' peak memory ((sha, bytes) per measured commit, oldest first)."""
    found = []
    runs = levels(points, threshold)
    for before, after in itertools.pairwise(runs):
        if grew(before[0][1], after[0][1], threshold):
            found.append(Step(before[-1][0], after[0][0], int(before[-1][1]), int(after[0][1])))
    return found
