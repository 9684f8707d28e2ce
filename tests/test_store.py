"""The result store on both dialects: every test runs on a SQLite file and on a real PostgreSQL
server started by the tests (tests/pg_server.py)."""

from __future__ import annotations

import multiprocessing

import pytest
import sqlalchemy as sa

from pipeline.history.regressions import Regression, RegressionStore
from pipeline.store import SCHEMA_VERSION, TEXT_LIMITS, Store, StoreError, location, retry
from pipeline.store.tables import meta
from workers.core.records import BuildResult, Result


def _result(variant="v", shape="M=1", median=1e-3, **extra) -> Result:
    timed = {} if median is None else {"median_s": median, "ci_low_s": median * 0.9, "ci_high_s": median * 1.1,
                                       "samples_s": (median, median * 1.01)}
    return Result(variant=variant, op="gemm", backend="cpp", shape=shape, dtype="fp32", device="cpu:x86",
                  status=extra.pop("status", "ok"), flops=2e9, build_hash=extra.pop("build_hash", "h1"),
                  **timed, **extra)


def test_results_round_trip_with_json_columns_decoded(store_url):
    with Store(store_url) as store:
        store.record_commit("c1", "subject", "A <a@x>", "2026-01-01T00:00:00+00:00", ["p0"])
        run = store.start_run("c1", False, "run", "/repo", "host", "run")
        store.record_result(run, "c1", False, _result(counters={"l1_hit_pct": 50.5},
                                                      phases={"timing_s": 1.5}, device_info={"uuid": "GPU-1"}))
        store.record_result(run, "c1", False, _result(variant="w", status="crashed", median=None))
        store.finish_run(run, {"devices": [{"slot": "cpu/0"}]})
        rows = store.results()
        assert [r["variant"] for r in rows] == ["v", "w"]
        assert rows[0]["samples"] == [1e-3, 1e-3 * 1.01] and rows[0]["counters"] == {"l1_hit_pct": 50.5}
        assert rows[0]["phases"] == {"timing_s": 1.5} and rows[0]["device_info"] == {"uuid": "GPU-1"}
        assert rows[1]["samples"] == [] and rows[1]["median_s"] is None and rows[1]["status"] == "crashed"
        assert [r["variant"] for r in store.results(status="crashed")] == ["w"]
        assert store.results(columns=("variant", "samples"), variant="v") == [{"variant": "v", "samples": rows[0]["samples"]}]
        assert store.done_keys("c1") == {("v", "M=1", "fp32", "cpu:x86", "h1"), ("w", "M=1", "fp32", "cpu:x86", "h1")}
        assert store.run_summary("c1") == {"devices": [{"slot": "cpu/0"}]}
        assert store.commit("c1")["parents"] == '["p0"]'
        assert [c["sha"] for c in store.commits_with_results()] == ["c1"]
        with pytest.raises(TypeError, match="no result column nonsense"):
            store.results(nonsense=1)


def test_results_of_one_run_stored_together_are_the_rows_stored_one_by_one(store_url, monkeypatch):
    results = [_result(counters={"l1_hit_pct": 50.5}), _result(variant="w", status="crashed", median=None),
               _result(shape="M=2", diagnostic="d" * 100_000)]
    with Store(store_url) as store:
        run = store.start_run("c1", False, "run", "/repo", "host", "run")
        singly = [store.record_result(run, "c1", False, r) for r in results]
        writes = []
        real_write = retry.write
        monkeypatch.setattr(retry, "write", lambda *a, **kw: writes.append(1) or real_write(*a, **kw))
        together = store.record_results(run, "c1", False, results)
        assert len(writes) == 1  # the three rows in one write transaction, not one each
        monkeypatch.setattr(retry, "write", real_write)
        assert store.record_results(run, "c1", False, []) == []
        rows = {row["id"]: row for row in store.results()}

        def same(row):
            return {k: v for k, v in row.items() if k not in ("id", "created_at")}

        assert together == sorted(together) and len(together) == 3 and min(together) > max(singly)
        assert [same(rows[i]) for i in together] == [same(rows[i]) for i in singly]

        # the commit landed but its acknowledgement was lost: the retry finds the rows, writes none
        def lost_ack(_dialect, _shown, attempt, **_kw):
            attempt(False)
            return attempt(True)

        monkeypatch.setattr(retry, "write", lost_ack)
        again = store.record_results(run, "c1", False, results[:2])
        assert store.count_results() == 8 and len(again) == 2 and again == sorted(again)


