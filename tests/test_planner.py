"""pipeline.run.planner and `flopwatch plan`: predictions from a stored run's job records (a real
store, runs written as the runner writes them), held against runs on other slot counts."""

from __future__ import annotations

import json
from dataclasses import replace

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
# Twelve variants of like length (none worth spreading over 4 slots), for the concurrency term:
# the runs' dealing and the planner's replay then agree, and the walls differ by the term alone.
EVEN = [("naive", "gemm", False, [1.3, 1.6]), ("tiled", "gemm", False, [1.2, 1.5]),
        ("wmma", "gemm", False, [1.0, 1.4]), ("peer.gemm", "gemm", True, [1.1, 1.2]),
        ("flash", "attention", False, [1.4, 0.9]), ("peer.attention", "attention", True, [0.8, 1.3]),
        ("rows", "softmax", False, [1.0, 1.1]), ("peer.softmax", "softmax", True, [0.9, 1.0]),
        ("copy", "copy", False, [1.2, 0.8]), ("scan", "scan", False, [1.1, 1.0]),
        ("reduce", "reduce", False, [0.9, 1.2]), ("gelu", "gelu", False, [1.0, 0.9])]


def record_run(store: Store, slots: int, outside: float = 3.0, check: bool = False,
               device: str = DEVICE, host: float = 1.0, suite=SUITE, retimes: bool = False,
               sampling: float = 0.6, resumed: int = 0) -> tuple[int, float]:
    """A finished run as `runflow.run_commit` and `flopwatch run` store it: its results with
    phases (one call per variant, longest first to the slot free soonest, back to back), and its
    summary (per-slot wall, busy, calls; the driver's whole wall). Returns (run id, jobs wall).
    A job of b seconds samples `sampling` × b; its other phases (load, correctness, warm-up in
    1:2:1) take the rest × `host`: how much more they take with the node's GPUs busy at once.
    `retimes`: every slot but the first re-times the peer check's job first (0.25 s of sampling;
    on the slots, not a stored result)."""
    run_id = store.start_run("a" * 40, False, "run", "/repo", "host", "run")
    t0, free = 1000.0, [1000.0] * slots
    busy, calls = [0.0] * slots, [0] * slots
    rest = (1 - sampling) * host
    if retimes and slots > 1:
        b = next(v[3][0] for v in suite if v[0] == "peer.gemm")
        retime = rest * b + min(sampling * b, PEER_RETIME_BUDGET_S)
        for s in range(1, slots):
            free[s] += OVERHEAD + retime
            busy[s] += retime
            calls[s] += 1
    for variant, op, peer, shapes in sorted(suite, key=lambda v: -sum(v[3])):
        s = free.index(min(free))
        started = free[s]
        at = started + OVERHEAD
        for i, b in enumerate(shapes):
            phases = {"load_s": 0.25 * rest * b, "correctness_s": 0.5 * rest * b, "warmup_s": 0.25 * rest * b,
                      "timing_s": sampling * b, "started_at": started, "began_at": at}
            b = sampling * b + rest * b
            phases["ended_at"] = at + b
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
    if resumed:  # a `run --resume`: how many stored results of the commit it kept
        summary["resumed"] = resumed
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
    # No other run in the store: the default growth of the jobs' non-sampling 40% on more GPUs.
    assert rec.growth.source == "default" and rec.growth.per_gpu == planner.DEFAULT_GROWTH
    previous = None
    for gpus in (1, 2, 4, 8):
        p = planner.predict(rec, 1, gpus)
        f = 1 + planner.DEFAULT_GROWTH * (gpus - 1)
        assert p.host_factor == pytest.approx(f)
        assert p.retimes == gpus - 1
        assert p.bound.bound_s <= p.jobs_wall_s
        retime = 0.4 * probe.busy_s * f + PEER_RETIME_BUDGET_S
        longest = 4.9 * (0.6 + 0.4 * f)
        assert p.bound.bound_s == pytest.approx(max(longest, (work * (0.6 + 0.4 * f) + (gpus - 1) * retime) / gpus))
        if previous is not None:
            assert p.jobs_wall_s < previous.jobs_wall_s
        previous = p
    # On 8 slots the long variant (1.2 s + 4.9 s, non-sampling × 1.7 there) is spread: its 4.9 s
    # shape bounds the run.
    p8 = planner.predict(rec, 1, 8)
    assert "naive" in p8.split and p8.jobs_wall_s < (4.9 + 1.2) * (0.6 + 0.4 * 1.7)
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


