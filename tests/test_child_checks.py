"""The child's correctness check on the CPU with plain Python kernels: α·A·Bᵀ + β·C kernels
(alpha_beta) are checked with C initialised, and the race re-check runs on the first inputs."""

from __future__ import annotations

from pathlib import Path

import torch
from python_kernel import python_variant

from workers.core.records import Binding, Shape, Variant
from workers.job import child
from workers.ops import get_op

DIMS = {"M": 64, "N": 48, "K": 32}


def variant(alpha_beta: bool) -> Variant:
    return Variant("py", "gemm", "python", "kernels/gemm/py", ("k.py",), Binding("python", "k.py:f"), ("fp32",),
                   (Shape(DIMS),), alpha_beta=alpha_beta)


def gemm_nt(beta_used: float | None = None):
    def call(inputs, out, alpha=1.0, beta=0.0):
        res = inputs["A"] @ inputs["B"].T
        b = beta if beta_used is None else beta_used
        out.copy_(alpha * res + b * out)
    return call


def test_alpha_beta_kernel_is_checked_with_c_initialised():
    op = get_op("gemm")
    good = child.check(gemm_nt(), op, variant(True), DIMS, torch.float32, "cpu", seed=3)
    assert good["passed"] and "repeat_mismatch" not in good  # C accumulates: no repeat check
    wrong = child.check(gemm_nt(beta_used=0.0), op, variant(True), DIMS, torch.float32, "cpu", seed=3)
    assert not wrong["passed"] and wrong["rel_fro_err"] > 1e-3


def test_race_recheck_runs_when_asked_and_catches_an_output_that_moves():
    op = get_op("gemm")
    calls = {"n": 0}

    def racy(inputs, out, alpha=1.0, beta=0.0):
        calls["n"] += 1
        out.copy_(inputs["A"] @ inputs["B"].T)
        if calls["n"] == 2:  # the second run on the same inputs differs in one element
            out[0, 0] += 1.0

    first = child.check(racy, op, variant(False), DIMS, torch.float32, "cpu", seed=1, repeat=True)
    assert first["repeat_mismatch"] == 1 and not first["passed"]
    calls["n"] = 0
    skipped = child.check(racy, op, variant(False), DIMS, torch.float32, "cpu", seed=1, repeat=False)
    assert "repeat_mismatch" not in skipped and skipped["passed"] and calls["n"] == 1


def test_inputs_are_drawn_on_the_generators_device_and_depend_on_the_seed():
    op = get_op("gemm")
    a = op.make_inputs(DIMS, torch.bfloat16, "nt", "cpu", child.generator(5, "cpu"))
    b = op.make_inputs(DIMS, torch.bfloat16, "nt", "cpu", child.generator(5, "cpu"))
    c = op.make_inputs(DIMS, torch.bfloat16, "nt", "cpu", child.generator(6, "cpu"))
    assert a["A"].dtype == torch.bfloat16 and a["A"].device.type == "cpu"
    assert torch.equal(a["A"], b["A"]) and not torch.equal(a["A"], c["A"])
    assert 0.05 < float(a["A"].float().std()) < 0.2  # randn/10, never zeros


def _python_job(tmp: Path, body: str):
    from workers.core.records import BuildResult, Job

    v, files = python_variant(tmp, body, timeout_s=60.0)
    return Job(v.name, v.op, v.shapes[0], "fp32", "cpu"), v, BuildResult(v.name, "h", True, "python"), files


# Right for its first three calls (the first check, its repeat, the timing loop's first call),
# then one element moves: only the timing loop's first-against-last comparison can see it.
DRIFTS_LATER = """
calls = [0]
def gemm(a, b, c):
    calls[0] += 1
    c.copy_(a @ b.T)
    if calls[0] > 3:
        c[0, 0] += 1.0
"""


def test_the_second_check_is_the_timing_loops_first_call_and_its_last_call_must_agree(tmp_path):
    from workers.job import runner

    job, v, build, files = _python_job(tmp_path, DRIFTS_LATER)
    r = runner.execute_job(job, v, build, files, {"timing": {"budget_s": 0.05}, "threads": 1})
    assert r.status == "incorrect"
    assert "the first and the last launch of the timing loop differ" in r.diagnostic
    first, second = r.correctness["checks"]
    assert first["passed"] and first["repeat_mismatch"] == 0
    assert second["repeat_mismatch"] == 1 and not second["passed"]
    assert second["rel_fro_err"] < 1e-5  # the first timed call was right: the figures are of it

    good = "def gemm(a, b, c):\n    c.copy_(a @ b.T)\n"
    (tmp_path / "g").mkdir()
    job, v, build, files = _python_job(tmp_path / "g", good)
    r = runner.execute_job(job, v, build, files, {"timing": {"budget_s": 0.05}, "threads": 1})
    assert r.status == "ok", r.diagnostic
    seeds = [c["seed"] for c in r.correctness["checks"]]
    assert len(seeds) == 2 and seeds[0] != seeds[1]
    assert r.correctness["checks"][1]["repeat_mismatch"] == 0 and r.correctness["checks"][1]["unwritten"] == 0


