"""A write to a PostgreSQL store whose connection dropped mid-run: tried again on a new
connection until the server answers, for up to `window_s()`; then one `StoreError` line (the
CLI exits 2) that says every result committed before is kept and `--resume` measures the rest.

Why writes must be idempotent to be retried: a connection can drop after the server committed a
transaction but before its acknowledgement arrived. The write is then retried not knowing
whether it landed, so every retried write is told so (`again=True`) and first looks for its own
row (`database.Store.record_result` matches the exact values it sent, its client-side timestamp
included); upserts and updates are idempotent already. A row is never written twice.

SQLite has no connection to lose: its errors ("database is locked" after the busy timeout, a
full disk) are not retried here.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from pipeline.store.errors import StoreError

T = TypeVar("T")
WINDOW_ENV = "FLOPWATCH_STORE_RETRY_S"
# A server restarted by its operator or a switch that reboots is back within a minute; a nightly
# that gives up sooner loses its whole run to a blip.
DEFAULT_WINDOW_S = 60.0
PAUSE_S = (0.5, 1.0, 2.0, 5.0)  # between attempts: quick at first, then every 5 s


def window_s(env: dict | None = None) -> float:
    env = os.environ if env is None else env
    try:
        return max(0.0, float(env.get(WINDOW_ENV, DEFAULT_WINDOW_S)))
    except ValueError:
        return DEFAULT_WINDOW_S


def connection_lost(exc: BaseException) -> bool:
    """Whether a database error means the connection (not the statement) failed."""
    return isinstance(exc, sa.exc.DBAPIError) and (exc.connection_invalidated
                                                   or isinstance(exc, sa.exc.OperationalError))


def _say(line: str) -> None:
    print(f"flopwatch: {line}", file=sys.stderr, flush=True)


def write(dialect: str, shown: str, attempt: Callable[[bool], T], sleep=time.sleep, say=_say) -> T:
    """`attempt(again)` until it returns, retrying a lost PostgreSQL connection (see above);
    `say` tells the user once that a write waits for the server, and again when it got through."""
    deadline, tries = None, 0
    while True:
        try:
            done = attempt(tries > 0)
            if tries:
                say(f"{shown}: the server answers again; the write went through after {tries} retr"
                    f"{'y' if tries == 1 else 'ies'}")
            return done
        except sa.exc.DBAPIError as exc:
            if dialect == "sqlite" or not connection_lost(exc):
                raise
            now = time.monotonic()
            if deadline is None:
                deadline = now + window_s()
                say(f"{shown}: lost the connection to the server; trying the write again for up to {window_s():g} s")
            if now >= deadline:
                first = (str(exc.orig or exc).strip().splitlines() or [type(exc).__name__])[0][:300]
                raise StoreError(shown, f"lost the connection to the server and could not write for {window_s():g} s "
                                        f"({first})",
                                 "every result committed before is kept; once the server answers, run "
                                 "`flopwatch run --resume` to measure the rest") from None
            sleep(min(PAUSE_S[min(tries, len(PAUSE_S) - 1)], max(0.0, deadline - now)))
            tries += 1
