"""A damaged store, as an unlucky user meets it: `.flopwatch/results.db` truncated, replaced by a
text file, or marked by a newer flopwatch (`PRAGMA user_version = 999`). Each case is one small
store in a repository of its own; `flopwatch report` (reads) and `flopwatch run` (writes) must
exit 2 with one line (the path, what is wrong, how to recover) and leave the file as it was."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from suite_repo import make_suite_repo

from pipeline.store import SCHEMA_VERSION, Store
from workers.core.records import Result

ROOT = Path(__file__).resolve().parents[2]
ROWS = 40  # enough rows that the file spans many pages, so a cut lands inside the data


def _healthy_store(path: Path, sha: str) -> None:
    with Store(path) as store:
        run = store.start_run(sha, False, "run", "", "", "run")
        for i in range(ROWS):
            store.record_result(run, sha, False, Result(
                variant="cpp_naive", op="gemm", backend="cpp", shape=f"M={i},N=128,K=128", dtype="fp32",
                device="cpu:x86", status="ok", median_s=1e-3, samples_s=tuple(1e-3 + j * 1e-6 for j in range(200))))
    with closing(sqlite3.connect(path)) as db:  # fold the WAL into the file: the file alone is the store
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _text_file(path: Path) -> None:
    path.write_text("results were here\nsee the wiki\n")


def _newer_flopwatch(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA user_version = 999")
        db.commit()


CASES = {
    "truncated": (_truncated, ["damaged", "move it aside", "flopwatch run --resume"]),
    "text file": (_text_file, ["not a flopwatch store: not a SQLite database", "move it aside",
                               "flopwatch run --resume"]),
    "user_version 999": (_newer_flopwatch, ["schema version 999", f"reads up to {SCHEMA_VERSION}",
                                            "left untouched", "upgrade flopwatch"]),
}


@pytest.fixture(params=list(CASES))
def damaged(request, tmp_path):
    repo = make_suite_repo(tmp_path / "repo", good=("cpp_naive",))
    store = tmp_path / "repo" / ".flopwatch" / "results.db"
    _healthy_store(store, repo.head.commit.hexsha)
    damage, expected = CASES[request.param]
    damage(store)
    return tmp_path / "repo", store, expected, request.param


def _flopwatch(repo: Path, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *argv, "--repo", str(repo)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def _fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


@pytest.mark.parametrize("argv", [("report",), ("run", "--no-report", "--budget", "0.05")], ids=["report", "run"])
def test_damaged_store_is_refused_with_one_line_and_left_as_it_was(damaged, argv):
    repo, store, expected, case = damaged
    before = _fingerprint(store)
    done = _flopwatch(repo, *argv)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"flopwatch: error: {store}: "), lines[0]
    for text in expected:
        assert text in lines[0], (text, lines[0])
    assert _fingerprint(store) == before, "the damaged store was written to"
    assert not list(store.parent.glob("*.bak")), "a refused store must not be migrated"
    assert not (repo / ".flopwatch" / "site").exists() and "measured" not in done.stdout
    if case == "user_version 999":  # intact data of a newer flopwatch: every row is still there
        with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
            assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == ROWS
            assert db.execute("PRAGMA user_version").fetchone()[0] == 999