def _in_this_process(args, timeout_s, workdir, max_write_bytes=None):
    """A launcher (`workers.job.runner.Launcher`) that runs the job's child in this process, so a
    test can replace what the child calls (the vendor's tool) and see it used or not."""
    import os
    import time

    from workers.isolation.sandbox import ChildOutcome

    here = os.getcwd()
    os.chdir(workdir)
    try:
        t0 = time.perf_counter()
        child.main(["child", *args])
        return ChildOutcome(0, "", False, time.perf_counter() - t0, "", "")
    finally:
        os.chdir(here)


def test_the_timing_loop_does_not_wait_for_the_devices_identity(tmp_path, monkeypatch):
    """The vendor's tool (nvidia-smi / rocm-smi) answers in 0.1-0.5 s, slower with every GPU of
    the node busy: the identity is asked beside the checks and read when the job ends, so a
    slow answer never holds the device idle before the timing loop, and the record still has it."""
    import time

    from workers.job import runner
    from workers.measure import device

    answered = device.info("cpu")

    def slow_info(kind):
        time.sleep(1.0)
        return answered

    monkeypatch.setattr(device, "info", slow_info)

    job, v, build, files = _python_job(tmp_path, "def gemm(a, b, c):\n    c.copy_(a @ b.T)\n")
    r = runner.execute_job(job, v, build, files, {"timing": {"budget_s": 0.05}, "threads": 1}, _in_this_process)
    assert r.status == "ok", r.diagnostic
    assert r.device_info["name"] == answered.name and r.device_info["kind"] == "cpu"
    # The checks of a 64³ GEMM take milliseconds: the loop began long before the identity came.
    assert r.phases["loop_began_at"] - r.phases["began_at"] < 0.8, r.phases


def test_a_slots_side_of_a_job_imports_no_torch(tmp_path):
    """A slot's actor prepares and records its jobs without torch (`workers.ops.DTYPE_BYTES`):
    its warm runner imports torch, and a second import per slot at a fresh node's start only
    competed with the runner's."""
    import subprocess
    import sys

    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from python_kernel import python_variant
