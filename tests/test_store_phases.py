"""Phase records per result and a summary per run (schema 2): a version-1 database is migrated
in place and keeps its rows; device busy time from the phases."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from pipeline.run import accounting
from pipeline.store import SCHEMA_VERSION, Store
from workers.core.records import Result

V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE runs (id INTEGER PRIMARY KEY, commit_sha TEXT NOT NULL, dirty INTEGER NOT NULL, kind TEXT NOT NULL,
  repo TEXT, host TEXT, command TEXT, started_at REAL, finished_at REAL);
CREATE TABLE results (id INTEGER PRIMARY KEY, run_id INTEGER, commit_sha TEXT NOT NULL, dirty INTEGER NOT NULL,
  variant TEXT NOT NULL, op TEXT, backend TEXT, shape TEXT NOT NULL, dtype TEXT NOT NULL,
  device TEXT NOT NULL, toolchain TEXT, build_hash TEXT NOT NULL, status TEXT NOT NULL,
  peer INTEGER, median_s REAL, ci_low_s REAL, ci_high_s REAL, flops REAL, bytes_moved REAL,
  diagnostic TEXT, samples TEXT, correctness TEXT, timing TEXT, counters TEXT, resources TEXT,
  device_info TEXT, stderr_tail TEXT, created_at REAL);
INSERT INTO results (run_id, commit_sha, dirty, variant, shape, dtype, device, build_hash, status)
  VALUES (1, 'abc', 0, 'old', 'M=1', 'fp32', 'cpu', 'h', 'ok');
"""


def _result(**phases) -> Result:
    return Result(variant="v", op="gemm", backend="cpp", shape="M=1", dtype="fp32", device="cuda:H200", status="ok",
                  median_s=1e-3, ci_low_s=0.9e-3, ci_high_s=1.1e-3, samples_s=(1e-3,), flops=2e9, phases=phases,
                  device_info={"uuid": "GPU-1", "ray_node_id": "n1"})


def test_version_1_database_is_migrated_and_keeps_its_rows(tmp_path):
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as c:
        c.executescript(V1)
    store = Store(db)
    assert store.migrated == (1, SCHEMA_VERSION)
    with closing(sqlite3.connect(db)) as c:
        assert c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    (old,) = store.results()
    assert old["variant"] == "old" and old["phases"] == {}
    run = store.start_run("abc", False, "run", "", "", "run")
    store.record_result(run, "abc", False, _result(load_s=0.5, timing_s=1.0))
    store.finish_run(run, {"devices": [{"slot": "cuda/0"}]})
    assert store.results(variant="v")[0]["phases"] == {"load_s": 0.5, "timing_s": 1.0}
    assert store.run_summary("abc") == {"devices": [{"slot": "cuda/0"}]}
    assert Result.from_dict(_result(queue_s=1.0).to_dict()).phases == {"queue_s": 1.0}


def test_busy_is_the_gpu_work_phases_and_wall_starts_at_the_first_submission():
    measured = [("cuda/0", _result(queue_s=9.0, start_s=0.5, load_s=0.3, correctness_s=0.2, warmup_s=1.0,
                                   timing_s=0.5)),
                ("cuda/0", _result(start_s=0.1, load_s=0.2, correctness_s=0.1, warmup_s=1.0, timing_s=0.7,
                                   profile_s=2.0))]
    (row,) = accounting.summarise(measured, first_submit=100.0, last_result={"cuda/0": 110.0})
    assert row["busy_s"] == 6.0 and row["wall_s"] == 10.0 and row["busy_pct"] == 60.0
    assert row["uuid"] == "GPU-1" and row["jobs"] == 2 and row["phases"]["queue_s"] == 9.0
    assert accounting.busy_line(row) == "cuda/0 (GPU-1): device busy 6.0 s of 10.0 s wall (60%), 2 jobs"


def test_two_jobs_of_one_slot_that_overlap_count_their_common_time_once():
    """A GPU slot starts the next job while the one before finishes (`workers.job.handoff`)."""
    first = _result(load_s=0.1, correctness_s=0.4, timing_s=1.5, began_at=100.0, ended_at=102.0)
    second = _result(correctness_s=0.5, timing_s=1.0, began_at=101.5, ended_at=103.0)  # 0.5 s beside the first
    failed = _result(correctness_s=0.3, began_at=103.0)  # no end mark: its start plus its busy phases
    (row,) = accounting.summarise([("cuda/0", first), ("cuda/0", second), ("cuda/0", failed)], first_submit=100.0,
                                  last_result={"cuda/0": 104.0})
    assert row["busy_s"] == 2.0 + 1.5 + 0.3 - 0.5
    assert "began_at" not in row["phases"] and row["phases"]["timing_s"] == 2.5
    assert accounting.overlap_s([(0.0, 2.0), (1.0, 3.0), (1.5, 2.5), (4.0, 5.0)]) == 1.0 + 1.0


