"""Schema versions: a store written by the previous flopwatch (schema 2, hand-written SQLite DDL,
the regressions table created on first use) is migrated in place, after a backup, keeping every
row; it is migrated once even when two processes open it at once; and the numbered steps reach
the same schema as a new store."""

from __future__ import annotations

import multiprocessing
import sqlite3
from contextlib import closing
from pathlib import Path

import sqlalchemy as sa

from pipeline.history.regressions import RegressionStore
from pipeline.store import SCHEMA_VERSION, Store, tables
from pipeline.store.migrations import STEPS

# The DDL of schema 2 as flopwatch wrote it before the store moved to SQLAlchemy (store.py and
# history/regressions.py at that version), with a few rows of each kind.
SCHEMA_2 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE commits (sha TEXT PRIMARY KEY, subject TEXT, author TEXT, authored_at TEXT, parents TEXT);
CREATE TABLE runs (id INTEGER PRIMARY KEY, commit_sha TEXT NOT NULL, dirty INTEGER NOT NULL, kind TEXT NOT NULL,
  repo TEXT, host TEXT, command TEXT, started_at REAL, finished_at REAL, summary TEXT);
CREATE TABLE builds (build_hash TEXT PRIMARY KEY, variant TEXT, ok INTEGER, toolchain TEXT, seconds REAL,
  first_errors TEXT, log TEXT, analysis TEXT, created_at REAL);
CREATE TABLE results (id INTEGER PRIMARY KEY, run_id INTEGER, commit_sha TEXT NOT NULL, dirty INTEGER NOT NULL,
  variant TEXT NOT NULL, op TEXT, backend TEXT, shape TEXT NOT NULL, dtype TEXT NOT NULL,
  device TEXT NOT NULL, toolchain TEXT, build_hash TEXT NOT NULL, status TEXT NOT NULL,
  peer INTEGER, median_s REAL, ci_low_s REAL, ci_high_s REAL, flops REAL, bytes_moved REAL,
  diagnostic TEXT, samples TEXT, correctness TEXT, timing TEXT, counters TEXT, resources TEXT,
  device_info TEXT, stderr_tail TEXT, created_at REAL, phases TEXT);
CREATE INDEX results_key ON results (commit_sha, variant, shape, dtype, device, build_hash);
CREATE INDEX results_series ON results (variant, shape, dtype, device);
CREATE TABLE regressions (id INTEGER PRIMARY KEY, variant TEXT NOT NULL, shape TEXT NOT NULL, dtype TEXT NOT NULL,
  device TEXT NOT NULL, good_sha TEXT NOT NULL, bad_sha TEXT NOT NULL, change REAL,
  rate_before REAL, rate_after REAL, p_value REAL, detected_at REAL, culprit_sha TEXT,
  bisect TEXT, UNIQUE (variant, shape, dtype, device, good_sha, bad_sha));
INSERT INTO meta VALUES ('schema_version', '2');
INSERT INTO commits VALUES ('c1', 'Tune tiles', 'Ada <ada@x>', '2026-01-01T00:00:00+00:00', '[]');
INSERT INTO runs VALUES (1, 'c1', 0, 'run', '/repo', 'node', 'run', 1.0, 2.0, '{"devices": []}');
INSERT INTO results (run_id, commit_sha, dirty, variant, shape, dtype, device, build_hash, status, median_s,
  samples, counters, phases) VALUES
  (1, 'c1', 0, 'v', 'M=1', 'fp32', 'cpu', 'h', 'ok', 0.001, '[0.001, 0.0011]', '{"l1_hit_pct": 50}', '{"timing_s": 1}'),
  (1, 'c1', 0, 'w', 'M=1', 'fp32', 'cpu', 'h', 'crashed', NULL, '[]', '{}', '{}');
INSERT INTO regressions (variant, shape, dtype, device, good_sha, bad_sha, change, culprit_sha)
  VALUES ('v', 'M=1', 'fp32', 'cpu', 'g', 'b', -0.1, 'b');
