"""SQLite result store (WAL mode, versioned schema, one transaction per finished result).

A driver killed at any moment loses only the job in flight: every finished result is its own
committed transaction, and `--resume` asks `done_keys` what to skip.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from workers.records import BuildResult, Result
from workers.untrusted import bounded

SCHEMA_VERSION = 3
# Columns added after version 1: (table, column, type). An older database gains them on open
# (2: phases per result, a summary per run; 3: the measurement identity of each result).
_ADDED = (("results", "phases", "TEXT"), ("runs", "summary", "TEXT"), ("results", "identity", "TEXT"))
# Text the repository under test controls (a subject, a compiler's or a kernel's output) is
# stored up to these many characters: a flood must not grow the store without bound. Values
# go in as bound parameters only, never into the SQL text.
TEXT_LIMITS = {"subject": 1000, "author": 300, "diagnostic": 8000, "stderr_tail": 8000, "log": 20000}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commits (
  sha TEXT PRIMARY KEY, subject TEXT, author TEXT, authored_at TEXT, parents TEXT);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY, commit_sha TEXT NOT NULL, dirty INTEGER NOT NULL, kind TEXT NOT NULL,
  repo TEXT, host TEXT, command TEXT, started_at REAL, finished_at REAL, summary TEXT);
CREATE TABLE IF NOT EXISTS builds (
  build_hash TEXT PRIMARY KEY, variant TEXT, ok INTEGER, toolchain TEXT, seconds REAL,
  first_errors TEXT, log TEXT, analysis TEXT, created_at REAL);
CREATE TABLE IF NOT EXISTS results (
  id INTEGER PRIMARY KEY, run_id INTEGER, commit_sha TEXT NOT NULL, dirty INTEGER NOT NULL,
  variant TEXT NOT NULL, op TEXT, backend TEXT, shape TEXT NOT NULL, dtype TEXT NOT NULL,
  device TEXT NOT NULL, toolchain TEXT, build_hash TEXT NOT NULL, status TEXT NOT NULL,
  peer INTEGER, median_s REAL, ci_low_s REAL, ci_high_s REAL, flops REAL, bytes_moved REAL,
  diagnostic TEXT, samples TEXT, correctness TEXT, timing TEXT, counters TEXT, resources TEXT,
  device_info TEXT, stderr_tail TEXT, created_at REAL, phases TEXT, identity TEXT);
CREATE INDEX IF NOT EXISTS results_key ON results (commit_sha, variant, shape, dtype, device, build_hash);
CREATE INDEX IF NOT EXISTS results_series ON results (variant, shape, dtype, device);
"""
# Created after the migration: a version-2 table has no identity column before it.
_INDEXES = "CREATE INDEX IF NOT EXISTS results_identity ON results (identity);"

_JSON_COLUMNS = ("samples", "correctness", "timing", "counters", "resources", "device_info", "phases")
_COLUMNS = ("id", "run_id", "commit_sha", "dirty", "variant", "op", "backend", "shape", "dtype", "device",
            "toolchain", "build_hash", "status", "peer", "median_s", "ci_low_s", "ci_high_s", "flops",
            "bytes_moved", "diagnostic", *_JSON_COLUMNS, "stderr_tail", "created_at", "identity")


# Columns computed from others (plain SQL: the same text works in PostgreSQL). Whether a row has
# samples is a comparison; counting them would cost a scan of a million sample lists.
_COUNTED = {"has_samples": "CASE WHEN samples IS NULL OR samples IN ('', '[]') THEN 0 ELSE 1 END"}


class StoreError(RuntimeError):
    pass