def test_peer_check_flags_a_card_more_than_10_percent_slower_than_its_nodes_fastest():
    rows = [{"slot": f"cuda/{i}", "node_id": "n1", "variant": "torch_ref", "shape": "M=4096", "dtype": "bf16",
             "status": "ok", "median_s": t, "uuid": f"GPU-{i}", "pci_bus_id": ""}
            for i, t in enumerate((1.00e-3, 1.03e-3, 0.99e-3, 1.12e-3))]
    rows.append({**rows[0], "slot": "cuda/9", "node_id": "n2", "median_s": 2e-3})  # alone on its node
    check = accounting.peer_check(rows)
    assert [f["slot"] for f in check["flagged"]] == ["cuda/3"]
    assert check["flagged"][0]["off_pct"] == 13.13  # 1.12 / fastest 0.99; cuda/1 at +4.0% is a healthy pair's gap
    (line,) = accounting.flag_lines(check)
    assert "cuda/3" in line and "+13.1%" in line and "FLAGGED" in line
    rows[1] = {**rows[1], "status": "crashed", "median_s": None}
    assert {f["slot"] for f in accounting.peer_check(rows)["flagged"]} == {"cuda/1", "cuda/3"}


def test_a_peer_retime_samples_for_its_own_short_budget_and_never_profiles():
    settings = {"timing": {"budget_s": 1.0, "method": "events"}, "profile": True, "timeout_s": 60}
    retime = accounting.retime_settings(settings)
    assert retime["timing"] == {"budget_s": accounting.PEER_RETIME_BUDGET_S, "method": "events"}
    assert retime["profile"] is False and retime["timeout_s"] == 60
    assert settings["timing"]["budget_s"] == 1.0 and settings["profile"] is True  # the job's own are kept
    # a run asked for a shorter budget than the re-time's: the re-time is not longer than its jobs
    assert accounting.retime_settings({"timing": {"budget_s": 0.1}})["timing"]["budget_s"] == 0.1


@pytest.mark.parametrize("slower, flagged", [(1.12, ["cuda/1"]), (1.05, []), (0.89, ["cuda/0"])])
def test_on_a_node_of_two_cards_only_the_slow_one_is_flagged(slower, flagged):
    # Against the median of two (their midpoint) a 12% slower card would be 6% off and so would the
    # healthy one: neither flagged. Against the faster card only the slow one is.
    rows = [{"slot": f"cuda/{i}", "node_id": "n1", "variant": "torch_ref", "shape": "M=4096", "dtype": "bf16",
             "status": "ok", "median_s": t, "uuid": f"GPU-{i}", "pci_bus_id": ""}
            for i, t in enumerate((1.0e-3, slower * 1e-3))]
    assert [f["slot"] for f in accounting.peer_check(rows)["flagged"]] == flagged


def test_commit_page_shows_a_flagged_device(tmp_path):
    from pipeline.commands.publish import write_site

    store = Store(tmp_path / "r.db")
    store.record_commit("abc123", "subject", "a", "2026-11-22", [])
    run = store.start_run("abc123", False, "run", "", "", "run")
    store.record_result(run, "abc123", False, _result(load_s=0.5))
    flagged = {"slot": "cuda/3", "uuid": "GPU-<3>", "pci_bus_id": "", "node_id": "n1", "variant": "torch_ref",
               "shape": "M=4096", "dtype": "bf16", "status": "ok", "off_pct": 4.48}
    store.finish_run(run, {"devices": [{"slot": "cuda/3", "uuid": "GPU-<3>", "device": "cuda:H200", "jobs": 1,
                                        "busy_s": 0.5, "wall_s": 1.0, "busy_pct": 50.0}],
                           "peer_check": {"tolerance_pct": 3.0, "flagged": [flagged]}})
    write_site(store, tmp_path / "site")
    html = (tmp_path / "site" / "commit-abc123.html").read_text()
    assert "Devices slower than their node" in html and "+4.5%" in html and "GPU-&lt;3&gt;" in html
    # The tolerance the run was checked at, as stored with it (a run of an earlier default keeps its own).
    assert "more than 3% longer" in html
