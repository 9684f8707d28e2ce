"""Keeps what detect and bisect decided: `Regression` records in the results database, next to
the results they came from.

A regression is a slowdown step in one series between two consecutive first-parent commits
that were measured (good = last commit before the step, bad = first after), or a step up of its
peak memory (`metric` "memory", `pipeline.history.memory`). Detecting the same step again
updates it instead of adding a row; a bisection fills in the culprit.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

import sqlalchemy as sa

from pipeline.store import Store, statements
from pipeline.store.tables import regressions as table

TIME, MEMORY = "time", "memory"


@dataclass(frozen=True)
class Regression:
    """A stored slowdown or memory growth. For `metric` TIME: change is the throughput change
    (negative: slower), rate_* the segment mean throughputs (FLOP/s or B/s) on either side. For
    MEMORY: change is the peak memory's growth (positive: more), rate_* the peak bytes on either
    side, p_value 0 (a deterministic figure: no test). culprit_sha is set once a bisection named
    the first bad commit, and bisect holds its summary."""

    variant: str
    shape: str
    dtype: str
    device: str
    good_sha: str
    bad_sha: str
    change: float
    rate_before: float
    rate_after: float
    p_value: float
    id: int = 0
    detected_at: float = 0.0
    culprit_sha: str | None = None
    bisect: dict | None = None
    metric: str = TIME

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def severity(self) -> float:
        """How bad, lower is worse whatever the metric (a slowdown's change, a growth negated):
        the order lists and causes sort by."""
        return -self.change if self.metric == MEMORY else self.change

    @property
    def label(self) -> str:
        """The step as text: `-8.0%` (throughput) or `+20.0% peak memory`."""
        return f"{self.change:+.1%} peak memory" if self.metric == MEMORY else f"{self.change:+.1%}"


class RegressionStore:
    """The regressions table of one Store."""

    def __init__(self, store: Store):
        self.store = store

    def record(self, r: Regression) -> tuple[Regression, bool]:
        """Insert `r` unless the same step is stored (then refresh its figures); returns the
        stored row and whether it is new. One statement: two detects at once cannot double it."""
        key = {"variant": r.variant, "shape": r.shape, "dtype": r.dtype, "device": r.device, "metric": r.metric,
               "good_sha": r.good_sha, "bad_sha": r.bad_sha}
        figures = {"change": r.change, "rate_before": r.rate_before, "rate_after": r.rate_after,
                   "p_value": r.p_value}
        with self.store.writing() as conn:
            old = conn.execute(sa.select(table.c.id).where(*(table.c[k] == v for k, v in key.items()))).scalar()
            conn.execute(statements.upsert(conn, table, {**key, **figures, "detected_at": time.time()}, tuple(key),
                                           update=tuple(figures)))
            row = conn.execute(sa.select(table).where(*(table.c[k] == v for k, v in key.items()))).mappings().one()
        return _decode(row), old is None

    def set_culprit(self, regression_id: int, culprit_sha: str | None, bisect: dict) -> None:
        with self.store.writing() as conn:
            conn.execute(table.update().where(table.c.id == regression_id).values(
                culprit_sha=culprit_sha, bisect=json.dumps(bisect, default=str)))

    def get(self, regression_id: int) -> Regression | None:
        with self.store.reading() as conn:
            row = conn.execute(sa.select(table).where(table.c.id == regression_id)).mappings().first()
        return _decode(row) if row else None

    def all(self) -> list[Regression]:
        """Every stored regression, oldest detection first."""
        with self.store.reading() as conn:
            return [_decode(r) for r in conn.execute(sa.select(table).order_by(table.c.id)).mappings()]


def _decode(row) -> Regression:
    d = dict(row)
    d["bisect"] = json.loads(d["bisect"]) if d["bisect"] else None
    return Regression(**d)
