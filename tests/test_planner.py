"""pipeline.run.planner and `flopwatch plan`: predictions from a stored run's job records (a real
store, runs written as the runner writes them), held against runs on other slot counts."""

from __future__ import annotations

import json

import pytest

from pipeline import cli
from pipeline.run import planner
from pipeline.run.accounting import PEER_RETIME_BUDGET_S
from pipeline.store import Store
from workers.core.records import Result

DEVICE = "cuda:NVIDIA H100 80GB HBM3"
# (variant, op, peer, [busy seconds per shape]): a suite of 9 variants, one long one.
SUITE = [("naive", "gemm", False, [1.2, 4.9]), ("tiled", "gemm", False, [1.1, 1.4]),
         ("wmma", "gemm", False, [1.2, 1.1]), ("peer.gemm", "gemm", True, [0.7, 1.2]),
         ("flash", "attention", False, [0.5, 1.1]), ("peer.attention", "attention", True, [0.7, 0.9]),
         ("rows", "softmax", False, [0.3, 0.4]), ("peer.softmax", "softmax", True, [0.4, 0.3]),
         ("copy", "copy", False, [1.0])]
OVERHEAD = 0.25  # untimed slot time per call in the recorded runs


def record_run(store: Store, slots: int, outside: float = 3.0, check: bool = False,
               device: str = DEVICE) -> tuple[int, float]:
    """A finished run as `runflow.run_commit` and `flopwatch run` store it: its results with
    phases (one call per variant, longest first to the slot free soonest, back to back), and its
    summary (per-slot wall, busy, calls; the driver's whole wall). Returns (run id, jobs wall)."""
    run_id = store.start_run("a" * 40, False, "run", "/repo", "host", "run")
    t0, free = 1000.0, [1000.0] * slots
    busy, calls = [0.0] * slots, [0] * slots
    for variant, op, peer, shapes in sorted(SUITE, key=lambda v: -sum(v[3])):
        s = free.index(min(free))
        started = free[s]
        at = started + OVERHEAD
        for i, b in enumerate(shapes):
            phases = {"load_s": 0.1 * b, "correctness_s": 0.2 * b, "warmup_s": 0.1 * b, "timing_s": 0.6 * b,
                      "started_at": started, "began_at": at, "ended_at": at + b}
            at += b
            busy[s] += b
            store.record_result(run_id, "a" * 40, False, Result(
                variant=variant, op=op, backend="cuda", shape=f"n={i}", dtype="bf16", device=device, status="ok",
                median_s=1e-3, samples_s=(1e-3,), peer=peer, phases=phases,
                device_info={"slot": f"{planner.kind_of(device)}/{s}", "uuid": f"GPU-{s}"}))
        free[s], calls[s] = at, calls[s] + 1
    walls = [f - t0 for f in free]
    devices = [{"slot": f"{planner.kind_of(device)}/{s}", "device": device, "jobs": 0, "busy_s": busy[s], "wall_s": walls[s],
                "calls": calls[s]} for s in range(slots)]
    summary = {"devices": devices, "driver": {"phases": {}, "command_s": max(walls) + outside}}
    if check:
        summary["peer_check"] = {"checks": [{"variant": "peer.gemm", "shape": "n=0", "dtype": "bf16"}]}
    store.finish_run(run_id, summary)
    return run_id, max(walls)


def test_on_the_recorded_slot_count_the_prediction_is_the_recorded_wall(tmp_path):
    with Store(tmp_path / "r.db") as store:
        run_id, wall = record_run(store, 1)
        rec = planner.from_store(store)
    assert rec.run_id == run_id and rec.kind == "cuda" and rec.slots == 1 and len(rec.jobs) == 17
    assert rec.call_overhead_s == pytest.approx(OVERHEAD)
    assert rec.outside_s == pytest.approx(3.0)
    p = planner.predict(rec, 1, 1)
    assert p.jobs_wall_s == pytest.approx(wall) and p.command_s == pytest.approx(wall + 3.0)
    assert p.retimes == 0 and p.split == []


