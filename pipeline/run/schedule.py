"""How a run's device calls fall on its slots, from expected costs: the dispatcher replayed,
the split of a variant's shapes across slots where that shortens the wall, and the
wall no schedule can beat. Pure functions over numbers; `runflow` decides its calls with them
and `pipeline.run.planner` predicts other machines' walls with the same code.

A *call* is what one slot runs in one process: a variant's shapes (`workers.job.batch`) or one job.
Its cost is the device seconds of its jobs plus `process_s`, what a process of its own costs
around them (start, context, the variant's first call; `benchmarks/spare_prep.py` measured the
context and first uses at 0.4 s on an H200).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

# A process of its own for a part split off a variant's shapes: its context and first uses
# (0.4 s on an H200, benchmarks/spare_prep.py), less what the slot's prepared spare hides.
PROCESS_S = 0.4


class _Clock:
    """The replay's time: moved by the replay, read by the pool."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Stub:
    """A slot's actor in a replay: a call returns a fresh reference and runs nothing."""

    _refs = itertools.count()

    def __init__(self, kind: str, name: str, warm: bool) -> None:
        self.name = name

    def __getattr__(self, method: str):
        return self

    def remote(self, *args) -> str:
        return f"replay-{next(self._refs)}"


def replay(costs: list[float], slots: int, pinned: list[list[float]] | None = None) -> dict:
    """The driver's own dispatcher (`pipeline.fleet.slots.SlotPool`, GPU slots, a call held behind
    the running one) run with stand-in actors on a clock of its own, each call taking its cost:
    the shared calls queued at once (a warm run's cached builds), each slot's `pinned` calls
    before them. Returns {"wall_s", "loads": busy seconds per slot, "slot_of": the slot of each
    shared call}."""
    from pipeline.fleet.slots import GPU_RESOURCE, SlotPool  # the dispatcher module holds Ray's actor types

    if slots < 1:
        raise ValueError(f"a schedule needs at least one slot, not {slots}")
    clock = _Clock()
    pool = SlotPool({GPU_RESOURCE["cuda"]: slots, "GPU": slots}, make_actor=_Stub, clock=clock)
    pool.overlap = True
    gpu = pool.slots_of("cuda")
    with pool.held():
        for s, calls in enumerate(pinned or []):
            for c in calls:
                pool.submit("cuda", "run", (), ("pinned", s), slot=gpu[s], cost_s=c)
        for i, c in enumerate(costs):
            pool.submit("cuda", "run", (), ("call", i), cost_s=c)
    ends: dict[str, float] = {}
    free_at = [0.0] * slots
    loads = [0.0] * slots
    slot_of = [0] * len(costs)
    while True:
        for ref, (slot, pending) in pool.inflight.items():
            if ref not in ends:  # a slot runs its calls one after the other
                s = gpu.index(slot)
                ends[ref] = free_at[s] = max(clock.now, free_at[s]) + pending.cost_s
                loads[s] += pending.cost_s
                if pending.tag[0] == "call":
                    slot_of[pending.tag[1]] = s
        if not ends:
            break
        ref = min(ends, key=ends.get)
        clock.now = ends.pop(ref)
        pool.finished(ref)
    return {"wall_s": max(free_at), "loads": loads, "slot_of": slot_of}


def split(groups: list[list[float]], slots: int, process_s: float = PROCESS_S,
          pinned: list[list[float]] | None = None) -> list[list[list[int]]]:
    """Each group's jobs (their expected device seconds, in order) as the calls to run them in:
    a variant's shapes stay in one process unless spreading them over slots shortens the
    replayed wall, the extra processes' cost included. Greedy: the largest call of two jobs or
    more is halved (its jobs dealt longest first into two parts of near-equal cost), again and
    again while such a call is larger than half a slot's share of the work (smaller ones cannot
    bound the wall); the partition with the shortest replayed wall wins, ties to fewer calls.
    One slot never splits. Returns, per group, lists of job indices."""
    parts = [[list(range(len(g)))] for g in groups]
    if slots < 2:
        return parts

    def cost(g: int, part: list[int]) -> float:
        return sum(groups[g][i] for i in part) + process_s

    def wall(candidate) -> float:
        return replay([cost(g, p) for g, ps in enumerate(candidate) for p in ps], slots, pinned)["wall_s"]

    share = (sum(map(sum, groups)) + process_s * len(groups)) / slots
    best, best_wall = parts, wall(parts)
    # Halving twice per slot reaches parts of a quarter of a long variant on every slot.
    for _ in range(4 * slots):
        splittable = [(cost(g, p), g, k) for g, ps in enumerate(parts) for k, p in enumerate(ps) if len(p) > 1]
        if not splittable:
            break
        largest, g, k = max(splittable)
        if largest <= share / 2:
            break
        halves: list[list[int]] = [[], []]
        for i in sorted(parts[g][k], key=lambda i: -groups[g][i]):
            halves[min((0, 1), key=lambda h: sum(groups[g][j] for j in halves[h]))].append(i)
        parts = [list(ps) for ps in parts]
        parts[g][k:k + 1] = [sorted(h) for h in halves]
        shorter = wall(parts)
        if shorter < best_wall - 1e-9:
            best, best_wall = parts, shorter
    return best


@dataclass(frozen=True)
class Bound:
    """The shortest jobs wall any schedule could reach: the longest single job (it cannot be
    split) or the work shared evenly by the slots, whichever is larger."""

    longest_s: float
    longest: str
    work_s: float
    slots: int

    @property
    def bound_s(self) -> float:
        return max(self.longest_s, self.work_s / self.slots if self.slots else 0.0)

    def to_dict(self, wall_s: float | None = None) -> dict:
        d = {"bound_s": round(self.bound_s, 3), "longest_job_s": round(self.longest_s, 3),
             "longest_job": self.longest, "work_s": round(self.work_s, 3), "slots": self.slots}
        if wall_s:
            d["wall_s"] = round(wall_s, 3)
            d["wall_over_bound"] = round(wall_s / self.bound_s, 3) if self.bound_s else None
        return d


def bound(jobs: list[tuple[str, float]], slots: int) -> Bound:
    """`jobs`: (name, device seconds) of every job a kind's slots ran; `slots`: how many there were."""
    if slots < 1:
        raise ValueError(f"a bound needs at least one slot, not {slots}")
    name, longest = max(jobs, key=lambda j: j[1], default=("", 0.0))
    return Bound(longest, name, sum(s for _, s in jobs), slots)
