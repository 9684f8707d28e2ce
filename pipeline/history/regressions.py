"""Keeps what detect and bisect decided: `Regression` records in the results database, next to
the results they came from.

A regression is a slowdown step in one series between two consecutive first-parent commits
that were measured (good = last commit before the step, bad = first after). Detecting the
same step again updates it instead of adding a row; a bisection fills in the culprit.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from pipeline.store import Store

_SCHEMA = """
CREATE TABLE IF NOT EXISTS regressions (
  id INTEGER PRIMARY KEY, variant TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,
  device TEXT NOT NULL, good_sha TEXT NOT NULL, bad_sha TEXT NOT NULL, change REAL,
  rate_before REAL, rate_after REAL, p_value REAL, detected_at REAL, culprit_sha TEXT,
  bisect TEXT, UNIQUE (variant, shape, dtype, device, good_sha, bad_sha));
"""


@dataclass(frozen=True)
class Regression:
    """A stored slowdown. change is the throughput change (negative: slower), rate_* the
    segment mean throughputs (FLOP/s or B/s) on either side; culprit_sha is set once a
    bisection named the first bad commit, and bisect holds its summary."""

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

    def to_dict(self) -> dict:
        return asdict(self)


class RegressionStore:
    """The regressions table of one Store (created on first use)."""

    def __init__(self, store: Store):
        self.db = store.db
        self.db.executescript(_SCHEMA)

    def record(self, r: Regression) -> tuple[Regression, bool]:
        """Insert `r` unless the same step is stored; returns the stored row and whether it is new."""
        key = (r.variant, r.shape, r.dtype, r.device, r.good_sha, r.bad_sha)
        old = self.db.execute("SELECT id FROM regressions WHERE variant=? AND shape=? AND dtype=? AND device=? "
                              "AND good_sha=? AND bad_sha=?", key).fetchone()
        with self.db:
            if old:
                self.db.execute("UPDATE regressions SET change=?, rate_before=?, rate_after=?, p_value=? WHERE id=?",
                                (r.change, r.rate_before, r.rate_after, r.p_value, old[0]))
            else:
                self.db.execute("INSERT INTO regressions (variant, shape, dtype, device, good_sha, bad_sha, change, "
                                "rate_before, rate_after, p_value, detected_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                                (*key, r.change, r.rate_before, r.rate_after, r.p_value, time.time()))
        stored = self.get(old[0]) if old else self.all()[-1]
        return stored, old is None

    def set_culprit(self, regression_id: int, culprit_sha: str | None, bisect: dict) -> None:
        with self.db:
            self.db.execute("UPDATE regressions SET culprit_sha=?, bisect=? WHERE id=?",
                            (culprit_sha, json.dumps(bisect, default=str), regression_id))

    def get(self, regression_id: int) -> Regression | None:
        row = self.db.execute("SELECT * FROM regressions WHERE id=?", (regression_id,)).fetchone()
        return _decode(row) if row else None

    def all(self) -> list[Regression]:
        """Every stored regression, oldest detection first."""
        return [_decode(r) for r in self.db.execute("SELECT * FROM regressions ORDER BY id")]


def _decode(row) -> Regression:
    d = dict(row)
    d["bisect"] = json.loads(d["bisect"]) if d["bisect"] else None
    return Regression(**d)
