"""The warm runner keeps the isolation of a spawned child: a job that segfaults or hangs takes
only its own forked child down, is classified like a spawned child, and the next job on the
same zygote runs clean; a dead zygote is started again."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from pathlib import Path

import pytest
from python_kernel import python_variant

from workers.core.records import BuildResult, Job, Variant
from workers.isolation.sandbox import run_child
from workers.job import runner
from workers.job.zygote import Zygote

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def zygote():
    z = Zygote(runner.child_env())
    yield z
    z.close()


def _python_variant(tmp: Path, body: str) -> tuple[Variant, dict]:
    return python_variant(tmp, body, timeout_s=5.0)


GOOD = "def gemm(a, b, c):\n    c.copy_(a @ b.T)\n"
SEGV = "import ctypes\ndef gemm(a, b, c):\n    ctypes.string_at(0)\n"
HANG = "def gemm(a, b, c):\n    while True:\n        pass\n"


def _run(v: Variant, files: dict, launcher, timeout_s: float = 120):
    """One job; the timeout is generous (a loaded 2-core machine takes seconds to start a
    process) except for the job that is meant to hang."""
    job = Job(v.name, v.op, v.shapes[0], "fp32", "cpu")
    build = BuildResult(v.name, "h", True, "python")
    return runner.execute_job(job, v, build, files, {"timing": {"budget_s": 0.05}, "timeout_s": timeout_s}, launcher)


def test_crash_and_hang_kill_only_their_child_and_the_next_job_is_clean(zygote, tmp_path):
    for name in "gsh":
        (tmp_path / name).mkdir()
    good, segv, hang = (_python_variant(tmp_path / n, body) for n, body in zip("gsh", (GOOD, SEGV, HANG)))
    first = _run(*good, zygote.run)
    assert first.status == "ok", first.diagnostic
    pid = zygote.proc.pid
    crashed = _run(*segv, zygote.run)
    assert crashed.status == "crashed" and "SIGSEGV" in crashed.diagnostic
    hung = _run(*hang, zygote.run, timeout_s=3)
    assert hung.status == "timeout" and "3 s timeout" in hung.diagnostic
    after = _run(*good, zygote.run)
    assert after.status == "ok" and zygote.proc.pid == pid and zygote.started == 1  # the same warm runner
    # same classification as a spawned child's
    spawned = _run(*segv, runner.spawn)
    assert spawned.status == crashed.status and "SIGSEGV" in spawned.diagnostic


def test_a_dead_zygote_is_started_again(zygote, tmp_path):
    (tmp_path / "g").mkdir()
    good = _python_variant(tmp_path / "g", GOOD)
    assert _run(*good, zygote.run).status == "ok"
    before = zygote.started
    os.kill(zygote.proc.pid, signal.SIGKILL)
    zygote.proc.wait()
    assert _run(*good, zygote.run).status == "ok"
    assert zygote.started == before + 1


def test_spawned_and_forked_children_write_the_same_outcome_fields(zygote, tmp_path):
    outcomes, seen = [], []
    for name, launcher in (("forked", zygote.run), ("spawned", runner.spawn)):
        folder = tmp_path / name
        folder.mkdir()
        outcomes.append(launcher(["--env", "env.json"], 120, folder))
        seen.append(json.loads((folder / "env.json").read_text()))
    forked, spawned = (dataclasses.replace(o, seconds=0.0, waited_s=0.0) for o in outcomes)
    assert forked == spawned  # every field but the times: exit status, signal, tails, left behind
    assert forked.returncode == 0 and not forked.timed_out and forked.left_behind == 0
    assert seen[0]["visible"] == seen[1]["visible"] and seen[0]["pid"] != seen[1]["pid"]
    a = run_child(["python3", "-c", "import sys; sys.stderr.write('x'); sys.exit(3)"], 60, tmp_path)
    assert a.returncode == 3 and a.stderr_tail == "x" and not a.timed_out


def test_two_replies_that_arrive_together_are_both_read(tmp_path):
    """A fast job's two replies (its pid, then its outcome) can reach the pipe before the slot
    reads the first: both must be read from what arrived, not the second waited for."""
    import subprocess
    import sys
    import time

    zygote = Zygote(dict(os.environ))
    script = ("import sys, time; sys.stdout.write('{\"ready\": 1}\\n{\"pid\": 5}\\n{\"returncode\": 0}\\n'); "
              "sys.stdout.flush(); time.sleep(60)")
    zygote.proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                                   text=True, bufsize=1)
    try:
        time.sleep(1.0)  # all three lines are in the pipe before the first read
        # The old reader took all three into readline's buffer, then waited on the empty pipe
        # for the second: ZygoteDied("no answer in 30 s").
        assert [zygote._read(30.0) for _ in range(3)] == [{"ready": 1}, {"pid": 5}, {"returncode": 0}]
    finally:
        zygote.proc.kill()
        zygote.proc.wait()
