"""The PostgreSQL store on a machine of its own (a namespace of the lab network), its link cut
while `flopwatch run` writes to it. A cut longer than a connection's silence limit but shorter
than the retry window: the write is tried again, the run completes, every result stored once. A
cut that outlasts the window: one line, exit 2, the results so far kept, and `run --resume`
once the server is back stores exactly the rest. Rows are counted on the server itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from pg_server import NamespacedServer, why_not_available

from hostile.hostile_repo import ROOT, make_repo
from pipeline.store import engine, retry

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ROWS = 13  # `slow` at its 6 shapes, cpp_naive at 1, the built-in peer at slow's 6
RUN_LIMIT_S = 180
# The runs' silence limit: the product's 10 s would make each cut wait it out, and a new
# connection's timeout (5 s more), twice over; what a run does once a connection counts as lost
# is the same at any limit.
SILENT_S = 3
# Long enough that the write fails: the pool's check of the old connection waits out one silence
# limit, and its own reconnect the connect timeout (a cut shorter than that is healed by the pool
# alone); well inside the retry window.
SHORT_CUT_S = SILENT_S + engine.pg_connect_args({engine.SILENT_ENV: str(SILENT_S)})["connect_timeout"] + 5
SHORT_WINDOW_S = 5  # the second run's window, so that its cut outlasts it quickly


@pytest.fixture
def store_lab(lab):
    reason = why_not_available()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL store tests cannot run: {reason}")
        pytest.skip(reason)
    server = NamespacedServer(lab.add("pg", 3)).start()
    base = Path(tempfile.mkdtemp(prefix="fws", dir="/tmp"))  # short: Ray's socket paths live under it
    try:
        yield lab, server, lab.add("drv", 2), base
    finally:
        lab.close()
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def _driver(node, base: Path, *argv: str, env: dict | None = None) -> subprocess.Popen:
    """`flopwatch ARGV` on the driver's machine, with a local Ray of its own."""
    clean = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "FLOPWATCH_RAY_ADDRESS")}
    clean.update(PYTHONPATH=str(ROOT), RAY_TMPDIR=str(base), RAY_USAGE_STATS_ENABLED="0", FLOPWATCH_RAY_REUSE="0",
                 **{engine.SILENT_ENV: str(SILENT_S)}, **(env or {}))
    return subprocess.Popen(node.argv(sys.executable, "-m", "pipeline.cli", *argv), env=clean, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _rows(server: NamespacedServer, db: str, sha: str | None = None) -> list[tuple]:
    """(variant, shape, dtype, device, status) of every stored result (of one commit)."""
    try:
        with server.local(db) as conn:
            query = "SELECT variant, shape, dtype, device, status FROM results"
            return conn.execute(query + (" WHERE commit_sha = %s" if sha else ""), (sha,) if sha else ()).fetchall()
    except Exception as exc:  # the tables are made by the run's first connection
        if "does not exist" in str(exc):
            return []
        raise


def _when_stored(server, db, count: int, driver) -> None:
    deadline = time.monotonic() + RUN_LIMIT_S
    while len(_rows(server, db)) < count and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert driver.poll() is None, f"the run ended before the link was cut: {driver.communicate()[1][-2000:]}"


def _summary(driver) -> tuple[dict | None, str]:
    out, err = driver.communicate(timeout=RUN_LIMIT_S)
    lines = out.strip().splitlines()
    return (json.loads(lines[-1]) if lines else None), err


def test_a_cut_store_link_is_retried_or_ends_in_one_line_and_resume_stores_the_rest_once(store_lab):
    lab, server, node, base = store_lab
    repo = make_repo(base / "repo", ("slow",))
    url = server.create("fw")
    run = ("run", "--repo", str(repo), "--store", url, "--no-report", "--json")

    # A cut the connection does not survive, the server back within the window: retried.
    driver = _driver(node, base, *run, "HEAD")
    _when_stored(server, "fw", 2, driver)
    lab.cut(server.node)
    time.sleep(SHORT_CUT_S)
    lab.mend(server.node)
    first, err = _summary(driver)
    assert driver.returncode == 0, err[-3000:]
    assert "lost the connection to the server; trying the write again" in err
    assert "the server answers again; the write went through after" in err
    head = _rows(server, "fw", first["commit"])
    assert len(head) == ROWS and len(set(head)) == ROWS and {r[4] for r in head} == {"ok"}  # each once

    # A cut that outlasts the window: one line, exit 2, what was stored is kept.
    driver = _driver(node, base, *run, "HEAD~1", env={retry.WINDOW_ENV: str(SHORT_WINDOW_S)})
    _when_stored(server, "fw", ROWS + 2, driver)
    lab.cut(server.node)
    try:
        second, err = _summary(driver)
    finally:
        lab.mend(server.node)
    assert driver.returncode == 2 and second is None, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("flopwatch: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert f"lost the connection to the server and could not write for {SHORT_WINDOW_S} s" in lines[0]
    assert "every result committed before is kept" in lines[0] and "flopwatch run --resume" in lines[0]
    kept = len(_rows(server, "fw")) - ROWS
    assert 2 <= kept < ROWS

    # The server back: --resume stores exactly the rest; nothing twice, the first commit untouched.
    driver = _driver(node, base, *run, "HEAD~1", "--resume")
    third, err = _summary(driver)
    assert driver.returncode == 0, err[-3000:]
    before = _rows(server, "fw", third["commit"])
    assert len(before) == ROWS and len(set(before)) == ROWS and {r[4] for r in before} == {"ok"}
    assert sum(1 for r in third["results"] if r["resumed"]) == kept
    assert _rows(server, "fw", first["commit"]) == head
    print(f"figures: store writes retried in run 1, {kept} kept at exit 2, {ROWS - kept} resumed, rows lost 0")
