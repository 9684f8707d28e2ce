"""A variant's shapes share one process (`workers.job.batch`), and a job that goes wrong there costs
the others nothing: the jobs after it run again in processes of their own, each job keeps its
own timeout and status. (CPU jobs of a one-file Python variant here; the same path runs GPU
jobs, measured on the device: docs/benchmarks.md.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from workers.core import status
from workers.core.records import BuildResult, Job, Shape, Variant
from workers.job import runner
from workers.job.batch import execute_batch
from workers.job.zygote import Zygote
from workers.toolkit.bundle import pack

SMALL, LARGE = Shape({"M": 32, "N": 32, "K": 32}), Shape({"M": 64, "N": 64, "K": 64})

# Each call appends its process id, then does what `{bad}` says at the shape of M == {at}.
BODY = """
import ctypes, os, time
def gemm(a, b, c):
    with open({pids!r}, "a") as f:
        f.write(f"{{a.shape[0]}} {{os.getpid()}}\\n")
    c.copy_(a @ b.T)
    if a.shape[0] == {at}:
        {bad}
"""
BAD = {"none": "pass", "wrong": "c[0, 0] += 1.0", "segfault": "ctypes.string_at(0)",
       "hang": "time.sleep(3600)"}


def _variant(tmp: Path, bad: str, at: int = 0, timeout_s: float = 120.0) -> tuple[Variant, dict, Path]:
    pids = tmp / "pids.txt"
    (tmp / "k.py").write_text(BODY.format(pids=str(pids), at=at, bad=BAD[bad]))
    binding = Variant.from_dict({"name": "x", "op": "gemm", "backend": "python", "folder": "k", "sources": [],
                                 "dtypes": [], "shapes": [], "binding": {"kind": "python", "entry": "k.py:gemm"}})
    v = Variant(name="k", op="gemm", backend="python", folder="k", sources=("k.py",), dtypes=("fp32",),
                shapes=(LARGE, SMALL), devices=("cpu",), timeout_s=timeout_s, binding=binding.binding)
    return v, pack(tmp), pids


def _run(v: Variant, files: dict, launcher=runner.spawn) -> list:
    jobs = [Job(v.name, v.op, shape, "fp32", "cpu") for shape in v.shapes]
    return execute_batch(jobs, v, BuildResult(v.name, "h", True, "python"), files,
                         {"timing": {"budget_s": 0.05}, "threads": 1}, launcher)


def _processes(pids: Path) -> dict[int, set[int]]:
    """{M of the call: the processes that made such calls}."""
    seen: dict[int, set[int]] = {}
    for line in pids.read_text().split("\n"):
        if line:
            m, pid = map(int, line.split())
            seen.setdefault(m, set()).add(pid)
    return seen


@pytest.fixture(scope="module")
def zygote():
    z = Zygote(runner.child_env())
    yield z
    z.close()


@pytest.mark.parametrize("warm", [True, False], ids=["warm runner", "spawned"])
def test_a_variants_shapes_run_in_one_process_each_with_its_own_result(tmp_path, zygote, warm):
    v, files, pids = _variant(tmp_path, "none")
    results = _run(v, files, zygote.run if warm else runner.spawn)
    assert [(r.shape, r.status) for r in results] == [(LARGE.key, "ok"), (SMALL.key, "ok")]
    seen = _processes(pids)
    assert seen[64] == seen[32] and len(seen[64]) == 1
    assert all(r.median_s and r.samples_s for r in results)
    # The process's own costs are charged once, to its first job.
    assert "start_s" in results[0].phases and "start_s" not in results[1].phases
    assert results[0].phases["ended_at"] <= results[1].phases["began_at"]


def test_a_wrong_result_ends_the_process_and_the_next_shape_runs_in_a_fresh_one(tmp_path, zygote):
    v, files, pids = _variant(tmp_path, "wrong", at=64)
    large, small = _run(v, files, zygote.run)
    assert large.status == status.INCORRECT and "tile (0, 0)" in large.diagnostic
    assert small.status == status.OK, small.diagnostic
    seen = _processes(pids)
    assert not seen[64] & seen[32]  # the small shape never ran in the process that went wrong


def test_a_crash_in_the_second_shape_keeps_the_first_result(tmp_path, zygote):
    v, files, pids = _variant(tmp_path, "segfault", at=32)
    large, small = _run(v, files, zygote.run)
    assert large.status == status.OK and large.median_s
    assert small.status == status.CRASHED and "SIGSEGV" in small.diagnostic


def test_a_crash_in_the_first_shape_costs_the_second_nothing(tmp_path, zygote):
    v, files, pids = _variant(tmp_path, "segfault", at=64)
    large, small = _run(v, files, zygote.run)
    assert large.status == status.CRASHED and "SIGSEGV" in large.diagnostic
    assert small.status == status.OK, small.diagnostic


def test_each_job_keeps_its_own_timeout_in_a_shared_process(tmp_path, zygote):
    v, files, _ = _variant(tmp_path, "hang", at=64, timeout_s=3.0)
    t0 = time.monotonic()
    large, small = _run(v, files, zygote.run)
    took = time.monotonic() - t0
    assert large.status == status.TIMEOUT and "3 s timeout" in large.diagnostic
    assert small.status == status.OK, small.diagnostic
    # Stopped at its own 3 s by the child's watchdog, not at the process's backstop (2 × 3 s + 60 s).
    assert took < 40.0


def test_one_job_alone_takes_the_single_job_path(tmp_path):
    v, files, pids = _variant(tmp_path, "none")
    (result,) = execute_batch([Job(v.name, v.op, SMALL, "fp32", "cpu")], v, BuildResult(v.name, "h", True, "python"),
                              files, {"timing": {"budget_s": 0.05}, "threads": 1})
    assert result.status == status.OK and "start_s" in result.phases


@pytest.mark.slow
def test_a_whole_run_with_shapes_batched_keeps_every_status(tmp_path, monkeypatch):
    """Through Ray and a slot, as a GPU slot batches (here the CPU's, asked for): the broken
    variants keep their statuses at every shape, the good ones are timed."""
    from suite_repo import make_suite_repo

    from pipeline.fleet import cluster
    from pipeline.run.progress import Progress
    from pipeline.run.runflow import BATCH_ENV, RunOptions, Session, run_commit
    from pipeline.store import Store

    monkeypatch.setenv(BATCH_ENV, "all")
    repo = make_suite_repo(tmp_path / "repo", broken=("segfaults", "hangs", "wrong_tile"), good=("cpp_blocked",))
    session = Session(Store(tmp_path / "work" / "results.db"), tmp_path / "work", cluster.connect(None),
                      Progress(enabled=False))
    try:
        outcome = run_commit(session, repo, "HEAD", RunOptions())
        dispatched = [tag[0] for _, tag in session.slots.dispatched]
    finally:
        session.shutdown()
    by: dict[str, list] = {}
    for r in outcome.results:
        by.setdefault(r.variant, []).append(r)
    assert {len(rows) for rows in by.values()} == {2}  # both shapes of every variant
    assert {r.status for r in by["segfaults"]} == {"crashed"}
    assert {r.status for r in by["hangs"]} == {"timeout"} and all("5 s timeout" in r.diagnostic for r in by["hangs"])
    assert {r.status for r in by["wrong_tile"]} == {"incorrect"}
    assert {r.status for r in by["cpp_blocked"] + by["torch_ref"]} == {"ok"}
    # The failing check's tile map is kept (the report's heat map shows the wrong tile); a
    # passing result keeps its errors and no map.
    for r in by["wrong_tile"]:
        tiles = r.correctness["tile_map"]
        assert max(v for row in tiles for v in row) == tiles[1][0] > 0  # tile (1, 0) is the wrong one
    for r in by["cpp_blocked"] + by["torch_ref"]:
        assert "tile_map" not in r.correctness and r.correctness["rel_fro_err"] < 1e-3, r.correctness
    assert dispatched.count("batch") == 5  # one call per variant: its two shapes together


def test_which_kinds_batch_their_shapes():
    from pipeline.run.runflow import BATCH_ENV, RunOptions, batch_kinds

    assert batch_kinds({}, RunOptions()) == {"cuda", "rocm"}
    assert batch_kinds({BATCH_ENV: "all"}, RunOptions()) == {"cuda", "rocm", "cpu"}
    assert batch_kinds({BATCH_ENV: "0"}, RunOptions()) == set()
    assert batch_kinds({}, RunOptions(profile=True)) == set()  # the profiler replays each job on its own
