"""The result store: one database (a SQLite file or a PostgreSQL database), one transaction per
finished result.

A driver killed at any moment loses only the job in flight: every finished result is its own
committed transaction, and `--resume` asks `done_keys` what to skip. Opening checks the store
first (`checks.inspect`: a damaged file, something that is not a store, or a store of a newer
flopwatch is refused with a `StoreError`) and brings an older schema up to date
(`migrations`). Many processes may write at once: SQLite serialises them (WAL, `BEGIN
IMMEDIATE`), PostgreSQL runs them side by side; rows are only ever inserted, or replaced by the
same key (a commit, a build). A write whose PostgreSQL connection dropped is tried again on a
new one (`retry`), and an insert so retried first looks for the row it may already have made.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import sqlalchemy as sa

from pipeline.store import checks, migrations, retry, statements
from pipeline.store import engine as engines
from pipeline.store import tables as t
from pipeline.store.location import StoreLocation, parse, sqlite_file
from workers.core.records import BuildResult, Result
from workers.core.untrusted import bounded

TEXT_LIMITS = t.TEXT_LIMITS


class Store:
    """One results database. `where`: a SQLite file path, a store URL, or a StoreLocation.
    Open, use, close (or `with Store(...) as store:`); safe to open from several processes."""

    def __init__(self, where: str | Path | StoreLocation):
        self.location = _location(where)
        state = checks.inspect(self.location)
        if state.problem is not None:
            raise state.problem
        if self.location.path is not None:
            self.location.path.parent.mkdir(parents=True, exist_ok=True)
        self.engine = engines.create(self.location)
        try:
            self.migrated = migrations.bring_up_to_date(self.engine, self.location, state.schema_version)
        except BaseException:
            self.engine.dispose()
            raise

    @property
    def path(self) -> Path | None:
        """The file of a SQLite store (None for a server)."""
        return self.location.path

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def writing(self):
        """A write transaction on this store (committed at the end of the `with` block)."""
        return engines.writing(self.engine)

    def reading(self):
        return engines.reading(self.engine)

    def _write(self, work):
        """`work(conn, again)` in one write transaction, retried where the connection dropped
        (`again`: an earlier attempt may have committed: see `retry`)."""
        def attempt(again: bool):
            with self.writing() as conn:
                return work(conn, again)

        return retry.write(self.location.dialect, self.location.shown, attempt)

    # -- writes: each one its own transaction -------------------------------------------------

    def record_commit(self, sha: str, subject: str, author: str, authored_at: str, parents: list[str]) -> None:
        values = {"sha": sha, "subject": bounded(subject, TEXT_LIMITS["subject"]),
                  "author": bounded(author, TEXT_LIMITS["author"]), "authored_at": authored_at,
                  "parents": json.dumps(parents)}
        self._write(lambda conn, _again: conn.execute(statements.upsert(conn, t.commits, values, ("sha",))))

    def start_run(self, commit_sha: str, dirty: bool, kind: str, repo: str, host: str, command: str) -> int:
        values = {"commit_sha": commit_sha, "dirty": int(dirty), "kind": kind, "repo": repo, "host": host,
                  "command": command, "started_at": time.time()}
        return self._write(lambda conn, again: _insert_once(conn, t.runs, values, again))

    def finish_run(self, run_id: int, summary: dict | None = None) -> None:
        """`summary`: the run's device accounting and peer check (`pipeline.run.accounting`)."""
        values = {"finished_at": time.time(), "summary": json.dumps(summary) if summary is not None else None}
        self._write(lambda conn, _again: conn.execute(t.runs.update().where(t.runs.c.id == run_id).values(values)))

    def note_run(self, run_id: int, **fields) -> None:
        """Add `fields` to a finished run's summary (what the command learnt after the run was
        stored: its whole wall, the report included)."""
        with self.writing() as conn:
            text = conn.execute(sa.select(t.runs.c.summary).where(t.runs.c.id == run_id)).scalar()
            summary = {**(json.loads(text) if text else {}), **fields}
            conn.execute(t.runs.update().where(t.runs.c.id == run_id).values(summary=json.dumps(summary)))

    def run_record(self, run_id: int | None = None, kind: str = "run") -> dict | None:
        """A run with its decoded summary: `run_id`, or the newest finished run of `kind`."""
        runs = t.runs.c
        query = sa.select(t.runs)
        query = query.where(runs.id == run_id) if run_id is not None else \
            query.where(runs.kind == kind, runs.summary.is_not(None)).order_by(runs.id.desc()).limit(1)
        with self.reading() as conn:
            row = conn.execute(query).mappings().first()
        if row is None:
            return None
        return {**dict(row), "summary": json.loads(row["summary"]) if row["summary"] else {}}

    def record_build(self, b: BuildResult) -> None:
        values = {"build_hash": b.build_hash, "variant": b.variant, "ok": int(b.ok), "toolchain": b.toolchain,
                  "seconds": b.seconds, "first_errors": bounded(b.first_errors, TEXT_LIMITS["diagnostic"]),
                  "log": bounded(b.log, TEXT_LIMITS["log"]), "analysis": json.dumps(b.analysis),
                  "created_at": time.time()}
        self._write(lambda conn, _again: conn.execute(statements.upsert(conn, t.builds, values, ("build_hash",))))

    def record_result(self, run_id: int, commit_sha: str, dirty: bool, r: Result) -> int:
        values = _result_values(run_id, commit_sha, dirty, r)
        return self._write(lambda conn, again: _insert_once(conn, t.results, values, again))

    def record_results(self, run_id: int, commit_sha: str, dirty: bool, results: Iterable[Result]) -> list[int]:
        """Results of one run in one write transaction, their ids in order: for rows that exist
        together (a synthetic history's night; a transaction per row made its year of 40,000 rows
        cost 18 s of CPU, half of it beginning and committing). A run's jobs keep `record_result`:
        each result is stored the moment it ends. Retried as a whole where the connection dropped:
        a row the lost commit stored is found, not written twice."""
        rows = [_result_values(run_id, commit_sha, dirty, r) for r in results]
        if not rows:
            return []
        return self._write(lambda conn, again: [_insert_once(conn, t.results, values, again) for values in rows])

    # -- reads ---------------------------------------------------------------------------------

    def done_keys(self, commit_sha: str) -> set[tuple]:
        """(variant, shape, dtype, device, build_hash) of every result stored for a commit."""
        r = t.results.c
        query = sa.select(r.variant, r.shape, r.dtype, r.device, r.build_hash).where(r.commit_sha == commit_sha)
        with self.reading() as conn:
            return {tuple(row) for row in conn.execute(query)}

    def latest_by_identity(self, identities: Iterable[str]) -> dict[str, dict]:
        """{identity: the newest stored result with it} for the identities that have one."""
        wanted = sorted({i for i in identities if i})
        r = t.results.c
        found: dict[str, dict] = {}
        for start in range(0, len(wanted), 500):  # bound parameters per statement stay few
            newest = (sa.select(sa.func.max(r.id)).where(r.identity.in_(wanted[start:start + 500]))
                      .group_by(r.identity))
            rows = self._decoded(sa.select(t.results).where(r.id.in_(newest.scalar_subquery())).order_by(r.id))
            found.update({row["identity"]: row for row in rows})
        return found

    def build(self, build_hash: str) -> dict | None:
        with self.reading() as conn:
            row = conn.execute(sa.select(t.builds).where(t.builds.c.build_hash == build_hash)).mappings().first()
        if row is None:
            return None
        d = dict(row)
        d["analysis"] = json.loads(d["analysis"] or "{}")
        return d

    def results(self, columns: Iterable[str] | None = None, **equal) -> list[dict]:
        """Result rows as dicts with JSON columns decoded, oldest first. `columns` limits the
        row to those columns (a year of history need not decode every tile map); keyword
        arguments keep the rows whose column equals the value (`results(commit_sha=sha)`)."""
        query = sa.select(*_columns(columns)).where(*_equal(equal)).order_by(t.results.c.id)
        return self._decoded(query)

    def results_by_id(self, ids: Iterable[int], columns: Iterable[str] | None = None) -> list[dict]:
        """The rows with these ids, as `results` gives them (the samples of re-runs to pool)."""
        query = sa.select(*_columns(columns)).where(t.results.c.id.in_(list(ids))).order_by(t.results.c.id)
        return self._decoded(query)

    def scan_results(self, columns: Iterable[str], after_id: int = 0, batch: int = 5000) -> Iterator[tuple]:
        """Every result row with an id above `after_id`, as a tuple of `columns` with JSON columns
        left as text, streamed in series order (variant, shape, dtype, device, then oldest first):
        a history of a million results is read one series at a time, not as a million dicts.
        The column `has_samples` is 1 when the row has samples (without sending them)."""
        r = t.results.c
        picked = []
        for name in columns:
            if name == "has_samples":
                empty = sa.or_(r.samples.is_(None), r.samples.in_(("", "[]")))
                picked.append(sa.case((empty, 0), else_=1).label(name))
            elif name in r:
                picked.append(r[name])
            else:
                raise TypeError(f"scan_results(): no result column {name!r}")
        query = sa.select(*picked).where(r.id > after_id).order_by(*(r[k] for k in t.SERIES_KEY), r.id)
        with self.reading() as conn:
            result = conn.execution_options(yield_per=batch).execute(query)
            for rows in result.partitions():
                yield from rows

    def sample_counts(self, commit_sha: str) -> dict[int, int]:
        """Row id -> how many samples it holds, for every result of one commit, counted in the
        stored JSON list without decoding it (a commit measured N times has N rows per series)."""
        r = t.results.c
        query = sa.select(r.id, r.samples).where(r.commit_sha == commit_sha).order_by(r.id)
        with self.reading() as conn:
            rows = conn.execute(query).fetchall()
        return {row_id: 0 if not text or text == "[]" else text.count(",") + 1 for row_id, text in rows}

    def results_extent(self, up_to_id: int | None = None) -> tuple[int, int]:
        """(number of result rows, highest id), of the rows up to `up_to_id` when given: results
        are only ever added, so an unchanged count up to an id means unchanged rows up to it."""
        r = t.results.c
        query = sa.select(sa.func.count(), sa.func.max(r.id))
        if up_to_id is not None:
            query = query.where(r.id <= up_to_id)
        with self.reading() as conn:
            count, top = conn.execute(query).one()
        return int(count), int(top or 0)

    def newest_per_series(self, columns: Iterable[str] | None = None, with_phases: bool = False) -> list[dict]:
        """The newest result of each (variant, shape, dtype, device); with_phases: the newest
        among those that recorded their phases (what the dispatcher's expected costs need)."""
        r = t.results.c
        newest = sa.select(sa.func.max(r.id))
        if with_phases:
            newest = newest.where(r.phases.is_not(None), r.phases != "{}")
        newest = newest.group_by(*(r[name] for name in t.SERIES_KEY))
        query = sa.select(*_columns(columns)).where(r.id.in_(newest.scalar_subquery())).order_by(r.id)
        return self._decoded(query)

    def latest_results(self, commit_sha: str) -> list[dict]:
        """The newest result per (variant, shape, dtype, device) of one commit, in the order each
        series first appeared in it. Only those rows are read and decoded: a commit measured N
        times holds N rows per series, each with its samples and tile maps, and the report reads
        this after every run (decoding every re-run's rows grew its time with each re-run)."""
        r = t.results.c
        key = [r[k] for k in t.SERIES_KEY]
        per_series = (sa.select(sa.func.max(r.id).label("newest"), sa.func.min(r.id).label("first"))
                      .where(r.commit_sha == commit_sha).group_by(*key).subquery())
        query = (sa.select(*_columns(None)).join(per_series, r.id == per_series.c.newest)
                 .order_by(per_series.c.first))
        return self._decoded(query)

    def run_summary(self, commit_sha: str) -> dict:
        """The summary (device accounting, peer check) of the newest finished run of a commit."""
        runs = t.runs.c
        query = (sa.select(runs.summary).where(runs.commit_sha == commit_sha, runs.summary.is_not(None))
                 .order_by(runs.id.desc()).limit(1))
        with self.reading() as conn:
            text = conn.execute(query).scalar()
        return json.loads(text) if text else {}

    def commit(self, sha: str) -> dict | None:
        with self.reading() as conn:
            row = conn.execute(sa.select(t.commits).where(t.commits.c.sha == sha)).mappings().first()
        return dict(row) if row else None

    def commits_with_results(self) -> list[dict]:
        """Commits that have results, newest result first."""
        r, c = t.results.c, t.commits.c
        last = (sa.select(r.commit_sha.label("sha"), sa.func.max(r.id).label("last_id"))
                .group_by(r.commit_sha).subquery())
        query = (sa.select(last.c.sha, last.c.last_id, c.subject, c.author, c.authored_at)
                 .select_from(last.outerjoin(t.commits, c.sha == last.c.sha)).order_by(last.c.last_id.desc()))
        with self.reading() as conn:
            return [dict(row) for row in conn.execute(query).mappings()]

    def runs(self) -> list[dict]:
        """Every run (without its summary), oldest first."""
        query = sa.select(*(c for c in t.runs.columns if c.name != "summary")).order_by(t.runs.c.id)
        with self.reading() as conn:
            return [dict(row) for row in conn.execute(query).mappings()]

    def count_results(self) -> int:
        with self.reading() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(t.results)).scalar_one())

    def _decoded(self, query) -> list[dict]:
        # Plain tuples zipped with the column names: the bulk reads of a year of history
        # (`series.load`) spend their time here, and this is the cheapest row form.
        with self.reading() as conn:
            result = conn.execute(query)
            names = tuple(result.keys())
            rows = result.fetchall()
        json_at = [(i, name, t.JSON_COLUMNS[name]) for i, name in enumerate(names) if name in t.JSON_COLUMNS]
        out = []
        loads = json.loads
        for row in rows:
            d = dict(zip(names, row))
            for _i, name, empty in json_at:
                text = d[name]
                d[name] = loads(text) if text else empty()
            out.append(d)
        return out