def test_commit_and_build_are_replaced_by_key_not_doubled(store_url):
    with Store(store_url) as store:
        store.record_commit("c1", "old subject", "a", "t", [])
        store.record_commit("c1", "new subject", "a", "t", [])
        build = BuildResult(variant="v", build_hash="h1", ok=True, toolchain="g++ 12", seconds=1.0,
                            analysis={"kernels": {"k": {"vgprs": 8}}})
        store.record_build(build)
        store.record_build(BuildResult(**{**build.to_dict(), "seconds": 2.0}))
        assert store.commit("c1")["subject"] == "new subject"
        assert store.build("h1")["seconds"] == 2.0 and store.build("h1")["analysis"] == {"kernels": {"k": {"vgprs": 8}}}
        with store.reading() as conn:
            assert conn.execute(sa.text("SELECT COUNT(*) FROM commits")).scalar() == 1
            assert conn.execute(sa.text("SELECT COUNT(*) FROM builds")).scalar() == 1


def test_text_the_repository_controls_is_bounded(store_url):
    with Store(store_url) as store:
        store.record_commit("c1", "s" * 10 * TEXT_LIMITS["subject"], "a", "t", [])
        run = store.start_run("c1", False, "run", "", "", "run")
        store.record_result(run, "c1", False, _result(diagnostic="d" * 100_000, stderr_tail="e" * 100_000))
        (row,) = store.results()
        assert len(store.commit("c1")["subject"]) <= TEXT_LIMITS["subject"]
        assert len(row["diagnostic"]) <= TEXT_LIMITS["diagnostic"] < 100_000
        assert len(row["stderr_tail"]) <= TEXT_LIMITS["stderr_tail"]


def test_newest_per_series_skips_rows_without_phases_when_asked(store_url):
    with Store(store_url) as store:
        run = store.start_run("c1", False, "run", "", "", "run")
        first = store.record_result(run, "c1", False, _result(phases={"timing_s": 1.0}))
        store.record_result(run, "c1", False, _result())  # newer, but no phases recorded
        other = store.record_result(run, "c1", False, _result(shape="M=2", phases={"timing_s": 3.0}))
        assert [r["id"] for r in store.newest_per_series(("id",), with_phases=True)] == [first, other]
        assert len(store.newest_per_series(("id",))) == 2
        assert store.newest_per_series(("id",))[0]["id"] == first + 1


def test_regressions_are_kept_once_per_step_and_take_a_culprit(store_url):
    step = Regression("v", "M=1", "fp32", "cpu:x86", "g1", "b1", change=-0.1, rate_before=2.0, rate_after=1.8,
                      p_value=0.01)
    with Store(store_url) as store:
        table = RegressionStore(store)
        stored, new = table.record(step)
        again, new_again = table.record(Regression(**{**step.to_dict(), "change": -0.2, "id": 0}))
        assert new and not new_again and again.id == stored.id and again.change == -0.2
        table.set_culprit(stored.id, "b1", {"message": "adjacent", "evaluations": 0})
        (only,) = table.all()
        assert only.culprit_sha == "b1" and only.bisect == {"message": "adjacent", "evaluations": 0}


def _write_results(url: str, writer: int, count: int, start_barrier) -> None:
    start_barrier.wait(timeout=60)
    with Store(url) as store:
        store.record_commit("shared", "both runs measure this commit", "a", "t", [])
        run = store.start_run("shared", False, "run", "", f"writer{writer}", "run")
        for i in range(count):
            store.record_result(run, "shared", False, _result(variant=f"w{writer}", shape=f"M={i}"))
        store.finish_run(run)


