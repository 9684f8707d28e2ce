"""The driver's machine loses the Ray head in the middle of `flopwatch run`: the command ends
with one clear line and exit 2 (not a traceback, not Ray's own abrupt end a minute later), and
every result finished before is in the store."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest
from ray.cluster_utils import Cluster
from suite_repo import stored_results

from hostile.hostile_repo import ROOT, make_repo
from hostile.processes import survivors
from pipeline.fleet import cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

CASE = "FLOPWATCH_HOSTILE_CASE"


def test_losing_the_head_ends_the_run_with_a_clear_error_and_keeps_finished_results(tmp_path):
    make_repo(tmp_path / "repo", ("slow",))
    db = tmp_path / "results.db"
    mark = uuid.uuid4().hex
    # The cluster's processes carry the case's mark too (they inherit this environment when they
    # start), so the check at the end covers the Ray this test started, not only the driver.
    os.environ[CASE] = mark
    try:
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        c.add_node(num_cpus=1, resources={cluster.CPU_RESOURCE: 1})
    finally:
        os.environ.pop(CASE)
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0", **{CASE: mark})
        driver = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", "run", "HEAD", "--repo", str(tmp_path / "repo"), "--db", str(db),
             "--no-report", "--ray-address", c.address], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        deadline = time.monotonic() + 600
        while stored_results(db) < 2 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert driver.poll() is None, f"the run ended before the head could be lost: {driver.communicate()[1][-2000:]}"
        c.head_node.kill_all_processes(check_alive=False, allow_graceful=False)
        finished_before = stored_results(db)
        _, err = driver.communicate(timeout=120)
    finally:
        c.shutdown()
    assert driver.returncode == 2, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith("flopwatch: error: ")]
    assert len(lines) == 1, err[-3000:]
    assert "lost the Ray cluster's head" in lines[0] and f"stored in {db}" in lines[0]
    assert "flopwatch run --resume" in lines[0] and "Traceback" not in err
    stored = stored_results(db)
    assert stored >= finished_before >= 2  # nothing finished was lost (a job in flight may have landed too)
    assert f"the {stored} result(s) this run finished" in lines[0]
    # The other node's Ray agents outlive the cluster's shutdown by about 60 s (they wait out
    # Ray's GCS reconnect limit when the head is gone): the patience covers that, and no more.
    assert survivors(CASE, mark, patience_s=90.0) == []
