"""The SQLite file a cache of derived history data lives in (`points_cache`, `window_cache`):
beside the build cache, never in the results store (that can be a team's PostgreSQL, and a
cache must be safe to delete). WAL, so a reader never waits for a writer; autocommit, so each
cache opens its own transactions where it writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path


class CacheFile:
    def __init__(self, path: Path, schema: str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(schema)

    def close(self) -> None:
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
