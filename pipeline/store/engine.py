"""One SQLAlchemy engine per store, with each dialect's settings for many writers.

SQLite: WAL (readers never block the writer), `synchronous=NORMAL` (a committed transaction
survives a killed process; only a power loss may undo the last ones), a 30 s busy timeout,
and write transactions opened with `BEGIN IMMEDIATE`: a deferred transaction that reads and
then writes can fail at once with "database is locked" when another process committed in
between, whereas IMMEDIATE takes the write lock up front and waits for it. SQLAlchemy emits
BEGIN itself (the sqlite3 module's own transaction handling is switched off), as its SQLite
dialect documents for exact transaction control.

PostgreSQL: psycopg 3, connections checked before use (a nightly may find the server
restarted since the pool opened), a connect timeout so that an unreachable server fails in
seconds, not minutes. A connection whose server went silent (a cut link, a switch that drops
it: no reset ever arrives) must fail too, or a write waits for the kernel's retransmissions,
about 15 minutes: libpq's `tcp_user_timeout` ends a connection whose sent data goes unanswered,
and TCP keepalives one that waits for an answer that never comes. `retry.write` then tries the
write again on a new connection. The silence limit is 10 s (`FLOPWATCH_STORE_SILENT_S` sets
another: a link that stalls longer without being lost, or a test that cuts one), a new
connection's timeout 5 s more.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy import event

from pipeline.store.location import StoreLocation

BUSY_TIMEOUT_S = 30
SILENT_ENV = "FLOPWATCH_STORE_SILENT_S"
SILENT_SERVER_S = 10  # unanswered this long, a connection counts as lost (FLOPWATCH_STORE_SILENT_S)
CONNECT_MORE_S = 5  # a new connection is given this much longer than the silence limit: 15 s
_WRITE = "flopwatch_write"


def silent_s(env: dict | None = None) -> int:
    """The silence limit in whole seconds (libpq takes no fractions), at least 1."""
    env = os.environ if env is None else env
    try:
        return max(1, round(float(env.get(SILENT_ENV, SILENT_SERVER_S))))
    except ValueError:
        return SILENT_SERVER_S


def pg_connect_args(env: dict | None = None) -> dict:
    """libpq's settings for a PostgreSQL connection (module docstring)."""
    silent = silent_s(env)
    return {"connect_timeout": silent + CONNECT_MORE_S, "tcp_user_timeout": silent * 1000,
            "keepalives": 1, "keepalives_idle": silent, "keepalives_interval": 3, "keepalives_count": 3}


def create(location: StoreLocation) -> sa.Engine:
    if location.dialect == "sqlite":
        engine = sa.create_engine(location.url, connect_args={"timeout": BUSY_TIMEOUT_S})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    return sa.create_engine(location.url, pool_pre_ping=True, connect_args=pg_connect_args())


def _sqlite_connect(dbapi_connection, _record) -> None:
    dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN (below)
    cursor = dbapi_connection.cursor()
    _to_wal(cursor)
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _to_wal(cursor) -> None:
    """WAL mode, waiting out other connections for up to the busy timeout. Switching a file out
    of rollback-journal mode needs it to itself, and SQLite can answer "database is locked" at
    once rather than through its busy handler: two processes opening an old store together
    failed so."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _sqlite_begin(conn: sa.Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")


@contextlib.contextmanager
def writing(engine: sa.Engine) -> Iterator[sa.Connection]:
    """One write transaction: committed when the block ends, rolled back if it raises."""
    with engine.connect() as conn:
        conn.execution_options(**{_WRITE: True})
        with conn.begin():
            yield conn


@contextlib.contextmanager
def reading(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A read: one consistent snapshot for the block."""
    with engine.connect() as conn:
        yield conn
