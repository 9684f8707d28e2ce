"""Where the store and the build cache live (`--store`, `FLOPWATCH_STORE`, `--cache`,
`FLOPWATCH_CACHE`), what doctor says about a store, and a build cache shared by two drivers."""

from __future__ import annotations

import argparse
import multiprocessing
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from pipeline.commands import doctor
from pipeline.run import build_cache
from pipeline.store import SCHEMA_VERSION, Store, location
from pipeline.store.location import LocationError
from workers.core.records import BuildResult


@pytest.mark.parametrize(("text", "dialect", "shown"), [
    ("sqlite:////srv/fw/results.db", "sqlite", "/srv/fw/results.db"),
    ("/srv/fw/results.db", "sqlite", "/srv/fw/results.db"),
    ("postgresql://fw:s3cret@db.example:5433/history", "postgresql", "postgresql://fw:***@db.example:5433/history"),
    ("postgres://fw@db.example/history", "postgresql", "postgresql://fw@db.example/history"),
])
def test_store_urls_and_paths(text, dialect, shown):
    where = location.parse(text)
    assert (where.dialect, where.shown) == (dialect, shown)
    if dialect == "postgresql":
        assert where.url.drivername == "postgresql+psycopg" and where.path is None


def test_relative_paths_are_taken_from_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert location.parse("sqlite:///here/results.db").path == tmp_path / "here" / "results.db"
    assert location.parse("results.db").path == tmp_path / "results.db"


@pytest.mark.parametrize(("text", "message"), [
    ("", "the store location is empty"),
    ("sqlite://", "an in-memory store keeps nothing"),
    ("mysql://db/x", "scheme 'mysql' is not supported"),
    ("postgresql://db.example", "name the database"),
])
def test_unusable_locations_say_why(text, message):
    with pytest.raises(LocationError, match=message):
        location.parse(text)


def test_command_line_beats_environment_beats_default(tmp_path):
    default = tmp_path / "repo" / ".flopwatch" / "results.db"
    env = {"FLOPWATCH_STORE": "postgresql://fw@db/history", "FLOPWATCH_CACHE": str(tmp_path / "c")}
    assert location.resolve(None, default, {}).path == default
    assert location.resolve(None, default, env).dialect == "postgresql"
    assert location.resolve(str(tmp_path / "x.db"), default, env).path == tmp_path / "x.db"
    assert location.resolve(None, default, {"FLOPWATCH_STORE": ""}).path == default  # an unset secret
    assert location.resolve_cache(None, tmp_path / "d", env) == tmp_path / "c"
    assert location.resolve_cache(None, tmp_path / "d", {"FLOPWATCH_CACHE": ""}) == tmp_path / "d"
    assert location.resolve_cache(str(tmp_path / "e"), tmp_path / "d", env) == tmp_path / "e"


def test_folders_a_job_empties_are_known_only_under_actions(tmp_path):
    ws, temp = tmp_path / "_work" / "repo", tmp_path / "_temp"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(ws), "RUNNER_TEMP": str(temp)}
    assert location.wiped_by_ci(ws / ".flopwatch" / "results.db", env) == f"$GITHUB_WORKSPACE ({ws})"
    assert location.wiped_by_ci(temp / "r.db", env) == f"$RUNNER_TEMP ({temp})"
    assert location.wiped_by_ci(tmp_path / "flopwatch" / "r.db", env) is None
    assert location.wiped_by_ci(ws / "r.db", {**env, "GITHUB_ACTIONS": ""}) is None


def _doctor_row(**given) -> dict:
    args = argparse.Namespace(**{"repo": ".", "store": None, "db": None, **given})
    return doctor.store_row(args)


def test_doctor_reports_the_store_without_changing_it(tmp_path):
    missing = _doctor_row(store=str(tmp_path / "none.db"))
    assert missing["found"] and "no store yet" in missing["detail"] and not (tmp_path / "none.db").exists()
    path = tmp_path / "results.db"
    with Store(path) as store:
        store.start_run("c", False, "run", "", "", "run")
    healthy = _doctor_row(store=str(path))
    assert healthy["found"] and f"(sqlite, schema {SCHEMA_VERSION}, 0 results" in healthy["detail"]
    assert "integrity ok" in healthy["detail"]
    with closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
        db.execute("PRAGMA user_version = 2")
        db.commit()
    old = _doctor_row(store=str(path))
    assert f"schema 2 is migrated to {SCHEMA_VERSION} (after a backup) when flopwatch next opens it" in old["detail"]
    assert not list(tmp_path.glob("*.bak"))
    path.write_text("not a database")
    broken = _doctor_row(store=str(path))
    assert not broken["found"] and "not a SQLite database" in broken["detail"]
    assert "move it aside" in broken["hint"]


def _save(folder: Path, writer: int, barrier) -> None:
    record = BuildResult(variant="v", build_hash="h1", ok=True, toolchain="g++", seconds=float(writer))
    files = {f"lib{i}.so": bytes([writer]) * 200_000 for i in range(5)}
    barrier.wait(timeout=60)
    build_cache.save(folder, record, files)


def test_two_drivers_storing_the_same_build_leave_one_whole_entry(tmp_path):
    folder = build_cache.builds_dir(tmp_path / "cache") / "h1"
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_save, args=(folder, w, barrier)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    record, files = build_cache.load(folder)
    writer = int(record.seconds)
    assert sorted(files) == [f"lib{i}.so" for i in range(5)]
    assert all(data == bytes([writer]) * 200_000 for data in files.values())  # one writer's, not a mix
    assert [p.name for p in folder.parent.iterdir()] == ["h1"]  # no temporary folder left behind
