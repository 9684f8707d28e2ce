"""Keeps every series' per-commit points between commands, so that a nightly reads from the results
store only the rows stored since the last command.

A point is a function of its commit's rows, and results are only ever added, so the points of a
history change only where new rows arrive: a new nightly adds one point to each series; a re-run
or a bisection probe of an old commit recomputes that commit's point from all its rows. Reading
three years of a fleet from the store costs seconds per hundred thousand rows (every row, with
its samples, checks and tile maps, passes through the database); reading the points kept here
costs a fraction of that.

Derived data in an SQLite file of its own beside the build cache, like the window cache: it can
be deleted at any time (the next command reads the whole store again), and it is thrown away by
itself when it does not match the store (another store, rows missing: the count of rows up to
the last one it has seen differs).
"""

from __future__ import annotations

import marshal
from collections.abc import Iterator
from pathlib import Path

from pipeline.history.caches.cache_file import CacheFile

# 2: a point holds its peak memory (last field).
VERSION = "2"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS series (id INTEGER PRIMARY KEY, variant TEXT, shape TEXT, dtype TEXT, device TEXT,
  unit TEXT, op TEXT, peer INTEGER, UNIQUE (variant, shape, dtype, device));
CREATE TABLE IF NOT EXISTS points (series INTEGER, sha TEXT, point BLOB, PRIMARY KEY (series, sha));
CREATE TABLE IF NOT EXISTS newest (series INTEGER, sha TEXT, id INTEGER, status TEXT, PRIMARY KEY (series, sha));
CREATE TABLE IF NOT EXISTS resources (id INTEGER PRIMARY KEY, flat BLOB UNIQUE);
"""


class PointsCache(CacheFile):
    """The points of one results store, in one SQLite file. A point is kept without its commit's
    subject and author (those come from the store's commit table when the history is built):
    `fields` is the tuple of `series.Point` fields from `status` on, with the resources dict
    replaced by the id of its interned copy (a series' resources rarely change)."""

    def __init__(self, path: Path):
        super().__init__(path, _SCHEMA)
        self._resource_ids: dict[bytes, int] = {}

    # -- what it covers -------------------------------------------------------------------------

    def covered(self) -> tuple[str, int, int] | None:
        """(store, last row id, rows up to it) the points were built from, or None when empty."""
        meta = dict(self.db.execute("SELECT key, value FROM meta"))
        if meta.get("version") != VERSION or "store" not in meta:
            return None
        return meta["store"], int(meta["last_id"]), int(meta["rows"])

    def clear(self) -> None:
        with self.db:
            self.db.execute("BEGIN")
            for table in ("meta", "series", "points", "newest", "resources"):
                self.db.execute(f"DELETE FROM {table}")
        self._resource_ids.clear()

    def set_covered(self, store: str, last_id: int, rows: int) -> None:
        """Record what the points now cover (inside the caller's `begin` … `commit`)."""
        self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                            [("version", VERSION), ("store", store), ("last_id", str(last_id)), ("rows", str(rows))])

    # -- writes -----------------------------------------------------------------------------------

    def series_id(self, key: tuple, unit: str, op: str, peer: bool) -> int:
        """The id of a series (created on first sight); its op and peer flag follow the newest row."""
        row = self.db.execute("SELECT id FROM series WHERE variant=? AND shape=? AND dtype=? AND device=?",
                              key).fetchone()
        if row:
            self.db.execute("UPDATE series SET op=?, peer=? WHERE id=?", (op, int(peer), row[0]))
            return row[0]
        return self.db.execute("INSERT INTO series (variant, shape, dtype, device, unit, op, peer) "
                               "VALUES (?,?,?,?,?,?,?)", (*key, unit, op, int(peer))).lastrowid

    def _resources_id(self, flat: dict | None, seen: dict[int, int]) -> int | None:
        if flat is None:
            return None
        if id(flat) in seen:  # the points of a series share one dict per distinct resources
            return seen[id(flat)]
        blob = marshal.dumps(flat)
        found = self._resource_ids.get(blob)
        if found is None:
            row = self.db.execute("SELECT id FROM resources WHERE flat=?", (blob,)).fetchone()
            found = row[0] if row else self.db.execute("INSERT INTO resources (flat) VALUES (?)", (blob,)).lastrowid
            self._resource_ids[blob] = found
        seen[id(flat)] = found
        return found

    def put_points(self, series_id: int, points: list[tuple[str, tuple]]) -> None:
        """Store (sha, fields) points of one series; fields as in the class docstring, with the
        resources still a dict."""
        rows, seen = [], {}
        for sha, fields in points:
            *head, resources, counters, diagnostic, memory = fields
            rows.append((series_id, sha, marshal.dumps((*head, self._resources_id(resources, seen), counters,
                                                        diagnostic, memory))))
        self.db.executemany("INSERT OR REPLACE INTO points VALUES (?, ?, ?)", rows)

    def put_newest(self, series_id: int, newest: list[tuple[str, int, str]]) -> None:
        """The newest row (sha, id, status) of one series at each commit, dirty runs included."""
        self.db.executemany("INSERT OR REPLACE INTO newest VALUES (?, ?, ?, ?)",
                            [(series_id, sha, row_id, state) for sha, row_id, state in newest])

    def begin(self) -> None:
        """Start the one transaction an update is written in: a command killed half way leaves
        the cache as it was."""
        self.db.execute("BEGIN")

    def commit(self) -> None:
        self.db.execute("COMMIT")

    # -- reads ------------------------------------------------------------------------------------

    def series(self) -> list[tuple]:
        """(id, (variant, shape, dtype, device), unit, op, peer) of every series, in key order."""
        return [(r[0], tuple(r[1:5]), r[5], r[6], bool(r[7])) for r in self.db.execute(
            "SELECT id, variant, shape, dtype, device, unit, op, peer FROM series ORDER BY variant, shape, dtype, "
            "device")]

    def resources(self) -> dict[int, dict]:
        """Interned resources id → the flat resources dict (one shared object each)."""
        return {rid: marshal.loads(blob) for rid, blob in self.db.execute("SELECT id, flat FROM resources")}

    def points(self) -> Iterator[tuple[int, list[tuple[str, tuple]]]]:
        """(series id, [(sha, fields)]) one series at a time, the resources in fields as their
        interned id (`resources`): the caller builds a series and drops its raw points before
        the next one is read."""
        cursor = self.db.cursor()
        cursor.execute("SELECT series, sha, point FROM points ORDER BY series")
        loads = marshal.loads
        current, mine = None, []
        while batch := cursor.fetchmany(20000):
            for series_id, sha, blob in batch:
                if series_id != current:
                    if mine:
                        yield current, mine
                    current, mine = series_id, []
                mine.append((sha, loads(blob)))
        if mine:
            yield current, mine

    def commit_counts(self, failures: frozenset[str]) -> dict[str, tuple[int, int, int]]:
        """sha → (series with a result, how many of them failing, newest row id)."""
        marks = ",".join("?" * len(failures))
        return {sha: (n, failing, last) for sha, n, failing, last in self.db.execute(
            f"SELECT sha, COUNT(*), SUM(status IN ({marks})), MAX(id) FROM newest GROUP BY sha", tuple(failures))}

    def keys_at(self, series_id: int) -> set[str]:
        """The commits a series has a point at."""
        return {sha for (sha,) in self.db.execute("SELECT sha FROM points WHERE series=?", (series_id,))}
