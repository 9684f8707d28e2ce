"""Moving a history between stores: `flopwatch store export DEST` / `flopwatch store import SRC`.

Everything is copied: commits, builds, runs, results and regressions, in the source's order.
Rows get new ids in the destination (two histories may be merged into one); a result keeps
its run. The copy is one transaction on the destination: it lands whole or not at all.

Copying the same source again copies only what is new there: the destination remembers, under
`meta.imported:<source store_id>`, the highest run and result ids it took and which run became
which. Commits and builds are keyed by SHA and build hash and so never doubled; a regression
is keyed by its series and commit range, and takes the source's culprit if it has none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlalchemy as sa

from pipeline.store import statements
from pipeline.store import tables as t
from pipeline.store.database import Store
from pipeline.store.errors import StoreError

BATCH = 2000  # rows read and written at a time: a fleet's history need not fit in memory


@dataclass(frozen=True)
class Copied:
    """How many rows of each kind the destination gained."""

    commits: int = 0
    builds: int = 0
    runs: int = 0
    results: int = 0
    regressions: int = 0

    def line(self) -> str:
        return (f"{self.results} results, {self.runs} runs, {self.commits} commits, {self.builds} builds, "
                f"{self.regressions} regressions")


def store_id(store: Store) -> str:
    with store.reading() as conn:
        return conn.execute(sa.select(t.meta.c.value).where(t.meta.c.key == "store_id")).scalar_one()


def copy_history(source: Store, dest: Store) -> Copied:
    """Copy what `dest` does not have yet of `source` into it (see the module docstring)."""
    source_id = store_id(source)
    if source_id == store_id(dest):
        raise StoreError(dest.location.shown, f"is the same store as {source.location.shown}",
                         "give two different stores")
    marker = f"imported:{source_id}"
    with source.reading() as src, dest.writing() as dst:
        seen = json.loads(dst.execute(sa.select(t.meta.c.value).where(t.meta.c.key == marker)).scalar() or "{}")
        run_ids = {int(k): v for k, v in seen.get("run_ids", {}).items()}
        last_result = seen.get("last_result", 0)
        commits = _upsert_all(src, dst, t.commits, ("sha",), update=True)
        builds = _upsert_all(src, dst, t.builds, ("build_hash",), update=False)
        runs = _copy_runs(src, dst, run_ids)
        results, last_result = _copy_results(src, dst, run_ids, last_result)
        regressions = _copy_regressions(src, dst)
        state = json.dumps({"run_ids": run_ids, "last_result": last_result})
        dst.execute(statements.upsert(dst, t.meta, {"key": marker, "value": state}, ("key",)))
    return Copied(commits, builds, runs, results, regressions)


def _batches(conn: sa.Connection, query):
    result = conn.execution_options(yield_per=BATCH).execute(query)
    for part in result.mappings().partitions():
        yield [dict(row) for row in part]


def _count(conn: sa.Connection, table: sa.Table) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()


def _upsert_all(src, dst, table: sa.Table, key: tuple[str, ...], update: bool) -> int:
    before = _count(dst, table)
    for rows in _batches(src, sa.select(table).order_by(*(table.c[k] for k in key))):
        for row in rows:
            dst.execute(statements.upsert(dst, table, row, key, update=None if update else ()))
    return _count(dst, table) - before


def _copy_runs(src, dst, run_ids: dict[int, int]) -> int:
    copied = 0
    for rows in _batches(src, sa.select(t.runs).order_by(t.runs.c.id)):
        for row in rows:
            old = row.pop("id")
            if old in run_ids:  # copied before; it may have finished since
                if row["finished_at"] is not None:
                    dst.execute(t.runs.update().where(t.runs.c.id == run_ids[old], t.runs.c.finished_at.is_(None))
                                .values(finished_at=row["finished_at"], summary=row["summary"]))
                continue
            run_ids[old] = int(dst.execute(t.runs.insert(), row).inserted_primary_key[0])  # one compiled INSERT, as the store's
            copied += 1
    return copied


def _copy_results(src, dst, run_ids: dict[int, int], last: int) -> tuple[int, int]:
    copied = 0
    query = sa.select(t.results).where(t.results.c.id > last).order_by(t.results.c.id)
    for rows in _batches(src, query):
        last = rows[-1]["id"]
        for row in rows:
            del row["id"]
            row["run_id"] = run_ids.get(row["run_id"]) if row["run_id"] is not None else None
        dst.execute(t.results.insert(), rows)
        copied += len(rows)
    return copied, last


def _copy_regressions(src, dst) -> int:
    key = ("variant", "shape", "dtype", "device", "metric", "good_sha", "bad_sha")
    reg = t.regressions
    before = _count(dst, reg)
    for rows in _batches(src, sa.select(reg).order_by(reg.c.id)):
        for row in rows:
            del row["id"]
            dst.execute(statements.upsert(dst, reg, row, key, update=()))
            if row["culprit_sha"]:
                dst.execute(reg.update().where(*(reg.c[k] == row[k] for k in key), reg.c.culprit_sha.is_(None))
                            .values(culprit_sha=row["culprit_sha"], bisect=row["bisect"]))
    return _count(dst, reg) - before