from pathlib import Path
from pipeline.fleet import slots
from workers.core.records import BuildResult, Job
from workers.job import runner
v, files = python_variant(Path({str(tmp_path)!r}), "def gemm(a, b, c):\\n    c.copy_(a @ b.T)\\n", 60.0)
base = runner.job_base(Job(v.name, v.op, v.shapes[0], "bf16", "cuda"), v, BuildResult(v.name, "h", True, "python"), {{}})
from workers.ops import get_op
assert base["bytes_moved"] == get_op("gemm").bytes_moved(v.shapes[0].dims, 2) > 0, base
print("torch" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_a_job_given_its_slots_device_identity_asks_no_vendor_tool(tmp_path, monkeypatch):
    """A GPU slot hands its jobs the identity its first job read (`device.reusable_identity`):
    the job records it as is and runs no nvidia-smi / rocm-smi of its own."""
    from workers.job import runner
    from workers.measure import device

    def no_tool(kind):
        raise AssertionError("the vendor's tool was asked")

    monkeypatch.setattr(device, "info", no_tool)

    first = {"kind": "cpu", "name": "Test CPU", "uuid": "CPU-1", "extra": {"sm_clock_mhz": 1980.0, "power_limit_w": 700.0},
             "slot": "cuda/0", "ray_node_id": "n1", "cpus": "0-7"}
    known = device.reusable_identity(first)
    assert "sm_clock_mhz" not in known["extra"] and known["extra"]["power_limit_w"] == 700.0  # a reading, not the device
    assert not {"slot", "ray_node_id", "cpus"} & set(known)
    job, v, build, files = _python_job(tmp_path, "def gemm(a, b, c):\n    c.copy_(a @ b.T)\n")
    r = runner.execute_job(job, v, build, files, {"timing": {"budget_s": 0.05}, "threads": 1, "device_identity": known},
                           _in_this_process)
    assert r.status == "ok", r.diagnostic
    assert r.device_info["name"] == "Test CPU" and r.device_info["uuid"] == "CPU-1"


def test_a_prepared_process_reports_what_its_preparation_cost_on_its_first_job_only(tmp_path, monkeypatch):
    """A spare's preparation (`child.prepare`) holds the device lock step by step; the first job
    the process then runs carries what that cost ("prepared_ahead": the lock waited for and
    held), outside the job's own phases (its busy time and overhead are unchanged)."""
    import contextlib
    import time

    from workers.job import runner

    monkeypatch.setattr(child, "PREPARED_AHEAD", {})
    steps = []

    @contextlib.contextmanager
    def slow_lock():  # each step waits 0.02 s for the lock
        time.sleep(0.02)
        steps.append(1)
        yield

    child.prepare("cpu", step=slow_lock)
    job, v, build, files = _python_job(tmp_path, "def gemm(a, b, c):\n    c.copy_(a @ b.T)\n")
    settings = {"timing": {"budget_s": 0.05}, "threads": 1}
    first = runner.execute_job(job, v, build, files, settings, _in_this_process)
    ahead = first.phases["prepared_ahead"]
    assert first.status == "ok" and len(steps) == 6
    assert ahead["waited_s"] >= 0.02 * len(steps) and ahead["held_s"] > 0 and ahead["ended_at"] <= first.phases["began_at"]
    # each kind of step's hold, and the longest one (what a timing loop may have to wait for)
    per_step = {k: v for k, v in ahead.items() if k.endswith("_held_s") and k != "longest_held_s"}
    assert set(per_step) == {"reference_held_s", "checks_held_s"}  # a CPU spare: no context, no events
    assert abs(sum(per_step.values()) - ahead["held_s"]) < 1e-3 and 0 < ahead["longest_held_s"] <= ahead["held_s"]
    assert runner.phase_seconds(first.phases) == runner.phase_seconds(
        {k: v for k, v in first.phases.items() if k != "prepared_ahead"})
    second = runner.execute_job(job, v, build, files, settings, _in_this_process)
    assert second.status == "ok" and "prepared_ahead" not in second.phases


def _compared(passed: bool, err: float, fill: float) -> dict:
    """One check's figures as the child writes them: a compared output with its tile map."""
    return {"passed": passed, "rel_fro_err": err, "max_abs_err": err * 10, "tile": [64, 64],
            "map_tile": [128, 128], "tile_map": [[fill, fill], [fill, fill]]}


def test_the_tile_map_kept_is_the_failing_checks_when_an_earlier_one_passed():
    """Tests review (2026-12-06): every result of the only test had one check, so keeping the
    first check's map (`worst = compared[0]`) passed. Here the first two checks pass and the third
    fails: its map is the one kept, and the errors are the worst of all three."""
    from workers.core.records import BuildResult
    from workers.isolation.sandbox import ChildOutcome
    from workers.job import runner

    data = {"status": "incorrect", "diagnostic": "3rd check: rel err 0.2",
            "checks": [_compared(True, 1e-6, 0.0), _compared(True, 2e-6, 0.0), _compared(False, 0.2, 7.5)]}
    base = dict(variant="v", op="gemm", backend="cpp", shape="M=256,N=256,K=64", dtype="fp32", device="cpu:x")
    result = runner.classify(base, data, ChildOutcome(0, "", False, 0.1, "", ""), 10.0, None,
                             BuildResult("v", "h", True, "g++"), 0)
    c = result.correctness
    assert result.status == "incorrect" and c["tile_map"] == [[7.5, 7.5], [7.5, 7.5]] and c["tile"] == [128, 128]
    assert c["rel_fro_err"] == 0.2 and c["max_abs_err"] == 2.0 and len(c["checks"]) == 3
    assert all("tile_map" not in check for check in c["checks"])
    # The failing check ahead of passing ones (the child runs every seed, it does not stop at the
    # first failure): still its map, not the last check's.
    data = {"status": "incorrect", "diagnostic": "1st check: rel err 0.3",
            "checks": [_compared(False, 0.3, 9.0), _compared(True, 1e-6, 0.0)]}
    first = runner.classify(base, data, ChildOutcome(0, "", False, 0.1, "", ""), 10.0, None,
                            BuildResult("v", "h", True, "g++"), 0)
    assert first.correctness["tile_map"] == [[9.0, 9.0], [9.0, 9.0]] and first.correctness["rel_fro_err"] == 0.3
    # All passing: no map kept at all.
    data = {"status": "ok", "checks": [_compared(True, 1e-6, 0.0), _compared(True, 2e-6, 0.0)],
            "timing": {"median_s": 1e-3, "ci_low_s": 1e-3, "ci_high_s": 1e-3}, "samples_s": [1e-3]}
    ok = runner.classify(base, data, ChildOutcome(0, "", False, 0.1, "", ""), 10.0, None,
                         BuildResult("v", "h", True, "g++"), 0)
    assert "tile_map" not in ok.correctness and ok.status == "ok"
