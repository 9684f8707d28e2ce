"""A driver killed with SIGKILL mid-run loses only the job in flight: `--resume` completes the
run, and the stored results equal those of an uninterrupted run of the same commit."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from suite_repo import make_suite_repo, stored_results

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parent.parent


def _run(repo: Path, db: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    return subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", "HEAD", "--repo", str(repo), "--db", str(db),
                             "--no-report", "--json", *extra], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT variant, shape, dtype, status FROM results ORDER BY variant, shape").fetchall()


def test_sigkill_then_resume_gives_the_uninterrupted_result_set(tmp_path):
    repo = tmp_path / "repo"
    make_suite_repo(repo, broken=("wrong_tile", "segfaults"))
    reference_db = tmp_path / "reference.db"
    assert _run(repo, reference_db).wait(timeout=600) == 1  # wrong_tile and segfaults fail
    expected = _rows(reference_db)
    assert len(expected) == 10  # 5 variants (incl. the peer) × 2 shapes

    db = tmp_path / "killed.db"
    driver = _run(repo, db)
    deadline = time.time() + 300
    while stored_results(db) < 3 and time.time() < deadline and driver.poll() is None:
        time.sleep(0.2)
    assert driver.poll() is None, "the run finished before it could be killed"
    driver.send_signal(signal.SIGKILL)  # the driver only; what it started must not matter
    driver.wait()
    partial = stored_results(db)
    assert 3 <= partial < len(expected)

    assert _run(repo, db, "--resume").wait(timeout=600) == 1
    assert _rows(db) == expected
