"""A worker's network link cut in the middle of `flopwatch run` (a real cut on a namespace
network: no reset, its connections just go silent). With another worker up, the job that ran
on the cut one runs again there and every result is `ok`. With none, the jobs of the cut node
are recorded `lost` with its id, the run completes with every other result, and once the
machine is back (its Ray restarted, as a supervisor restarts it) `run --resume` measures
exactly the lost jobs on it; nothing is stored twice."""

from __future__ import annotations

import json
import time

import pytest
from suite_repo import stored_results

from hostile.hostile_repo import make_repo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROWS = 13  # `slow` at its 6 shapes, cpp_naive at 1, the built-in peer at slow's 6
RUN_LIMIT_S = 150


def _cut_when_two_are_stored(lab, worker, driver, db) -> None:
    deadline = time.monotonic() + RUN_LIMIT_S
    while stored_results(db) < 2 and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert driver.poll() is None, f"the run ended before the link was cut: {driver.communicate()[1][-2000:]}"
    lab.cut(worker)


def _finish(driver) -> tuple[dict, str]:
    out, err = driver.communicate(timeout=RUN_LIMIT_S)
    lines = out.strip().splitlines()
    assert lines, f"no JSON summary (exit {driver.returncode}): {err[-3000:]}"
    return json.loads(lines[-1]), err


def test_a_cut_worker_link_loses_its_jobs_and_resume_fills_the_gap_once_it_is_back(lab, lab_cluster, tmp_path):
    cluster, worker = lab_cluster
    cut_id = cluster.alive()[worker.address]
    repo, db = make_repo(tmp_path / "repo", ("slow",)), tmp_path / "results.db"
    run = ("run", "HEAD", "--repo", str(repo), "--db", str(db), "--no-report", "--json")

    driver = cluster.flopwatch(*run)
    _cut_when_two_are_stored(lab, worker, driver, db)
    summary, err = _finish(driver)

    assert driver.returncode == 1, err[-3000:]  # results lost with their node: exit 1, not a crash
    rows = summary["results"]
    assert len(rows) == ROWS and {r["status"] for r in rows} == {"ok", "lost"}, [r["status"] for r in rows]
    lost = [r for r in rows if r["status"] == "lost"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) >= 2 and all(cut_id in r["diagnostic"] for r in lost)
    (record,) = summary["lost_nodes"]
    assert record["node_id"] == cut_id and record["given_up"] >= 1 and record["retried"] == 0
    assert stored_results(db) == ROWS  # every job has its one row: measured, or lost

    # The link comes back. Ray declared the node dead and never takes it back under its old id:
    # the machine's Ray is restarted and joins as a new node.
    cluster.stop_node(worker)
    lab.mend(worker)
    cluster.start_worker(worker)
    back = cluster.wait_alive(2)
    assert back[worker.address] != cut_id

    resumed = cluster.flopwatch(*run, "--resume")
    again, err = _finish(resumed)
    assert resumed.returncode == 0, err[-3000:]
    new = [r for r in again["results"] if not r["resumed"]]
    assert sorted((r["variant"], r["shape"]) for r in new) == sorted((r["variant"], r["shape"]) for r in lost)
    assert {r["status"] for r in new} == {"ok"}
    assert {r["device_info"]["ray_node_id"] for r in new} == {back[worker.address]}
    # Nothing measured twice: one ok row per job, the lost rows kept as history beside them.
    assert stored_results(db) == ROWS + len(lost)
    print(f"figures: lost {len(lost)}, resumed {len(new)}, kept {len(ok)}")


def test_the_job_of_a_cut_worker_runs_again_on_the_other_worker(lab, lab_cluster, tmp_path):
    cluster, worker = lab_cluster
    other = lab.add("w2", 12)
    cluster.start_worker(other)
    nodes = cluster.wait_alive(3)
    repo, db = make_repo(tmp_path / "repo", ("slow",)), tmp_path / "results.db"

    driver = cluster.flopwatch("run", "HEAD", "--repo", str(repo), "--db", str(db), "--no-report", "--json")
    _cut_when_two_are_stored(lab, worker, driver, db)  # both CPU slots are busy while jobs remain
    summary, err = _finish(driver)

    assert driver.returncode == 0, err[-3000:]
    rows = summary["results"]
    assert len(rows) == ROWS and {r["status"] for r in rows} == {"ok"}, [r["status"] for r in rows]
    (record,) = summary["lost_nodes"]
    assert record["node_id"] == nodes[worker.address] and record["retried"] == 1 and record["given_up"] == 0
    # After the cut, everything ran on the other worker; nothing was stored twice.
    assert {r["device_info"]["ray_node_id"] for r in rows} <= {nodes[worker.address], nodes[other.address]}
    assert stored_results(db) == ROWS
    print(f"figures: retried {record['retried']}, lost 0, all {ROWS} ok")
