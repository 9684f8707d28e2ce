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
judged as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.history.regressions import Regression
from workers.core import status


def identities_at(store, reg: Regression, sha: str) -> set[str]:
    """The identities of the series' ok results at `sha` ("" where one was stored without)."""
    rows = store.results(columns=("identity", "status"), commit_sha=sha, variant=reg.variant, shape=reg.shape,
                         dtype=reg.dtype, device=reg.device)
    return {r["identity"] or "" for r in rows if status.measured(r["status"])}


def unchanged_build(store, reg: Regression) -> bool:
    """Whether both ends of the step measured one and the same identified build."""
    good, bad = identities_at(store, reg, reg.good_sha), identities_at(store, reg, reg.bad_sha)
    return len(good) == 1 and good == bad and "" not in good


def split(store, regressions: Sequence[Regression]) -> tuple[list[Regression], list[Regression]]:
    """(steps a commit range can have caused, steps within an unchanged build)."""
    kept, machine = [], []
    for reg in regressions:
        (machine if unchanged_build(store, reg) else kept).append(reg)
    return kept, machine