def test_plan_after_a_resume_run_plans_the_run_as_it_ran(tmp_path, capsys):
    """Docs review (2026-12-06): `plan` after `run --resume` planned the commit's whole job set,
    the kept results' times included (5.4 s predicted on one slot for a run that measured 2.5 s).
    It plans what the resumed run measured, and names what it kept and where to plan that."""
    db = tmp_path / "r.db"
    killed, measured = SUITE[:5], SUITE[5:]
    with Store(db) as store:
        first, _ = record_run(store, 1, suite=killed)
        kept = sum(len(v[3]) for v in killed)
        resumed, wall = record_run(store, 1, suite=measured, resumed=kept)
    assert cli.main(["plan", "--db", str(db), "--gpus", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["run_id"] == resumed and out["resumed_from"] == [first] and out["resumed_jobs"] == kept
    assert out["jobs"] == sum(len(v[3]) for v in measured)
    (one,) = out["predictions"]
    assert one["jobs_wall_s"] == pytest.approx(wall, abs=0.01)  # one slot, as recorded: the run's own wall
    assert out["recorded_jobs_wall_s"] == pytest.approx(wall, abs=0.01)
    assert cli.main(["plan", "--db", str(db)]) == 0
    assert (f"run {resumed} resumed {kept} cuda job(s) measured by run {first}: planned without them, as it ran "
            f"(--run {first} plans the run that measured them)") in capsys.readouterr().out


def test_a_resume_run_that_measured_nothing_names_the_run_to_plan(tmp_path, capsys):
    db = tmp_path / "r.db"
    with Store(db) as store:
        first, _ = record_run(store, 1)
        # `run --resume` of the same commit, every job already stored: nothing measured again.
        resumed = store.start_run("a" * 40, False, "run", "/repo", "host", "run")
        store.finish_run(resumed, {"devices": [], "driver": {"phases": {}, "command_s": 4.0}, "resumed": 17})
    assert cli.main(["plan", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"run {resumed} measured no device job" in err
    assert f"--resume kept 17 stored result(s) instead, measured by run {first}: plan that with --run {first}" in err


def test_plan_of_a_cpu_run_names_cpu_slots_not_gpus(tmp_path, capsys):
    db = tmp_path / "r.db"
    with Store(db) as store:
        record_run(store, 2, device="cpu:AMD EPYC")
    assert cli.main(["plan", "--db", str(db), "--gpus", "1,2"]) == 0
    text = capsys.readouterr().out
    assert "1 CPU slot " in text and "2 CPU slots" in text and "GPU" not in text


def four_gpus_of(store: Store, g: float, device: str = DEVICE, suite=EVEN) -> tuple[int, float]:
    """A 4-GPU run of `suite` whose jobs' non-sampling phases took 1 + 3g times the 1-GPU run's."""
    return record_run(store, 4, check=True, device=device, host=1 + 3 * g, suite=suite, retimes=True)


def test_planning_from_one_gpu_learns_the_growth_from_a_four_gpu_run_and_predicts_its_wall(tmp_path, capsys):
    db = tmp_path / "r.db"
    with Store(db) as store:
        one, wall_one = record_run(store, 1, check=True, suite=EVEN)
        four, wall_four = four_gpus_of(store, 0.2)  # non-sampling × 1.6, sampling as on one GPU
        rec = planner.from_store(store, one)
        back = planner.from_store(store, four)
    assert rec.gpus_per_node == 1 and rec.device == DEVICE
    assert rec.growth.run_id == four and rec.growth.per_gpu == pytest.approx(0.2)
    assert rec.growth.source == f"learned from run {four} (4 GPUs)" and rec.growth.common_jobs == 24
    p = planner.predict(rec, 1, 4)
    assert p.host_factor == pytest.approx(1.6)
    assert p.jobs_wall_s == pytest.approx(wall_four, rel=0.03)
    # The old model (no growth) misses the same run by far more.
    old = planner.predict(replace(rec, growth=planner.Growth(0.0)), 1, 4)
    assert old.jobs_wall_s < wall_four * 0.85
    assert abs(old.jobs_wall_s / wall_four - 1) > 3 * abs(p.jobs_wall_s / wall_four - 1)
    # The other way: the 4-GPU run learns the same g from the 1-GPU run and predicts its wall.
    assert back.gpus_per_node == 4 and back.growth.run_id == one and back.growth.per_gpu == pytest.approx(0.2)
    p1 = planner.predict(back, 1, 1)
    assert p1.host_factor == pytest.approx(1 / 1.6) and p1.jobs_wall_s == pytest.approx(wall_one, rel=0.03)
    assert planner.predict(back, 1, 4).host_factor == 1.0  # its own count: as recorded
    # `plan` shows the term and where it came from, in --json and in text.
    assert cli.main(["plan", "--db", str(db), "--run", str(one), "--gpus", "1,4", "--check", str(four), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["growth_per_gpu"] == pytest.approx(0.2) and out["growth_run_id"] == four
    assert out["growth_source"] == f"learned from run {four} (4 GPUs)" and out["recorded_gpus_per_node"] == 1
    assert [p["host_factor"] for p in out["predictions"]] == [1.0, pytest.approx(1.6)]
    # Held against the run g came from: close, and said to be no independent check.
    assert abs(out["checks"][0]["jobs_error_pct"]) <= 3.0 and out["checks"][0]["growth_learned_from_it"]
    assert cli.main(["plan", "--db", str(db), "--run", str(one), "--gpus", "1,4", "--check", str(four)]) == 0
    text = capsys.readouterr().out
    assert f"+20.0% per extra busy GPU of a node (learned from run {four} (4 GPUs)" in text and "×1.60" in text
    assert "the growth was learned from this run" in text
    # --default-growth: a check that is independent of the run held against.
    assert cli.main(["plan", "--db", str(db), "--run", str(one), "--gpus", "4", "--check", str(four), "--json",
                     "--default-growth"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["growth_source"] == "default" and out["growth_per_gpu"] == planner.DEFAULT_GROWTH
    assert not out["checks"][0]["growth_learned_from_it"]


def test_with_no_run_to_learn_from_the_default_growth_is_used_and_said(tmp_path, capsys):
    db = tmp_path / "r.db"
    with Store(db) as store:
        one, _ = record_run(store, 1, check=True, suite=EVEN)
        rec = planner.from_store(store)
    assert rec.growth == planner.Growth(planner.DEFAULT_GROWTH) and rec.growth.source == "default"
    assert planner.predict(rec, 1, 8).host_factor == pytest.approx(1 + 7 * planner.DEFAULT_GROWTH)
    # A 4-GPU run that grew as the default says: predicted as closely as a learned one.
    with Store(tmp_path / "other.db") as store:
        _, wall_four = four_gpus_of(store, planner.DEFAULT_GROWTH)
    assert planner.predict(rec, 1, 4).jobs_wall_s == pytest.approx(wall_four, rel=0.03)
    assert planner.predict(replace(rec, growth=planner.Growth(0.0)), 1, 4).jobs_wall_s < wall_four * 0.93
    assert cli.main(["plan", "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["growth_source"] == "default" and out["growth_run_id"] is None
    assert out["growth_per_gpu"] == planner.DEFAULT_GROWTH
    assert cli.main(["plan", "--db", str(db)]) == 0
    assert f"+{100 * planner.DEFAULT_GROWTH:.1f}% per extra busy GPU of a node (default" in capsys.readouterr().out


def test_the_sampling_loop_is_not_scaled(tmp_path):
    with Store(tmp_path / "r.db") as store:
        record_run(store, 1, check=True, suite=EVEN)
        rec = planner.from_store(store)
        record_run(store, 1, check=True, suite=EVEN, sampling=1.0)  # jobs that only sample
        sampling_only = planner.from_store(store)
    timing = sum(j.timing_s for j in rec.jobs)
    host = sum(j.busy_s - j.timing_s for j in rec.jobs)
    f = 1 + 3 * planner.DEFAULT_GROWTH
    p = planner.predict(rec, 1, 4)
    retime = (rec.probe.busy_s - rec.probe.timing_s) * f + min(rec.probe.timing_s, PEER_RETIME_BUDGET_S)
    # The work on 4 GPUs: every job's sampling as recorded, the rest × f (re-times alike).
    assert p.bound.work_s == pytest.approx(timing + host * f + 3 * retime)
    assert p.bound.work_s > timing + host + 3 * rec.probe.retime_s + 0.1
    # Jobs that only sample take on 4 GPUs what they took on one: only the re-times' cut.
    assert all(j.busy_s == j.timing_s for j in sampling_only.jobs)
    q = planner.predict(sampling_only, 1, 4)
    assert q.host_factor == pytest.approx(f)
    assert q.bound.work_s == pytest.approx(sum(j.busy_s for j in sampling_only.jobs) + 3 * PEER_RETIME_BUDGET_S)


def test_growth_is_learned_only_from_the_same_device_model_the_newest_run_first(tmp_path):
    with Store(tmp_path / "r.db") as store:
        one, _ = record_run(store, 1, check=True, suite=EVEN)
        four_gpus_of(store, 0.3, device="cuda:NVIDIA H200")  # another device model: not learned from
        assert planner.from_store(store, one).growth.source == "default"
        older, _ = four_gpus_of(store, 0.05)
        newer, _ = record_run(store, 2, check=True, host=1.2, suite=EVEN, retimes=True)
        record_run(store, 4, host=2.0, suite=EVEN[:2])  # 4 jobs in common: too few
        four_gpus_of(store, 0.4, device="cuda:NVIDIA H200")
        learned = planner.from_store(store, one).growth
    assert (learned.run_id, learned.gpus_per_node, learned.per_gpu) == (newer, 2, pytest.approx(0.2))
    assert learned.source == f"learned from run {newer} (2 GPUs)"
