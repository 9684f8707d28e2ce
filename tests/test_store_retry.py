"""A store write whose PostgreSQL connection dropped (pipeline/store/retry.py): tried again
until the window ends, then one StoreError line; an insert tried again after a commit whose
acknowledgement was lost finds its own row instead of writing it twice. The cut itself, on a
real network, is in tests/hostile/test_net_store_cut.py."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from pipeline.store import Store, StoreError, engine, retry
from pipeline.store import tables as t
from pipeline.store.database import _insert_once
from workers.core.records import Result


def _dropped() -> sa.exc.OperationalError:
    return sa.exc.OperationalError("INSERT INTO results ...", {}, Exception("server closed the connection unexpectedly"))


def test_a_write_is_tried_again_until_it_goes_through_and_says_so():
    attempts, said = [], []

    def attempt(again: bool):
        attempts.append(again)
        if len(attempts) < 3:
            raise _dropped()
        return 7

    assert retry.write("postgresql", "postgresql://u@h/db", attempt, sleep=lambda _s: None, say=said.append) == 7
    assert attempts == [False, True, True]  # every attempt after the first knows it may have landed
    assert said == ["postgresql://u@h/db: lost the connection to the server; trying the write again for up to 60 s",
                    "postgresql://u@h/db: the server answers again; the write went through after 2 retries"]


def test_a_silent_server_counts_as_lost_after_10_s_unless_set_otherwise():
    assert engine.pg_connect_args({}) == {"connect_timeout": 15, "tcp_user_timeout": 10_000, "keepalives": 1,
                                          "keepalives_idle": 10, "keepalives_interval": 3, "keepalives_count": 3}
    quick = engine.pg_connect_args({engine.SILENT_ENV: "3"})
    assert (quick["connect_timeout"], quick["tcp_user_timeout"], quick["keepalives_idle"]) == (8, 3000, 3)
    assert engine.pg_connect_args({engine.SILENT_ENV: "soon"}) == engine.pg_connect_args({})


def test_a_server_gone_for_the_whole_window_is_one_line(monkeypatch):
    monkeypatch.setenv(retry.WINDOW_ENV, "0")

    def attempt(_again: bool):
        raise _dropped()

    with pytest.raises(StoreError) as caught:
        retry.write("postgresql", "postgresql://u@h/db", attempt, sleep=lambda _s: None, say=lambda _l: None)
    assert str(caught.value) == (
        "postgresql://u@h/db: lost the connection to the server and could not write for 0 s (server closed the "
        "connection unexpectedly); every result committed before is kept; once the server answers, run "
        "`flopwatch run --resume` to measure the rest")


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_what_is_not_a_lost_connection_is_raised_at_once(dialect):
    def attempt(_again: bool):
        raise sa.exc.IntegrityError("INSERT", {}, Exception("duplicate key"))

    with pytest.raises(sa.exc.IntegrityError):
        retry.write(dialect, "x", attempt, sleep=lambda _s: pytest.fail("slept"), say=lambda _l: None)


def test_sqlite_errors_are_not_retried():
    calls = []

    def attempt(_again: bool):
        calls.append(1)
        raise sa.exc.OperationalError("INSERT", {}, Exception("database is locked"))

    with pytest.raises(sa.exc.OperationalError):
        retry.write("sqlite", "x", attempt, sleep=lambda _s: None, say=lambda _l: None)
    assert calls == [1]


def test_an_insert_tried_again_after_its_commit_landed_is_not_stored_twice(store_url):
    with Store(store_url) as store:
        run_id = store.start_run("c" * 40, False, "run", "/repo", "host", "run")
        result = Result(variant="v", op="gemm", backend="cpp", shape="M=1", dtype="fp32", device="cpu:x86",
                        toolchain="g++", build_hash="b", status="ok", median_s=1e-3)
        first = store.record_result(run_id, "c" * 40, False, result)
        (row,) = store.results()
        values = {k: row[k] for k in ("run_id", "variant", "shape", "dtype", "device", "peer", "created_at")}
        values.update({k: v for k, v in row.items() if k not in t.JSON_COLUMNS and k != "id"})
        with store.writing() as conn:  # the retry of the write whose acknowledgement was lost
            assert _insert_once(conn, t.results, values, again=True) == first
        assert store.count_results() == 1
        with store.writing() as conn:  # a first attempt always inserts
            assert _insert_once(conn, t.results, values, again=False) != first
        assert store.count_results() == 2
