"""A slot's runner starts the next job once the running one says its timing loop is over
(`workers.job.handoff`), and not before: the two then overlap, each still its own process with its
own timeout, scope and leftovers. On this machine the jobs are CPU ones whose kernel says it
itself (a GPU job's child says so after its loop, `workers.job.child.run`); the GPU path is
measured on the device (docs/benchmarks.md)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from hostile.processes import survivors
from python_kernel import python_variant

from workers.core.records import BuildResult, Job
from workers.job import handoff, runner, spare
from workers.job.zygote import Zygote

MARK = "FLOPWATCH_HANDOFF_TEST"

# The first call records when it ran, may say its timing is over, may then leave a daemon (a
# double fork into a session of its own, re-parented out of the job's process group) once the
# next job has started, and keeps the job alive for a while: the tail the next job overlaps.
BODY = """
import os, time
from workers.job import handoff
open({marks!r} + "/{name}.loaded", "w").close()  # its process runs
_first = [True]
def gemm(a, b, c):
    c.copy_(a @ b.T)
    if not _first[0]:
        return
    _first[0] = False
    open({marks!r} + "/{name}.first", "w").write(repr(time.time()))
    if {release}:
        handoff.timing_done()
    if {daemon}:
        time.sleep(1.0)  # the next job has started meanwhile
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv("/bin/sleep", ["sleep", "600"])
            os._exit(0)
        os.wait()
    time.sleep({sleep_s})
