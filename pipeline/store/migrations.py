"""Versioned schema changes: a store at any older version is brought to SCHEMA_VERSION on open.

The version is an integer kept in `meta.schema_version` (and, on SQLite, mirrored in
`PRAGMA user_version`). `STEPS[n]` takes a store from version n-1 to n; each step states its
change in DDL of its own and never reads `tables.py`, because the current tables may hold
columns that later steps add. A new store is created from `tables.py` directly and stamped
with SCHEMA_VERSION.

To change the schema: add the column or table to `tables.py`, raise `tables.SCHEMA_VERSION`
by one, and add the step that makes the same change here, e.g.

    def _v5_result_notes(conn):
        add_column(conn, "results", sa.Column("notes", sa.Text))
        conn.execute(sa.text("CREATE INDEX IF NOT EXISTS results_notes ON results (notes)"))

    STEPS = {..., 5: _v5_result_notes}

Every step runs inside the one transaction of the upgrade (PostgreSQL's DDL is transactional,
and SQLite's too), under a lock that one process holds at a time: a failed step leaves the
store at its old version, and two processes opening an old store at once migrate it once.
A SQLite file is copied aside first (`results.db.schema2.bak`), before anything is written.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import sys
import uuid
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import sqlalchemy as sa

from pipeline.store import engine as engines
from pipeline.store import tables
from pipeline.store.checks import refuse_newer
from pipeline.store.location import StoreLocation

# Any constant: the key of the PostgreSQL advisory lock that serialises schema changes.
_PG_SCHEMA_LOCK = 0x666C6F70  # "flop"


def add_column(conn: sa.Connection, table: str, column: sa.Column) -> None:
    """ALTER TABLE … ADD COLUMN, skipped when the column is there already."""
    if column.name in {c["name"] for c in sa.inspect(conn).get_columns(table)}:
        return
    kind = column.type.compile(dialect=conn.dialect)
    conn.execute(sa.text(f'ALTER TABLE {table} ADD COLUMN {column.name} {kind}'))


def _v2_phases_and_run_summary(conn: sa.Connection) -> None:
    add_column(conn, "results", sa.Column("phases", sa.Text))
    add_column(conn, "runs", sa.Column("summary", sa.Text))


def _v3_measurement_identity(conn: sa.Connection) -> None:
    add_column(conn, "results", sa.Column("identity", sa.Text))
    conn.execute(sa.text("CREATE INDEX IF NOT EXISTS results_identity ON results (identity)"))


_V4 = sa.MetaData()
_V4_REGRESSIONS = sa.Table(
    "regressions", _V4,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
    *(sa.Column(name, sa.Text, nullable=False) for name in ("variant", "shape", "dtype", "device", "good_sha",
                                                            "bad_sha")),
    *(sa.Column(name, sa.Float) for name in ("change", "rate_before", "rate_after", "p_value", "detected_at")),
    sa.Column("culprit_sha", sa.Text),
    sa.Column("bisect", sa.Text),
    sa.UniqueConstraint("variant", "shape", "dtype", "device", "good_sha", "bad_sha"),
)


def _v4_regressions_and_store_id(conn: sa.Connection) -> None:
    """The regressions table becomes part of the schema (it was created on first use); the
    store gets an id, so that `flopwatch store import` can tell what it copied before."""
    _V4_REGRESSIONS.create(conn, checkfirst=True)
    _set_meta(conn, "store_id", uuid.uuid4().hex, replace=False)


_V5 = sa.MetaData()
_V5_REGRESSIONS = sa.Table(
    "regressions_v5", _V5,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
    *(sa.Column(name, sa.Text, nullable=False) for name in ("variant", "shape", "dtype", "device", "good_sha",
                                                            "bad_sha")),
    *(sa.Column(name, sa.Float) for name in ("change", "rate_before", "rate_after", "p_value", "detected_at")),
    sa.Column("culprit_sha", sa.Text),
    sa.Column("bisect", sa.Text),
    sa.Column("metric", sa.Text, nullable=False, server_default="time"),
    sa.UniqueConstraint("variant", "shape", "dtype", "device", "metric", "good_sha", "bad_sha"),
)


def _v5_launch_floor_memory_and_metric(conn: sa.Connection) -> None:
    """Each result's launch floor and peak memory; each regression's metric ("time", or "memory"
    for a peak memory step), which joins the key of a step: the table is made again with the new
    key (neither dialect changes a table's constraint in place the same way), every row copied
    with its id, as a slowdown."""
    add_column(conn, "results", sa.Column("launch_floor_s", sa.Float))
    add_column(conn, "results", sa.Column("peak_mem_bytes", sa.BigInteger))
    if "metric" in {c["name"] for c in sa.inspect(conn).get_columns("regressions")}:
        return
    _V5_REGRESSIONS.create(conn)
    names = ", ".join(c.name for c in _V4_REGRESSIONS.columns)
    conn.execute(sa.text(f"INSERT INTO regressions_v5 ({names}, metric) SELECT {names}, 'time' FROM regressions"))
    conn.execute(sa.text("DROP TABLE regressions"))
    conn.execute(sa.text("ALTER TABLE regressions_v5 RENAME TO regressions"))
    if conn.dialect.name == "postgresql":
        # The copied ids did not advance the new table's sequence: the next row would take id 1.
        conn.execute(sa.text("SELECT setval(pg_get_serial_sequence('regressions', 'id'), "
                             "COALESCE((SELECT MAX(id) FROM regressions), 0) + 1, false)"))


STEPS: dict[int, Callable[[sa.Connection], None]] = {
    2: _v2_phases_and_run_summary,
    3: _v3_measurement_identity,
    4: _v4_regressions_and_store_id,
    5: _v5_launch_floor_memory_and_metric,
}
assert sorted(STEPS) == list(range(2, tables.SCHEMA_VERSION + 1)), "one step per version"


def bring_up_to_date(engine: sa.Engine, location: StoreLocation, found: int | None) -> tuple[int, int] | None:
    """Create a new store, or migrate an older one; `found` is the version `checks.inspect`
    saw. Returns (old, new) when it migrated; a backup of a SQLite file is taken first."""
    if found is not None and found >= tables.SCHEMA_VERSION:
        return None
    backup = None
    with engines.writing(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_SCHEMA_LOCK})
        version = _read_version(conn)  # again, under the lock: another process may have been first
        if version is not None and version < tables.SCHEMA_VERSION:
            # Under the lock too, so that only the process that migrates copies the file aside
            # (two commands opening an old store at once left two copies). Nothing is written
            # yet, and a WAL store lets the copy read beside the held write lock.
            backup = _backup(location, version)
        if version is None:
            tables.metadata.create_all(conn)
            _set_meta(conn, "store_id", uuid.uuid4().hex, replace=False)
        elif version > tables.SCHEMA_VERSION:
            raise refuse_newer(location.shown, version)
        else:
            for step in range(version + 1, tables.SCHEMA_VERSION + 1):
                STEPS[step](conn)
        _stamp(conn, tables.SCHEMA_VERSION)
    if version is not None and version < tables.SCHEMA_VERSION:
        note = f"; the old file is kept at {backup}" if backup else ""
        print(f"flopwatch: {location.shown}: store migrated from schema {version} to {tables.SCHEMA_VERSION}{note}",
              file=sys.stderr)
        return version, tables.SCHEMA_VERSION
    return None


def _read_version(conn: sa.Connection) -> int | None:
    if not sa.inspect(conn).has_table("meta"):
        return None
    value = conn.execute(sa.select(tables.meta.c.value).where(tables.meta.c.key == "schema_version")).scalar()
    return int(value) if value is not None else None


def _stamp(conn: sa.Connection, version: int) -> None:
    _set_meta(conn, "schema_version", str(version), replace=True)
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"PRAGMA user_version = {int(version)}")


def _set_meta(conn: sa.Connection, key: str, value: str, replace: bool) -> None:
    meta = tables.meta
    have = conn.execute(sa.select(meta.c.value).where(meta.c.key == key)).scalar()
    if have is None:
        conn.execute(meta.insert().values(key=key, value=value))
    elif replace and have != value:
        conn.execute(meta.update().where(meta.c.key == key).values(value=value))


def _backup(location: StoreLocation, version: int) -> Path | None:
    """Copy a SQLite store aside before migrating it (SQLite's online backup: a consistent
    copy even while another process writes). A server store is migrated in one transaction
    instead: it either completes or leaves the store as it was."""
    if location.path is None:
        return None
    target = location.path.with_name(f"{location.path.name}.schema{version}.bak")
    if target.exists():
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
        target = location.path.with_name(f"{location.path.name}.schema{version}-{stamp}.bak")
    with closing(sqlite3.connect(location.path, timeout=30)) as source, closing(sqlite3.connect(target)) as copy:
        source.backup(copy)
    return target
