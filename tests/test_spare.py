"""A warm runner's spare: the next job's process, prepared while a job runs. It must be handed
the next job (and be that job's process, with its scope, limits and classification), never be
counted or killed as something a job left behind, be dropped when the runner goes, and a spare
that cannot prepare must cost nothing but itself. The device lock keeps a preparation out of a
timing loop. (On this machine the spares are CPU ones, asked for with FLOPWATCH_SPARE=1: the
same process machinery; a GPU's are verified on the device, docs/benchmarks.md.)"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from workers.isolation import device_lock
from workers.job import runner, spare
from workers.job.zygote import Zygote


def _zygote(kind: str) -> Zygote:
    return Zygote({**runner.child_env(), spare.ENV_KIND: kind, spare.ENV_OFF: "1"})


def _env_job(z: Zygote, folder: Path, args: list[str] | None = None):
    folder.mkdir()
    outcome = z.run(args or ["--env", "env.json"], 120, folder)
    data = json.loads((folder / "env.json").read_text()) if (folder / "env.json").exists() else None
    return outcome, data


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        found |= {int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()}
    return found


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def _own_session(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while os.getsid(pid) != pid:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_each_next_job_runs_in_the_spare_prepared_meanwhile_and_nothing_counts_it_as_left_behind(tmp_path):
    z = _zygote("cpu")
    try:
        first, a = _env_job(z, tmp_path / "a")
        second, b = _env_job(z, tmp_path / "b")
        third, c = _env_job(z, tmp_path / "c")
        assert a["prepared"] is False  # no spare before the first request
        assert b["prepared"] is True and c["prepared"] is True
        assert len({a["pid"], b["pid"], c["pid"]}) == 3  # a process per job, as before
        for o in (first, second, third):
            assert o.returncode == 0 and not o.timed_out and o.left_behind == 0
        # The spares of the next jobs wait beside the runner, each in a session of its own. A
        # spare forked as the last job ended may not have reached its setsid yet: give it time.
        waiting = _children(z.proc.pid)
        assert len(waiting) == spare.IN_FLIGHT
        assert all(_own_session(pid) for pid in waiting)
    finally:
        z.close()
    assert all(_gone(pid) for pid in waiting), "a spare outlived its runner"


def test_a_failing_job_in_a_spare_is_classified_and_the_next_spare_serves_the_next_job(tmp_path):
    z = _zygote("cpu")
    try:
        _env_job(z, tmp_path / "a")
        # A job that raises (its output folder does not exist): its own failed outcome.
        failed, _ = _env_job(z, tmp_path / "b", ["--env", "missing/env.json"])
        assert failed.returncode not in (0, None) and "FileNotFoundError" in failed.stderr_tail
        after, data = _env_job(z, tmp_path / "c")
        assert after.returncode == 0 and data["prepared"] is True
    finally:
        z.close()


def test_a_spare_that_cannot_prepare_costs_only_itself_and_no_more_are_made(tmp_path):
    """A GPU that refuses a second context (or, here, a machine without one): the spare says
    so, the job gets a freshly forked child, and the runner keeps no spares after that."""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine can prepare a CUDA spare")
    z = _zygote("cuda")
    try:
        outcomes = [_env_job(z, tmp_path / name) for name in "abc"]
        assert all(o.returncode == 0 and o.left_behind == 0 for o, _ in outcomes)
        assert [d["prepared"] for _, d in outcomes] == [False, False, False]
        assert _children(z.proc.pid) == set()  # no spare waiting after the failed one
    finally:
        z.close()


def test_spares_are_for_gpu_slots_unless_asked_for_or_turned_off():
    assert spare.wanted({spare.ENV_KIND: "cuda"}) == "cuda"
    assert spare.wanted({spare.ENV_KIND: "rocm"}) == "rocm"
    assert spare.wanted({spare.ENV_KIND: "cuda", spare.ENV_OFF: "0"}) is None
    assert spare.wanted({spare.ENV_KIND: "cpu"}) is None
    assert spare.wanted({spare.ENV_KIND: "cpu", spare.ENV_OFF: "1"}) == "cpu"
    assert spare.wanted({}) is None


def test_a_timing_loop_waits_for_a_preparation_and_a_preparation_waits_for_a_timing_loop(tmp_path, monkeypatch):
    monkeypatch.setenv(device_lock.ENV, str(tmp_path / "lock"))
    prepared = threading.Event()

    def preparation(hold_s: float) -> None:
        with device_lock.preparing():
            prepared.set()
            time.sleep(hold_s)

    t = threading.Thread(target=preparation, args=(0.4,))
    t.start()
    prepared.wait(5)
    with device_lock.timing() as waited:
        assert waited is not None and waited >= 0.3
    t.join()

    # While a timing loop holds it, a preparation does not start.
    order: list[str] = []

    def late_preparation() -> None:
        with device_lock.preparing():
            order.append("prepared")

    with device_lock.timing():
        t = threading.Thread(target=late_preparation)
        t.start()
        time.sleep(0.3)
        order.append("timed")
    t.join(5)
    assert order == ["timed", "prepared"]


def test_a_preparation_that_never_ends_costs_a_timing_loop_only_its_longest_wait(tmp_path, monkeypatch):
    monkeypatch.setenv(device_lock.ENV, str(tmp_path / "lock"))
    fd = os.open(tmp_path / "lock", os.O_RDWR | os.O_CREAT)
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        t0 = time.perf_counter()
        with device_lock.timing(max_wait_s=0.2) as waited:
            assert waited is None  # goes on without the lock
        assert time.perf_counter() - t0 < 2.0
    finally:
        os.close(fd)


def test_without_a_lock_file_named_both_holds_are_free(monkeypatch):
    monkeypatch.delenv(device_lock.ENV, raising=False)
    with device_lock.timing() as waited, device_lock.preparing() as also:
        assert waited is None and also is None


def test_a_waiting_timing_loop_goes_before_any_later_preparation_step(tmp_path, monkeypatch):
    """The gate: once a loop waits for the step in progress, no new step starts before it."""
    monkeypatch.setenv(device_lock.ENV, str(tmp_path / "lock"))
    order: list[str] = []
    first_step = threading.Event()

    def step(name: str, hold_s: float) -> None:
        with device_lock.preparing():
            first_step.set()
            time.sleep(hold_s)
            order.append(name)

    def loop() -> None:
        with device_lock.timing() as waited:
            assert waited is not None
            time.sleep(0.2)
            order.append("timed")

    a = threading.Thread(target=step, args=("step in progress", 0.4))
    a.start()
    first_step.wait(5)
    t = threading.Thread(target=loop)
    t.start()
    time.sleep(0.1)  # the loop now waits for the step in progress
    b = threading.Thread(target=step, args=("later step", 0.0))
    b.start()
    for th in (a, t, b):
        th.join(10)
    assert order == ["step in progress", "timed", "later step"]


def test_the_runner_uses_its_slots_device_lock_and_removes_only_one_of_its_own(tmp_path):
    """The slot names the lock (it holds it while a profiler runs on the device); a runner
    started without one makes its own and removes it when it ends."""
    given = str(tmp_path / "slot.lock")
    Path(given).touch()
    z = Zygote({**runner.child_env(), spare.ENV_KIND: "cpu", spare.ENV_OFF: "1", device_lock.ENV: given})
    try:
        _, seen = _env_job(z, tmp_path / "a")
        _, seen_by_spare = _env_job(z, tmp_path / "b")
    finally:
        z.close()
    assert seen["device_lock"] == given and seen_by_spare["device_lock"] == given
    assert Path(given).exists()

    env = {k: v for k, v in runner.child_env().items() if k != device_lock.ENV}
    z = Zygote({**env, spare.ENV_KIND: "cpu", spare.ENV_OFF: "1"})
    try:
        _, seen = _env_job(z, tmp_path / "c")
    finally:
        z.close()
    own = seen["device_lock"]
    assert own and own != given and not Path(own).exists()


def test_a_claim_takes_the_device_only_once_the_step_in_progress_has_ended(tmp_path, monkeypatch):
    """`device_lock.claim`: the gate at once (no new step starts), the device when it is free;
    `ready()` never blocks, and a later step waits for the claim to end."""
    monkeypatch.setenv(device_lock.ENV, str(tmp_path / "lock"))
    in_step, end_step = threading.Event(), threading.Event()
    order: list[str] = []

    def step(name: str, block: bool) -> None:
        with device_lock.preparing():
            in_step.set()
            if block:
                end_step.wait(5)
            order.append(name)

    a = threading.Thread(target=step, args=("step in progress", True))
    a.start()
    in_step.wait(5)
    with device_lock.claim() as claim:
        b = threading.Thread(target=step, args=("later step", False))
        b.start()
        t0 = time.perf_counter()
        assert claim.ready() is False and time.perf_counter() - t0 < 0.05  # does not block
        end_step.set()
        a.join(5)
        assert claim.ready() is True and claim.waited_s() is not None
        assert claim.blocked_s < 0.05  # it asked, it never sat blocked
        time.sleep(0.2)
        order.append("timed")
    b.join(5)
    assert order == ["step in progress", "timed", "later step"]


def test_a_claim_without_a_lock_file_is_ready_at_once(monkeypatch):
    monkeypatch.delenv(device_lock.ENV, raising=False)
    with device_lock.claim() as claim:
        assert claim.ready() and claim.waited_s() is None and claim.blocked_s == 0.0