def test_more_slots_approach_the_bound_and_the_peer_check_costs_one_retime_per_extra_card(tmp_path):
    with Store(tmp_path / "r.db") as store:
        record_run(store, 1)
        rec = planner.from_store(store)
    work = sum(j.busy_s for j in rec.jobs)
    # the peer job of the longest launches (all medians equal here: the longest job)
    assert rec.probe is not None and (rec.probe.variant, rec.probe.shape) == ("peer.gemm", "n=1")
    # a re-time samples for the re-time budget, not the run's: its other phases stay
    probe = rec.probe
    assert probe.timing_s == pytest.approx(0.6 * probe.busy_s)
    assert probe.retime_s == pytest.approx(0.4 * probe.busy_s + PEER_RETIME_BUDGET_S)
    previous = None
    for gpus in (1, 2, 4, 8):
        p = planner.predict(rec, 1, gpus)
        assert p.retimes == gpus - 1
        assert p.bound.bound_s <= p.jobs_wall_s
        assert p.bound.bound_s == pytest.approx(max(4.9, (work + (gpus - 1) * rec.probe.retime_s) / gpus))
        if previous is not None:
            assert p.jobs_wall_s < previous.jobs_wall_s
        previous = p
    # On 8 slots the long variant (1.2 s + 4.9 s) is spread: its 4.9 s shape bounds the run.
    p8 = planner.predict(rec, 1, 8)
    assert "naive" in p8.split and p8.jobs_wall_s < 4.9 + 1.2
    # Nodes: 2 nodes of 4 are 8 slots; the peer check re-times on every slot but one.
    two = planner.predict(rec, 2, 4)
    assert two.slots == 8 and two.retimes == 7
    assert planner.predict(rec, 4, 1).retimes == 0  # one card per node: nothing to compare


def test_plan_command_holds_the_prediction_against_a_measured_run(tmp_path, capsys):
    db = tmp_path / "r.db"
    with Store(db) as store:
        one, _ = record_run(store, 1)
        two, wall_two = record_run(store, 2, check=True)
    assert cli.main(["plan", "--db", str(db), "--run", str(one), "--gpus", "1,2", "--gpus", "2x8",
                     "--check", str(two), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["run_id"] == one and out["kind"] == "cuda" and out["jobs"] == 17
    assert [(p["nodes"], p["gpus_per_node"]) for p in out["predictions"]] == [(1, 1), (1, 2), (2, 8)]
    (check,) = out["checks"]
    assert check["run_id"] == two and check["slots"] == 2 and check["jobs_wall_s"] == pytest.approx(wall_two, abs=0.01)
    # The same dealing, plus the peer check's one re-time on the second slot.
    assert 0.0 < check["jobs_error_pct"] <= 10.0
    assert cli.main(["plan", "--db", str(db), "--run", str(one)]) == 0
    text = capsys.readouterr().out
    assert "2 GPUs" in text and "8 GPUs" in text and "untimed per call" in text


def test_bad_input_says_what_is_wrong(tmp_path, capsys):
    db = tmp_path / "empty.db"
    Store(db).close()
    assert cli.main(["plan", "--db", str(db)]) == 2
    assert "no finished `flopwatch run`" in capsys.readouterr().err
    with Store(db) as store:
        record_run(store, 1)
    assert cli.main(["plan", "--db", str(db), "--run", "99"]) == 2
    assert "no run 99" in capsys.readouterr().err
    assert cli.main(["plan", "--db", str(db), "--kind", "rocm"]) == 2
    assert "measured no rocm job" in capsys.readouterr().err
    assert cli.main(["plan", "--db", str(db), "--gpus", "eight"]) == 2
    assert "give GPUs as N" in capsys.readouterr().err
    assert cli.main(["plan", "--db", str(db), "--gpus", "0x8"]) == 2
    assert "at least 1" in capsys.readouterr().err


def test_plan_after_a_resume_run_plans_from_the_resumed_jobs_stored_times(tmp_path, capsys):
    db = tmp_path / "r.db"
    with Store(db) as store:
        first, _ = record_run(store, 1)
        # `run --resume` of the same commit, every job already stored: nothing measured again.
        resumed = store.start_run("a" * 40, False, "run", "/repo", "host", "run")
        store.finish_run(resumed, {"devices": [], "driver": {"phases": {}, "command_s": 4.0}, "resumed": 17})
    assert cli.main(["plan", "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["run_id"] == resumed and out["resumed_from"] == [first] and out["jobs"] == 17 and out["kind"] == "cuda"
    assert cli.main(["plan", "--db", str(db)]) == 0
    assert f"run {resumed} resumed jobs measured by run {first}" in capsys.readouterr().out


def test_plan_of_a_cpu_run_names_cpu_slots_not_gpus(tmp_path, capsys):
    db = tmp_path / "r.db"
    with Store(db) as store:
        record_run(store, 2, device="cpu:AMD EPYC")
    assert cli.main(["plan", "--db", str(db), "--gpus", "1,2"]) == 0
    text = capsys.readouterr().out
    assert "1 CPU slot " in text and "2 CPU slots" in text and "GPU" not in text