"""


def _variant(tmp: Path, name: str, marks: Path, release: bool, sleep_s: float = 0.0, daemon: bool = False):
    folder = tmp / name
    folder.mkdir()
    return python_variant(folder, BODY.format(marks=str(marks), name=name, release=release, sleep_s=sleep_s,
                                              daemon=daemon), timeout_s=120)


def _job(v, files, launcher, timeout_s: float, out: dict, key: str) -> None:
    job = Job(v.name, v.op, v.shapes[0], "fp32", "cpu")
    build = BuildResult(v.name, "h", True, "python")
    out[key] = runner.execute_job(job, v, build, files, {"timing": {"budget_s": 0.05}, "timeout_s": timeout_s},
                                  launcher)
    out[key + "_returned"] = time.time()


def _two_at_once(zygote: Zygote, loaded: Path, first, second, second_timeout_s: float = 120.0) -> dict:
    """`first` sent, then `second` once the first one's process runs (its kernel module wrote
    `loaded`), from two threads (as a GPU slot's actor does)."""
    out: dict = {}
    zygote.ensure_started()
    a = threading.Thread(target=_job, args=(*first, zygote.run, 120.0, out, "a"))
    a.start()
    deadline = time.monotonic() + 120
    while not loaded.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    b = threading.Thread(target=_job, args=(*second, zygote.run, second_timeout_s, out, "b"))
    b.start()
    a.join(180)
    b.join(180)
    return out


@pytest.fixture
def zygote():
    token = uuid.uuid4().hex
    z = Zygote({**runner.child_env(), MARK: token})
    z.mark = token
    yield z
    z.close()


def _first_call(marks: Path, name: str) -> float:
    return float((marks / f"{name}.first").read_text())


def test_the_next_job_starts_when_the_running_one_has_timed_and_each_keeps_its_own_leftovers(zygote, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    first = _variant(tmp_path, "a", marks, release=True, sleep_s=3.0, daemon=True)
    second = _variant(tmp_path, "b", marks, release=False, sleep_s=2.0)  # alive when a's daemon appears; ends first
    out = _two_at_once(zygote, marks / "a.loaded", first, second)
    a, b = out["a"], out["b"]
    assert a.status == "ok" and b.status == "ok", (a.diagnostic, b.diagnostic)
    # b began while a was still in its tail (its 3 s after saying it had timed)...
    assert _first_call(marks, "a") < _first_call(marks, "b") < out["a_returned"] - 1.0
    # ...and each job's leftovers are its own: a's daemon, started while b ran and orphaned
    # before b ended, is counted and killed with a, not with b.
    assert a.diagnostic == "left processes behind (1 killed)"
    assert b.diagnostic == ""
    assert [pid for pid, _ in survivors(MARK, zygote.mark)] == [zygote.proc.pid]  # the runner alone


def test_a_job_that_never_says_it_has_timed_keeps_the_next_one_waiting_until_it_ends(zygote, tmp_path):
    """A CPU job (or one whose check failed) never says so: one job at a time, as before."""
    marks = tmp_path / "marks"
    marks.mkdir()
    first = _variant(tmp_path, "a", marks, release=False, sleep_s=2.0)
    second = _variant(tmp_path, "b", marks, release=False)
    out = _two_at_once(zygote, marks / "a.loaded", first, second, second_timeout_s=1.5)
    assert out["a"].status == "ok" and out["b"].status == "ok", (out["a"].diagnostic, out["b"].diagnostic)
    # The second's first call came after the first had ended, and its 1.5 s timeout counted from
    # its own start, not from when it was sent (it waited longer than that behind the first).
    assert _first_call(marks, "b") > _first_call(marks, "a") + 2.0
    assert not out["b"].diagnostic
    # The wait is its own phase: neither the job's device time nor the slot's start-up.
    assert out["b"].phases["handoff_wait_s"] > 1.0 and out["b"].phases["start_s"] < 1.0
    assert "handoff_wait_s" not in out["a"].phases


def test_a_crash_in_the_tail_of_the_first_costs_the_second_nothing(zygote, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    folder = tmp_path / "crash"
    folder.mkdir()
    crash = python_variant(folder, BODY.format(marks=str(marks), name="crash", release=True, sleep_s=0.5, daemon=False)
                           + "\n_real = gemm\ndef gemm(a, b, c):\n    _real(a, b, c)\n"
                           "    import ctypes; ctypes.string_at(0)\n", timeout_s=120)
    second = _variant(tmp_path, "b", marks, release=False)
    out = _two_at_once(zygote, marks / "crash.loaded", crash, second)
    assert out["a"].status == "crashed" and "SIGSEGV" in out["a"].diagnostic
    assert out["b"].status == "ok", out["b"].diagnostic


def test_the_message_is_one_byte_on_the_named_pipe_and_said_once(monkeypatch):
    import os

    r, w = os.pipe()
    monkeypatch.setenv(handoff.ENV_FD, str(w))
    handoff.timing_done()
    handoff.timing_done()  # the second finds nothing to say it on
    assert os.read(r, 16) == handoff.TIMING_DONE
    assert os.read(r, 16) == b""  # the write end is closed: the runner sees end of file next
    os.close(r)


def test_a_spares_job_says_it_on_the_pipe_it_said_ready_on(tmp_path):
    """With spares (CPU ones here), the job handed to a spare overlaps the next one the same way."""
    marks = tmp_path / "marks"
    marks.mkdir()
    z = Zygote({**runner.child_env(), spare.ENV_KIND: "cpu", spare.ENV_OFF: "1"})
    try:
        warm = _variant(tmp_path, "w", marks, release=False)
        out: dict = {}
        _job(*warm, z.run, 120.0, out, "w")  # leaves spares prepared for the next two
        assert out["w"].status == "ok"
        out = _two_at_once(z, marks / "a.loaded", _variant(tmp_path, "a", marks, release=True, sleep_s=3.0),
                           _variant(tmp_path, "b", marks, release=False))
        assert out["a"].status == "ok" and out["b"].status == "ok", (out["a"].diagnostic, out["b"].diagnostic)
        assert _first_call(marks, "b") < out["a_returned"] - 1.0
    finally:
        z.close()


def test_a_runner_that_dies_with_two_jobs_in_flight_fails_the_running_one_and_restarts_for_the_queued_one(
        zygote, tmp_path):
    """Neither waits out its timeout: the running job's call fails at once, the queued one runs
    on a fresh runner."""
    import os
    import signal

    from workers.job.zygote import ZygoteDied

    marks = tmp_path / "marks"
    marks.mkdir()
    first = _variant(tmp_path, "a", marks, release=False, sleep_s=60.0)
    second = _variant(tmp_path, "b", marks, release=False)
    out: dict = {}

    def call(key, v, files):
        job = Job(v.name, v.op, v.shapes[0], "fp32", "cpu")
        try:
            out[key] = zygote.run(["--env", "env.json"], 120.0, _folder(tmp_path, key)) if key == "b" else \
                runner.execute_job(job, v, BuildResult(v.name, "h", True, "python"), files,
                                   {"timing": {"budget_s": 0.05}, "timeout_s": 120.0}, zygote.run)
        except ZygoteDied as exc:
            out[key] = exc
        out[key + "_returned"] = time.monotonic()

    zygote.ensure_started()
    a = threading.Thread(target=call, args=("a", *first))
    a.start()
    deadline = time.monotonic() + 60
    while not (marks / "a.first").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    b = threading.Thread(target=call, args=("b", *second))
    b.start()
    time.sleep(0.5)  # b is queued behind a, which never says it has timed
    old = zygote.proc.pid
    killed_at = time.monotonic()
    os.killpg(old, signal.SIGKILL)
    a.join(100)
    b.join(100)
    assert isinstance(out["a"], ZygoteDied)
    assert out["b"].returncode == 0 and zygote.proc.pid != old
    assert out["a_returned"] - killed_at < 30 and out["b_returned"] - killed_at < 30


def _folder(tmp: Path, name: str) -> Path:
    folder = tmp / f"job-{name}"
    folder.mkdir()
    return folder