def test_two_runs_writing_at_once_keep_every_row(store_url):
    """Two processes write the same commit's results at the same time, each in its own
    transactions; every row arrives, no id is shared, the commit is stored once."""
    count = 60
    with Store(store_url):
        pass  # create the schema first: the race under test is the writes, not the creation
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    writers = [ctx.Process(target=_write_results, args=(store_url, w, count, barrier)) for w in (1, 2)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(timeout=300)
    assert [p.exitcode for p in writers] == [0, 0]
    with Store(store_url) as store:
        rows = store.results(columns=("id", "variant", "shape", "run_id"))
        assert len(rows) == 2 * count and len({r["id"] for r in rows}) == 2 * count
        for w in ("w1", "w2"):
            assert sorted(int(r["shape"][2:]) for r in rows if r["variant"] == w) == list(range(count))
        assert len({r["run_id"] for r in rows}) == 2
        assert [c["sha"] for c in store.commits_with_results()] == ["shared"]


def test_new_store_is_stamped_with_the_current_schema(store_url):
    with Store(store_url) as store, store.reading() as conn:
        values = dict(conn.execute(sa.select(meta.c.key, meta.c.value)).all())
        if store.path is not None:
            assert conn.exec_driver_sql("PRAGMA user_version").scalar() == SCHEMA_VERSION
    assert values["schema_version"] == str(SCHEMA_VERSION) and len(values["store_id"]) == 32


def test_store_of_a_newer_flopwatch_is_refused_and_left_as_it_was(store_url):
    with Store(store_url) as store:
        run = store.start_run("c1", False, "run", "", "", "run")
        store.record_result(run, "c1", False, _result())
        with store.writing() as conn:
            conn.execute(meta.update().where(meta.c.key == "schema_version").values(value="999"))
    with pytest.raises(StoreError) as caught:
        Store(store_url)
    message = str(caught.value)
    assert "schema version 999" in message and f"reads up to {SCHEMA_VERSION}" in message
    assert "upgrade flopwatch" in message and "\n" not in message
    engine = sa.create_engine(location.parse(store_url).url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT value FROM meta WHERE key='schema_version'")).scalar() == "999"
        assert conn.execute(sa.text("SELECT COUNT(*) FROM results")).scalar() == 1
    engine.dispose()


def test_a_database_of_something_else_is_not_taken_for_a_store(store_url):
    engine = sa.create_engine(location.parse(store_url).url)
    if location.parse(store_url).path is not None:
        location.parse(store_url).path.parent.mkdir(parents=True)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)"))
        conn.execute(sa.text("INSERT INTO invoices VALUES (1, 9.5)"))
    with pytest.raises(StoreError, match=r"not a flopwatch store: a database without flopwatch's schema "
                                         r"\(tables: invoices\)"):
        Store(store_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT total FROM invoices")).scalar() == 9.5
        assert not sa.inspect(conn).has_table("results")
    engine.dispose()


def test_unreachable_server_is_one_clear_line_without_the_password(tmp_path):
    with pytest.raises(StoreError) as caught:
        Store("postgresql://flopwatch:s3cret@127.0.0.1:1/history")
    text = str(caught.value)
    assert text.startswith("postgresql://flopwatch:***@127.0.0.1:1/history: cannot connect")
    assert "s3cret" not in text and "\n" not in text


def _sql_block_after(doc: str, marker: str) -> str:
    """The first ```sql block after `marker` in a doc."""
    text = doc[doc.index(marker):]
    start = text.index("```sql\n") + len("```sql\n")
    return text[start:text.index("```", start)]


def test_the_least_privilege_setup_of_the_docs_works_as_written(pg_server, tmp_path):
    """docs/store.md's SQL, run with psql on the test server: the nightly's role creates and
    writes the store; the reader's role can read it (and open it, for notebooks) but not write."""
    import shutil
    import subprocess
    from pathlib import Path

    from pipeline.history.frame import results_frame

    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed (Debian's postgresql-client, pulled in by postgresql)")
    doc = (Path(__file__).resolve().parents[1] / "docs" / "store.md").read_text()
    script = tmp_path / "setup.sql"
    script.write_text(_sql_block_after(doc, "### A runner pool: PostgreSQL"))
    base = f"postgresql://{{}}@127.0.0.1:{pg_server.port}/flopwatch"
    try:
        done = subprocess.run([psql, "-h", "127.0.0.1", "-p", str(pg_server.port), "-U", "flopwatch", "-d", "postgres",
                               "-v", "ON_ERROR_STOP=1", "-q", "-f", str(script)], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        with Store(base.format("flopwatch_nightly")) as store:
            run = store.start_run("c1", False, "nightly", "", "", "nightly")
            store.record_result(run, "c1", False, _result())
        reader = base.format("flopwatch_reader")
        assert list(results_frame(reader)["variant"]) == ["v"]
        engine = sa.create_engine(location.parse(reader).url)
        with pytest.raises(sa.exc.ProgrammingError, match="permission denied"), engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM results"))
        engine.dispose()
    finally:
        cleanup = ("DROP DATABASE IF EXISTS flopwatch WITH (FORCE); DROP ROLE IF EXISTS flopwatch_reader; "
                   "DROP ROLE IF EXISTS flopwatch_nightly;")
        subprocess.run([psql, "-h", "127.0.0.1", "-p", str(pg_server.port), "-U", "flopwatch", "-d", "postgres",
                        "-q", "-c", cleanup.split("; ")[0]], capture_output=True, timeout=60, check=False)
        for statement in cleanup.split("; ")[1:]:
            subprocess.run([psql, "-h", "127.0.0.1", "-p", str(pg_server.port), "-U", "flopwatch", "-d", "postgres",
                            "-q", "-c", statement.rstrip(";")], capture_output=True, timeout=60, check=False)
