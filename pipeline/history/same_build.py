"""A step in a series whose build did not change is not a commit's doing.

`detect` reports a step between the last measured commit before it (good) and the first after
it (bad). When the series' results at both ends carry the same measurement identity
(`pipeline.run.identity`: the build with its toolchain, the harness, the op, shape, dtype, device
model and threads), nothing in that range of commits could move the number: the step is the
machine's (load, clocks, a neighbour on the node). Recording it would send the nightly to
bisect a range whose every commit builds the same thing and name an innocent culprit. The
built-in peer (`torch.matmul`) is the usual case: the same build at every commit, timed beside
the variants, so each of the machine's moods is a step in its series. Such steps are kept
apart and shown as what they are; results stored without an identity (older stores) are
judged as before. A change point's place is uncertain by a commit: one that falls between two
commits of one build, next to where the build changed, is that change's (`split`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pipeline.history.regressions import Regression
from workers.core import status


def identities_at(store, reg: Regression, sha: str) -> set[str]:
    """The identities of the series' ok results at `sha` ("" where one was stored without)."""
    rows = store.results(columns=("identity", "status"), commit_sha=sha, variant=reg.variant, shape=reg.shape,
                         dtype=reg.dtype, device=reg.device)
    return {r["identity"] or "" for r in rows if status.measured(r["status"])}


def _one_build(identities: set[str]) -> bool:
    """Whether a commit's results of a series measured one identified build."""
    return len(identities) == 1 and "" not in identities


def unchanged_build(store, reg: Regression) -> bool:
    """Whether both ends of the step measured one and the same identified build."""
    good, bad = identities_at(store, reg, reg.good_sha), identities_at(store, reg, reg.bad_sha)
    return _one_build(good) and good == bad


# How far (in the series' measured commits) a change point may sit from the build change that
# made it: one busy measurement just before the change (a loaded machine) pulls the detector's
# split a commit early, between two commits of the old build.
NEAR = 2
# Commits of the line looked at on either side of a step for that build change (commits without
# a result of the series are passed over).
_REACH = 8


def split(store, regressions: Sequence[Regression], order: Sequence[str] = ()) -> tuple[list[Regression],
                                                                                        list[Regression]]:
    """(steps a commit range can have caused, steps within an unchanged build). A step whose
    ends share one build but whose series changed build within `NEAR` measured commits of it
    (along `order`, the line) is the change's, moved onto it (`beside_a_build_change`)."""
    kept, machine = [], []
    for reg in regressions:
        if not unchanged_build(store, reg):
            kept.append(reg)
            continue
        moved = beside_a_build_change(store, reg, order)
        (kept if moved is not None else machine).append(moved or reg)
    return kept, machine


def beside_a_build_change(store, reg: Regression, order: Sequence[str]) -> Regression | None:
    """`reg` (both ends one build) moved onto the nearest build change of its series within
    `NEAR` measured commits before its good end or after its bad end, good and bad the two
    commits either side of that change; None where there is none (the machine's step)."""
    if reg.good_sha not in order or reg.bad_sha not in order:
        return None
    lo, hi = order.index(reg.good_sha), order.index(reg.bad_sha)
    window = order[max(0, lo - _REACH):hi + _REACH + 1]
    builds = [(sha, ids) for sha in window for ids in [identities_at(store, reg, sha)] if ids]
    shas = [sha for sha, _ in builds]
    good, bad = shas.index(reg.good_sha), shas.index(reg.bad_sha)

    def change_at(j: int) -> bool:  # the build differs from measured commit j to j + 1
        (_, a), (_, b) = builds[j], builds[j + 1]
        return _one_build(a) and _one_build(b) and a != b

    before = [j for j in range(max(0, good - NEAR), good) if change_at(j)]
    after = [j for j in range(bad, min(len(builds) - 1, bad + NEAR)) if change_at(j)]
    nearest = sorted([(good - j, j) for j in before] + [(j - bad + 1, j) for j in after])
    if not nearest:
        return None
    j = nearest[0][1]
    return dataclasses.replace(reg, good_sha=shas[j], bad_sha=shas[j + 1])