def count_results(where: str | Path | StoreLocation) -> int:
    """How many results a store holds."""
    with Store(where) as store:
        return store.count_results()


_IDENTIFYING = {"results": ("run_id", "variant", "shape", "dtype", "device", "peer", "created_at"),
                "runs": ("commit_sha", "host", "command", "started_at")}


def _result_values(run_id: int, commit_sha: str, dirty: bool, r: Result) -> dict:
    """The `results` row of `r`."""
    return {"run_id": run_id, "commit_sha": commit_sha, "dirty": int(dirty), "variant": r.variant, "op": r.op,
            "backend": r.backend, "shape": r.shape, "dtype": r.dtype, "device": r.device,
            "toolchain": r.toolchain, "build_hash": r.build_hash, "status": r.status, "peer": int(r.peer),
            "median_s": r.median_s, "ci_low_s": r.ci_low_s, "ci_high_s": r.ci_high_s, "flops": r.flops,
            "bytes_moved": r.bytes_moved, "diagnostic": bounded(r.diagnostic, TEXT_LIMITS["diagnostic"]),
            "samples": json.dumps(list(r.samples_s)), "correctness": json.dumps(r.correctness),
            "timing": json.dumps(r.timing), "counters": json.dumps(r.counters),
            "resources": json.dumps(r.resources), "device_info": json.dumps(r.device_info),
            "stderr_tail": bounded(r.stderr_tail, TEXT_LIMITS["stderr_tail"]), "created_at": time.time(),
            "phases": json.dumps(r.phases), "identity": r.identity or None,
            "launch_floor_s": r.launch_floor_s, "peak_mem_bytes": r.peak_mem_bytes}


