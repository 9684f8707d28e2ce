"""The Ray head stops answering in the middle of `flopwatch run` (every process of the head's
Ray stopped with SIGSTOP, as a machine stalled in swap or a hung control store: its ports still
accept connections, nothing answers on them): the driver ends with one line and exit 2 within
seconds, not a hang and not Ray's own abrupt end, and every result finished before is stored."""

from __future__ import annotations

import os
import signal
import time

import pytest
from suite_repo import stored_results

from hostile.hostile_repo import make_repo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

RUN_LIMIT_S = 150
# What the driver may take to notice: three missed probes of pipeline/fleet/headwatch.py and its grace.
NOTICE_S = 60


def test_a_silent_head_ends_the_run_with_one_line_and_keeps_finished_results(lab_cluster, tmp_path):
    cluster, _ = lab_cluster
    repo, db = make_repo(tmp_path / "repo", ("slow",)), tmp_path / "results.db"
    driver = cluster.flopwatch("run", "HEAD", "--repo", str(repo), "--db", str(db), "--no-report")
    deadline = time.monotonic() + RUN_LIMIT_S
    while stored_results(db) < 2 and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert driver.poll() is None, f"the run ended before the head went silent: {driver.communicate()[1][-2000:]}"
    stopped = cluster.ray_processes(cluster.head)
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    finished_before, silent_at = stored_results(db), time.monotonic()
    try:
        _, err = driver.communicate(timeout=NOTICE_S)
    finally:
        for pid in stopped:  # the lab's clean-up kills them; continued first, so a failure here reads clearly
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    took = time.monotonic() - silent_at
    assert driver.returncode == 2, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("flopwatch: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert f"lost the Ray cluster's head: its control store at {cluster.address} stopped answering" in lines[0]
    assert "flopwatch run --resume" in lines[0]
    stored = stored_results(db)
    assert 13 > stored >= finished_before >= 2  # finished results kept; the run did not go on to the end
    print(f"figures: silent head noticed in {took:.1f} s, {stored} result(s) kept")
