"""Remembers the change points of every window `detect` searched, so that a nightly searches only
the windows its new results changed.

A window's search is a pure function of its points and the test's settings
(`changepoint.window_key` names both), so a cached answer is the answer: the cache can only make
detection faster, never different. Losing it (a wiped runner) costs one full search.

Kept in an SQLite file of its own beside the build cache, not in the results store: it is
derived data, the store can be PostgreSQL shared by a team, and a cache must be safe to delete.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pipeline.history.caches.cache_file import CacheFile

# SQLite binds at most 32,766 parameters per statement (999 before 3.32): look keys up in chunks.
_CHUNK = 900


class MemoryCache:
    """The same interface in a dict (tests, one-off runs)."""

    def __init__(self) -> None:
        self.entries: dict[str, list[dict]] = {}

    def get_many(self, keys: Iterable[str]) -> dict[str, list[dict]]:
        return {k: self.entries[k] for k in keys if k in self.entries}

    def put_many(self, found: dict[str, list[dict]]) -> None:
        self.entries.update(found)

    def close(self) -> None:
        pass


class WindowCache(CacheFile):
    """Window key → its change points (a list of `ChangePoint` dicts), in one SQLite file."""

    def __init__(self, path: Path):
        super().__init__(path, "CREATE TABLE IF NOT EXISTS windows (key TEXT PRIMARY KEY, points TEXT NOT NULL)")

    def get_many(self, keys: Iterable[str]) -> dict[str, list[dict]]:
        keys = list(keys)
        found = {}
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i:i + _CHUNK]
            rows = self.db.execute(f"SELECT key, points FROM windows WHERE key IN ({','.join('?' * len(chunk))})",
                                   chunk)
            found.update((key, json.loads(points)) for key, points in rows)
        return found

    def put_many(self, found: dict[str, list[dict]]) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR REPLACE INTO windows VALUES (?, ?)",
                                ((k, json.dumps(v)) for k, v in found.items()))