def _insert_once(conn: sa.Connection, table: sa.Table, values: dict, again: bool) -> int:
    """Insert a row and return its id; on a retry (`again`), the id of the row an earlier
    attempt committed, if one did: the columns of `_IDENTIFYING` with the exact values sent
    (a client-side timestamp among them) name that one row."""
    if again:
        found = conn.execute(sa.select(table.c.id).where(*(table.c[k] == values[k] for k in _IDENTIFYING[table.name]))
                             .order_by(table.c.id).limit(1)).scalar()
        if found is not None:
            return int(found)
    # The values as parameters of the table's one INSERT, not baked into a statement per row:
    # SQLAlchemy then compiles the statement once and reuses it (a run stores many rows).
    return int(conn.execute(table.insert(), values).inserted_primary_key[0])


def _location(where) -> StoreLocation:
    if isinstance(where, StoreLocation):
        return where
    if isinstance(where, Path):
        return sqlite_file(where)
    return parse(str(where))


def _columns(columns: Iterable[str] | None) -> list[sa.Column]:
    if columns is None:
        return list(t.results.columns)
    wanted = [name for name in columns if name in t.results.c]
    return [t.results.c[name] for name in wanted]


def _equal(equal: dict) -> list:
    unknown = sorted(set(equal) - set(t.RESULT_COLUMNS))
    if unknown:
        raise TypeError(f"results(): no result column {', '.join(unknown)}")
    return [t.results.c[name] == value for name, value in equal.items()]
