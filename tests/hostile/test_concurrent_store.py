"""Two `flopwatch run`s at once on one store (two CI jobs sharing a results database): every
row of both is kept, each under its own run."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from hostile.hostile_repo import ROOT, make_repo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_two_runs_at_once_keep_every_row(tmp_path):
    make_repo(tmp_path / "repo", ("floods_stdout",), broken=("modifies_inputs",))
    db = tmp_path / "shared.db"
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    runs = [subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", rev, "--repo", str(tmp_path / "repo"),
                              "--db", str(db), "--no-report", "--json"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for rev in ("HEAD~1", "HEAD")]
    summaries = []
    for proc in runs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 1, err[-3000:]  # modifies_inputs is incorrect in both
        assert out.strip(), err[-3000:]
        summaries.append(json.loads(out.strip().splitlines()[-1]))
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT run_id, commit_sha, variant, status FROM results").fetchall()
    assert len(stored) == sum(len(s["results"]) for s in summaries)
    # three variants of the repository per run, plus the built-in peer (the repository declares none)
    for s in summaries:
        mine = sorted(r["variant"] for r in s["results"] if r["variant"] != "peer.gemm")
        assert mine == ["cpp_naive", "floods_stdout", "modifies_inputs"], mine
    for s in summaries:
        mine = sorted((v, st) for run_id, sha, v, st in stored if run_id == s["run_id"] and sha == s["commit"])
        assert mine == sorted((r["variant"], r["status"]) for r in s["results"])
    assert {s["run_id"] for s in summaries} == {1, 2}
