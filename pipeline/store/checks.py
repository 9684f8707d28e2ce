"""What a store is before flopwatch touches it: `inspect` reads, never writes.

Opening a store (`Store(...)`) and `flopwatch doctor` both start here. A SQLite file is checked
in this order, each step only if the last one passed: is it a SQLite database at all (its
16-byte header), does it pass `PRAGMA quick_check` (a damaged or truncated file fails here),
does it hold flopwatch's tables (`meta` with a schema version), and which schema version
wrote it (also `PRAGMA user_version`, so that a newer flopwatch can mark a file as its own).
A store written by a newer flopwatch is refused before anything is written to it.

A PostgreSQL store is checked the same way from the table list on: the server guards the
integrity of its own files.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from contextlib import closing
from dataclasses import dataclass

import sqlalchemy as sa

from pipeline.store.errors import StoreError, move_aside
from pipeline.store.location import StoreLocation
from pipeline.store.tables import SCHEMA_VERSION

SQLITE_HEADER = b"SQLite format 3\x00"


@dataclass(frozen=True)
class StoreState:
    """What `inspect` found. `schema_version` None: nothing there yet (a new store is created
    on first use). `problem` set: the store cannot be used as it is, and says why."""

    shown: str
    dialect: str
    exists: bool
    schema_version: int | None = None
    integrity: str = "not checked"
    results: int | None = None
    size_bytes: int | None = None
    problem: StoreError | None = None

    @property
    def needs_migration(self) -> bool:
        return self.problem is None and self.schema_version is not None and self.schema_version < SCHEMA_VERSION


def inspect(location: StoreLocation, count: bool = False) -> StoreState:
    """The store's state; `count` also counts its results (for doctor)."""
    if location.dialect == "sqlite":
        return _inspect_sqlite(location, count)
    return _inspect_server(location, count)


def refuse_newer(shown: str, found: int) -> StoreError:
    return StoreError(shown, f"written by a newer flopwatch (store schema version {found}; this flopwatch "
                             f"reads up to {SCHEMA_VERSION}) and left untouched",
                      "upgrade flopwatch, or point --store / FLOPWATCH_STORE at another store")


def _inspect_sqlite(location: StoreLocation, count: bool) -> StoreState:
    path, shown = location.path, location.shown
    state = {"shown": shown, "dialect": "sqlite"}
    if not path.exists():
        return StoreState(**state, exists=False)
    if path.is_dir():
        return StoreState(**state, exists=True, problem=StoreError(
            shown, "is a folder, not a store file", "give the path of a .db file inside it"))
    size = path.stat().st_size
    state.update(exists=True, size_bytes=size)
    if size == 0:  # an empty file is an empty SQLite database: a new store
        return StoreState(**state, results=0 if count else None)
    with open(path, "rb") as handle:
        head = handle.read(len(SQLITE_HEADER))
    if head != SQLITE_HEADER:
        return StoreState(**state, problem=StoreError(
            shown, f"not a flopwatch store: not a SQLite database (it starts with {head[:12]!r})", move_aside(path)))
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=30)) as db:
            problems = [row[0] for row in db.execute("PRAGMA quick_check").fetchall()]
            if problems != ["ok"]:
                return StoreState(**state, integrity=problems[0], problem=StoreError(
                    shown, f"damaged: its integrity check failed ({_first(problems)})", move_aside(path)))
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            user_version = db.execute("PRAGMA user_version").fetchone()[0]
            version = _meta_version(lambda: db.execute(
                "SELECT value FROM meta WHERE key='schema_version'").fetchone()) if "meta" in tables else None
            results = (db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
                       if count and "results" in tables else None)
    except sqlite3.DatabaseError as exc:  # a truncated file often fails before quick_check can answer
        return StoreState(**state, integrity=str(exc), problem=StoreError(
            shown, f"damaged: SQLite cannot read it ({exc})", move_aside(path)))
    state["integrity"] = "ok"
    return _judge(state, tables, version, user_version, results, move_aside(path))


def _inspect_server(location: StoreLocation, count: bool) -> StoreState:
    shown = location.shown
    state = {"shown": shown, "dialect": location.dialect, "integrity": "kept by the server"}
    engine = sa.create_engine(location.url, poolclass=sa.pool.NullPool, connect_args={"connect_timeout": 15})
    try:
        with engine.connect() as conn:
            tables = set(sa.inspect(conn).get_table_names())
            version = _meta_version(lambda: conn.execute(sa.text(
                "SELECT value FROM meta WHERE key='schema_version'")).fetchone()) if "meta" in tables else None
            results = (conn.execute(sa.text("SELECT COUNT(*) FROM results")).scalar_one()
                       if count and "results" in tables else None)
            size = conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one()
    except sa.exc.OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        return StoreState(**state, exists=False, problem=StoreError(
            shown, f"cannot connect: {reason}",
            "check the server, the database name and the credentials in --store / FLOPWATCH_STORE"))
    finally:
        engine.dispose()
    state.update(exists=True, size_bytes=size)
    return _judge(state, tables, version, 0, results,
                  "give flopwatch a database of its own (createdb flopwatch) and point --store at it")


def _judge(state: dict, tables: set, version: int | str | None, user_version: int, results, recovery) -> StoreState:
    """A store's verdict from what it holds: empty → new; flopwatch's meta → its version."""
    shown = state["shown"]
    if isinstance(version, str):  # the meta row exists but does not hold a number
        return StoreState(**state, problem=StoreError(shown, f"damaged: schema version {version!r} is not a number",
                                                      recovery))
    if not tables:
        return StoreState(**state, results=0 if results is not None else None)
    if version is None:
        listed = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
        return StoreState(**state, problem=StoreError(
            shown, f"not a flopwatch store: a database without flopwatch's schema (tables: {listed})", recovery))
    found = max(version, user_version)  # a newer flopwatch marks SQLite files with user_version too
    if found > SCHEMA_VERSION:
        return StoreState(**state, schema_version=found, results=results, problem=refuse_newer(shown, found))
    return StoreState(**state, schema_version=version, results=results)


def _meta_version(read) -> int | str | None:
    row = read()
    if row is None:
        return None
    try:
        return int(row[0])
    except (TypeError, ValueError):
        return str(row[0])


def _first(problems: list[str]) -> str:
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    return f"{problems[0]}{more}"