"""


def _schema_2_store(path):
    with closing(sqlite3.connect(path)) as db:
        db.executescript(SCHEMA_2)
    return path


def _rows(path, table):
    with closing(sqlite3.connect(path)) as db:
        return db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()


def test_schema_2_store_is_backed_up_then_migrated_keeping_every_row(tmp_path, capsys):
    db = _schema_2_store(tmp_path / "results.db")
    before = {t: _rows(db, t) for t in ("commits", "runs", "results", "regressions")}
    with Store(db) as store:
        assert store.migrated == (2, SCHEMA_VERSION)
        assert [r["variant"] for r in store.results()] == ["v", "w"]
        assert store.results(variant="v")[0]["counters"] == {"l1_hit_pct": 50}
        (regression,) = RegressionStore(store).all()
        assert regression.culprit_sha == "b"
    # Every row and value kept; a later column is empty, but a regression's metric (schema 5):
    # every step stored before it was a slowdown.
    later_default = {"regressions": ["time"]}
    for table, rows in before.items():
        after = _rows(db, table)
        assert [row[:len(rows[0])] for row in after] == rows, table
        assert [[v for v in row[len(rows[0]):] if v is not None] for row in after] == \
            [later_default.get(table, [])] * len(after), table
    backup = tmp_path / "results.db.schema2.bak"
    assert {t: _rows(backup, t) for t in before} == before
    with closing(sqlite3.connect(backup)) as old:
        assert old.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "2"
    with closing(sqlite3.connect(db)) as new:
        assert new.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert new.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert f"migrated from schema 2 to {SCHEMA_VERSION}" in capsys.readouterr().err
    with Store(db) as again:  # up to date now: no second migration, no second backup
        assert again.migrated is None
    assert sorted(p.name for p in tmp_path.glob("*.bak")) == ["results.db.schema2.bak"]


def test_schema_3_store_with_measurement_identities_keeps_them(tmp_path):
    """Schema 3 as the previous flopwatch wrote it: the identity column, no store id."""
    db = tmp_path / "results.db"
    with closing(sqlite3.connect(db)) as c:
        c.executescript(SCHEMA_2.replace("phases TEXT);", "phases TEXT, identity TEXT);")
                        .replace("VALUES ('schema_version', '2')", "VALUES ('schema_version', '3')"))
        c.execute("CREATE INDEX results_identity ON results (identity)")
        c.execute("UPDATE results SET identity = 'id-' || variant")
        c.commit()
    with Store(db) as store:
        assert store.migrated == (3, SCHEMA_VERSION)
        assert store.latest_by_identity(["id-v", "id-w", "id-x"]).keys() == {"id-v", "id-w"}
    assert (tmp_path / "results.db.schema3.bak").exists()


def test_schema_2_store_without_a_regressions_table_gains_one(tmp_path):
    db = tmp_path / "results.db"
    with closing(sqlite3.connect(db)) as c:
        c.executescript(SCHEMA_2.replace("CREATE TABLE regressions", "CREATE TABLE unused_old")
                        .split("INSERT INTO regressions")[0])
    with Store(db) as store:
        assert RegressionStore(store).all() == []
        with store.reading() as conn:
            assert sa.inspect(conn).has_table("regressions")


def _open(path, barrier, told) -> None:
    barrier.wait(timeout=60)
    store = Store(path)
    told.put(store.migrated)  # (from, to) in the one process that migrated, None in the other
    store.close()


def test_two_processes_opening_an_old_store_at_once_migrate_it_once(tmp_path):
    db = _schema_2_store(tmp_path / "results.db")
    ctx = multiprocessing.get_context("spawn")
    barrier, told = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_open, args=(db, barrier, told)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    migrated = sorted((told.get(timeout=10) for _ in procs), key=lambda m: m is None)
    assert migrated[0] is not None and migrated[1] is None, migrated  # one migration, not two
    assert sorted(p.name for p in db.parent.iterdir() if ".bak" in p.name) == ["results.db.schema2.bak"]
    assert len(_rows(db, "results")) == 2 and len(_rows(db, "regressions")) == 1
    with closing(sqlite3.connect(db)) as c:
        assert c.execute("SELECT COUNT(*) FROM meta WHERE key='store_id'").fetchone()[0] == 1


def test_migrated_store_has_the_schema_of_a_new_one(tmp_path):
    """Every table and column of tables.py, reached by the steps from version 1 on."""
    old = _schema_2_store(tmp_path / "old.db")
    Store(old).close()
    Store(tmp_path / "new.db").close()

    def columns(path):
        engine = sa.create_engine(f"sqlite:///{path}")
        with engine.connect() as conn:
            found = {t: {c["name"] for c in sa.inspect(conn).get_columns(t)} for t in tables.metadata.tables}
        engine.dispose()
        return found

    assert columns(old) == columns(tmp_path / "new.db") == {
        name: {c.name for c in table.columns} for name, table in tables.metadata.tables.items()}
    assert sorted(STEPS) == list(range(2, SCHEMA_VERSION + 1))


def _schema_4_store(url: str) -> None:
    """A store as schema 4 left it, on either dialect: no launch floor or peak memory per result,
    regressions keyed without a metric; one result and one regression (with its culprit)."""
    from pipeline.store import engine as engines
    from pipeline.store import location
    from pipeline.store.migrations import _V4_REGRESSIONS

    engine = engines.create(location.parse(url))
    with engine.begin() as conn:
        tables.metadata.create_all(conn)
        for column in ("launch_floor_s", "peak_mem_bytes"):
            conn.execute(sa.text(f"ALTER TABLE results DROP COLUMN {column}"))
        conn.execute(sa.text("DROP TABLE regressions"))
        _V4_REGRESSIONS.create(conn)
        conn.execute(tables.meta.insert(), [{"key": "schema_version", "value": "4"}, {"key": "store_id", "value": "s"}])
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA user_version = 4")
        conn.execute(sa.text("INSERT INTO results (commit_sha, dirty, variant, shape, dtype, device, build_hash, "
                             "status, median_s) VALUES ('c1', 0, 'v', 'M=1', 'fp32', 'cuda:H100', 'h', 'ok', 0.001)"))
        conn.execute(_V4_REGRESSIONS.insert().values(variant="v", shape="M=1", dtype="fp32", device="cuda:H100",
                                                     good_sha="g", bad_sha="b", change=-0.1, culprit_sha="b"))
    engine.dispose()


def test_schema_4_store_gains_floors_memory_and_the_metric_of_each_regression(store_url):
    """Schema 5 on both dialects: the results' new columns empty, every stored regression a
    slowdown with its id, and a memory step of the same series and range a row of its own (the
    key now holds the metric; on PostgreSQL the rebuilt table's ids go on after the copied ones)."""
    from pipeline.history.regressions import MEMORY, Regression

    if store_url.startswith("sqlite"):
        Path(store_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    _schema_4_store(store_url)
    with Store(store_url) as store:
        assert store.migrated == (4, SCHEMA_VERSION)
        (row,) = store.results()
        assert row["launch_floor_s"] is None and row["peak_mem_bytes"] is None
        table = RegressionStore(store)
        (old,) = table.all()
        assert (old.metric, old.culprit_sha, old.change) == ("time", "b", -0.1)
        again, new = table.record(Regression("v", "M=1", "fp32", "cuda:H100", "g", "b", -0.12, 1.0, 0.9, 0.01))
        assert not new and again.id == old.id and again.change == -0.12  # the same step, refreshed
        grown, new = table.record(Regression("v", "M=1", "fp32", "cuda:H100", "g", "b", 0.2, 1000, 1200, 0.0,
                                             metric=MEMORY))
        assert new and grown.id > old.id and grown.metric == MEMORY
        assert [r.metric for r in table.all()] == ["time", "memory"]