class Store:
    """One results database file. Open, use, close; safe to open from several processes."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self._migrate()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _migrate(self) -> None:
        self.db.executescript(_SCHEMA)
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            raise StoreError(f"{self.path}: schema version {row[0]} is newer than this flopwatch "
                             f"({SCHEMA_VERSION}); upgrade flopwatch")
        elif int(row[0]) < SCHEMA_VERSION:
            with self.db:
                for table, column, kind in _ADDED:
                    have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
                    if column not in have:
                        self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
        self.db.executescript(_INDEXES)

    # -- writes: each one its own transaction -------------------------------------------------

    def record_commit(self, sha: str, subject: str, author: str, authored_at: str, parents: list[str]) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO commits VALUES (?,?,?,?,?)",
                            (sha, bounded(subject, TEXT_LIMITS["subject"]), bounded(author, TEXT_LIMITS["author"]),
                             authored_at, json.dumps(parents)))

    def start_run(self, commit_sha: str, dirty: bool, kind: str, repo: str, host: str, command: str) -> int:
        with self.db:
            cur = self.db.execute(
                "INSERT INTO runs (commit_sha, dirty, kind, repo, host, command, started_at) VALUES (?,?,?,?,?,?,?)",
                (commit_sha, int(dirty), kind, repo, host, command, time.time()))
        return int(cur.lastrowid)

    def finish_run(self, run_id: int, summary: dict | None = None) -> None:
        """`summary`: the run's device accounting and peer check (`pipeline.accounting`)."""
        with self.db:
            self.db.execute("UPDATE runs SET finished_at=?, summary=? WHERE id=?",
                            (time.time(), json.dumps(summary) if summary is not None else None, run_id))

    def record_build(self, b: BuildResult) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO builds VALUES (?,?,?,?,?,?,?,?,?)",
                            (b.build_hash, b.variant, int(b.ok), b.toolchain, b.seconds,
                             bounded(b.first_errors, TEXT_LIMITS["diagnostic"]), bounded(b.log, TEXT_LIMITS["log"]),
                             json.dumps(b.analysis), time.time()))

    def record_result(self, run_id: int, commit_sha: str, dirty: bool, r: Result) -> int:
        with self.db:
            cur = self.db.execute(
                "INSERT INTO results (run_id, commit_sha, dirty, variant, op, backend, shape, dtype, device, "
                "toolchain, build_hash, status, peer, median_s, ci_low_s, ci_high_s, flops, bytes_moved, "
                "diagnostic, samples, correctness, timing, counters, resources, device_info, stderr_tail, "
                "created_at, phases, identity) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, commit_sha, int(dirty), r.variant, r.op, r.backend, r.shape, r.dtype, r.device,
                 r.toolchain, r.build_hash, r.status, int(r.peer), r.median_s, r.ci_low_s, r.ci_high_s,
                 r.flops, r.bytes_moved, bounded(r.diagnostic, TEXT_LIMITS["diagnostic"]), json.dumps(list(r.samples_s)),
                 json.dumps(r.correctness), json.dumps(r.timing), json.dumps(r.counters),
                 json.dumps(r.resources), json.dumps(r.device_info), bounded(r.stderr_tail, TEXT_LIMITS["stderr_tail"]),
                 time.time(), json.dumps(r.phases), r.identity or None))
        return int(cur.lastrowid)

    # -- reads ---------------------------------------------------------------------------------

    def done_keys(self, commit_sha: str) -> set[tuple]:
        """(variant, shape, dtype, device, build_hash) of every result stored for a commit."""
        rows = self.db.execute("SELECT variant, shape, dtype, device, build_hash FROM results WHERE commit_sha=?",
                               (commit_sha,))
        return {tuple(r) for r in rows}

    def latest_by_identity(self, identities) -> dict[str, dict]:
        """{identity: the newest stored result with it} for the identities that have one."""
        wanted = sorted({i for i in identities if i})
        found: dict[str, dict] = {}
        for start in range(0, len(wanted), 500):  # SQLite's bound-parameter limit
            chunk = wanted[start:start + 500]
            rows = self.results(f"id IN (SELECT MAX(id) FROM results WHERE identity IN "
                                f"({','.join('?' * len(chunk))}) GROUP BY identity)", tuple(chunk))
            found.update({r["identity"]: r for r in rows})
        return found

    def build(self, build_hash: str) -> dict | None:
        row = self.db.execute("SELECT * FROM builds WHERE build_hash=?", (build_hash,)).fetchone()
        if row is None:
            return None
        d = dict(row)
        d["analysis"] = json.loads(d["analysis"] or "{}")
        return d

    def results(self, where: str = "1", params: tuple = (), columns: tuple[str, ...] | None = None) -> list[dict]:
        """Result rows as dicts with JSON columns decoded, oldest first. `columns` limits the
        row to those columns (a year of history need not decode every tile map)."""
        wanted = "*" if columns is None else ", ".join(c for c in columns if c in _COLUMNS)
        rows = self.db.execute(f"SELECT {wanted} FROM results WHERE {where} ORDER BY id", params).fetchall()
        return [_decode(r) for r in rows]

    def scan_results(self, columns: tuple[str, ...], after_id: int = 0, batch: int = 5000) -> Iterator[tuple]:
        """Every result row (with an id above `after_id`) as a tuple of `columns`, JSON columns left
        as text, streamed in series order (variant, shape, dtype, device, then oldest first): a
        history of a million results is read one series at a time instead of as a million dicts
        at once. The column `has_samples` is 1 when the row has samples, without sending them."""
        unknown = [c for c in columns if c not in _COLUMNS and c not in _COUNTED]
        if unknown:
            raise StoreError(f"unknown result column(s): {', '.join(unknown)}")
        cursor = self.db.cursor()
        cursor.row_factory = None  # plain tuples: a third faster than sqlite3.Row over a million rows
        wanted = ", ".join(_COUNTED.get(c, c) for c in columns)
        cursor.execute(f"SELECT {wanted} FROM results WHERE id > ? ORDER BY variant, shape, dtype, device, id",
                       (after_id,))
        while rows := cursor.fetchmany(batch):
            yield from rows

    def results_extent(self, up_to_id: int | None = None) -> tuple[int, int]:
        """(number of result rows, highest id), of the rows up to `up_to_id` when given: results
        are only ever added, so an unchanged count up to an id means unchanged rows up to it."""
        where, params = ("WHERE id <= ?", (up_to_id,)) if up_to_id is not None else ("", ())
        count, top = self.db.execute(f"SELECT COUNT(*), MAX(id) FROM results {where}", params).fetchone()
        return int(count), int(top or 0)

    def latest_results(self, commit_sha: str) -> list[dict]:
        """The newest result per (variant, shape, dtype, device) of one commit."""
        rows = self.results("commit_sha=?", (commit_sha,))
        latest: dict[tuple, dict] = {}
        for r in rows:
            latest[(r["variant"], r["shape"], r["dtype"], r["device"])] = r
        return list(latest.values())

    def run_summary(self, commit_sha: str) -> dict:
        """The summary (device accounting, peer check) of the newest finished run of a commit."""
        row = self.db.execute("SELECT summary FROM runs WHERE commit_sha=? AND summary IS NOT NULL "
                              "ORDER BY id DESC LIMIT 1", (commit_sha,)).fetchone()
        return json.loads(row[0]) if row else {}

    def commit(self, sha: str) -> dict | None:
        row = self.db.execute("SELECT * FROM commits WHERE sha=?", (sha,)).fetchone()
        return dict(row) if row else None

    def commits_with_results(self) -> list[dict]:
        """Commits that have results, newest result first."""
        rows = self.db.execute(
            "SELECT r.commit_sha AS sha, MAX(r.id) AS last_id, c.subject, c.author, c.authored_at "
            "FROM results r LEFT JOIN commits c ON c.sha = r.commit_sha GROUP BY r.commit_sha ORDER BY last_id DESC")
        return [dict(r) for r in rows]


def _decode(row: sqlite3.Row) -> dict:
    d = dict(row)
    for col in _JSON_COLUMNS:
        if col in d:
            d[col] = json.loads(d[col]) if d[col] else ({} if col != "samples" else [])
    return d


def count_results(path: Path) -> int:
    with closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
