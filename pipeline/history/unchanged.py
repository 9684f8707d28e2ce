"""Which series of a base-vs-head comparison need timing at all ("nothing changed, nothing timed").

A series whose measurement identity (`pipeline.run.identity`) is the same at base and head would
measure the same binary through the same harness on the same device model at both commits:
timing it twice can only produce noise. Such a series is `unchanged`, reason "same build":
its row carries a stored result with that identity (from any commit), or, when the store has
none, no number at all: a number would only say what the series measures, not whether the
change moved it, so a docs-only change on a runner with an empty store builds and times nothing
(issue 39: 286 s of builds and jobs on a 2-core runner before). The same holds for a series
that no toolchain here can build when its build inputs, toolchain aside, are equal at both
commits (`PlannedCommit.untooled`): whatever toolchain built it, it would build the same.

Everything else is timed at both commits as before: a series whose identity differs, a series
on one side only, one without an identity (no toolchain here) whose build inputs changed, and
The
peer of an op on a device kind where any other series of that op changed (and can be timed:
not one without an identity at both commits) is timed too, so that the head's "% of peer" is
measured beside the change; but at head only, and not paired: its build is the same at both
commits, so timing it at base and pairing the two copies (half of a one-variant compare's
paired timing on 4 GPUs) could only measure noise. Its row is `unchanged` with the head's
fresh number. A changed series whose base identity has a measured result in the store
(a nightly, an earlier PR of the same base) is not run again at base: that result says the
base's status and correctness, its build is built for the paired timing (which times both
sides anew), and only the head runs (`base_stored`). `force` (`compare --all`) times every
series at both commits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from workers.core import status

SeriesKey = tuple[str, str, str, str]  # variant, shape key, dtype, device key

SAME_BUILD = "same build"
# The note of the peer of a changed series, timed at head only (module docstring).
PEER_AT_HEAD = f"{SAME_BUILD}: the peer, timed at head beside the change"
# The note of an unchanged series with no stored result: its row carries no number.
NO_NUMBER = f"{SAME_BUILD}: not timed, no number was needed"


@dataclass(frozen=True)
class SeriesInfo:
    """What the decision needs of one planned series: its identity and which op/peer it is."""

    identity: str
    op: str
    device_kind: str
    peer: bool
    untooled: str = ""  # no toolchain here: the identity with the toolchain named as missing


@dataclass(frozen=True)
class SeriesPlan:
    """measure: timed at both commits. untimed: unchanged, nothing stored, no number needed.
    reuse: unchanged, {series: the stored result row it carries}. head_only: unchanged, timed
    at head only (the peer of a changed series). base_stored: measured at head and paired, its
    base side {series: the stored measured result of its base identity} instead of a base run.
    reasons: why each series is where it is."""

    measure: frozenset
    untimed: frozenset
    reuse: dict
    reasons: dict = field(default_factory=dict)
    head_only: frozenset = frozenset()
    base_stored: dict = field(default_factory=dict)

    @property
    def unchanged(self) -> frozenset:
        return self.untimed | frozenset(self.reuse) | self.head_only

    @property
    def at_base(self) -> frozenset:
        """Every series the base's run times."""
        return self.measure - frozenset(self.base_stored)

    @property
    def at_head(self) -> frozenset:
        """Every series the head's run times."""
        return self.measure | self.head_only


def plan_series(base: dict[SeriesKey, SeriesInfo], head: dict[SeriesKey, SeriesInfo],
                stored: Callable[[list[str]], dict[str, dict]], force: bool = False) -> SeriesPlan:
    """Sort every series of either side into measure / untimed / reuse (module docstring).
    `stored(identities)` returns {identity: newest stored result row} for those it has."""
    measure, same, reasons = set(), set(), {}
    for key in set(base) | set(head):
        b, h = base.get(key), head.get(key)
        if force:
            measure.add(key)
            reasons[key] = "--all"
        elif b is None or h is None:
            measure.add(key)
            reasons[key] = "only at " + ("head" if b is None else "base")
        elif not h.identity and not b.identity and h.untooled and h.untooled == b.untooled:
            same.add(key)
        elif not h.identity or h.identity != b.identity:
            measure.add(key)
            reasons[key] = "changed" if h.identity and b.identity else "no identity (no toolchain here)"
        else:
            same.add(key)
    # The peer is timed beside any change of its op on its device kind that can be timed: a
    # series with no identity at either commit (no toolchain here) yields no number to set
    # beside the peer's (HIP series on an NVIDIA runner must not re-time the rocm peer).
    changed_ops = set()
    for key in measure:
        info = head.get(key) or base.get(key)
        timeable = any(side is not None and side.identity for side in (base.get(key), head.get(key)))
        if not info.peer and (timeable or force):
            changed_ops.add((info.op, info.device_kind))
    head_only = set()
    for key in sorted(same):
        info = head[key]
        if info.peer and (info.op, info.device_kind) in changed_ops:
            same.discard(key)
            head_only.add(key)
            reasons[key] = "peer of a changed series"
    with_identity = [head[k].identity for k in same if head[k].identity]
    found = stored(with_identity) if with_identity else {}
    reuse = {k: found[head[k].identity] for k in same if head[k].identity in found}
    untimed = frozenset(k for k in same if k not in reuse)
    for k in same:
        reasons[k] = SAME_BUILD
    changed = [k for k in measure if reasons[k] == "changed"]
    found_base = stored([base[k].identity for k in changed]) if changed and not force else {}
    base_stored = {k: found_base[base[k].identity] for k in changed
                   if status.measured((found_base.get(base[k].identity) or {}).get("status"))}
    return SeriesPlan(frozenset(measure), untimed, reuse, reasons, frozenset(head_only), base_stored)
