"""Runner seeds (`workers.job.seed`): a seed the local Ray head started before Ray becomes a slot's
runner with the slot's environment and runs its jobs; a seed of other code, or none, leaves the
slot to spawn at once; a seed nobody adopts ends by itself; the head starts seeds before
`ray.init`, unless told not to."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from python_kernel import python_variant

from workers.core.records import BuildResult, Job
from workers.job import runner, runner_process, seed
from workers.job.runner_process import Adopted, NoSeed, Spawned
from workers.job.zygote import Zygote

GOOD = "def gemm(a, b, c):\n    c.copy_(a @ b.T)\n"


@pytest.fixture
def folder():
    """A short private folder for the socket (a Unix socket's path has at most 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="fws-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake_spawn(monkeypatch):
    """A spawned "runner" that says ready at once and waits for its stdin's end: what the slot
    does when it does not adopt, without the real runner's imports."""
    script = "import sys; print('{\"ready\": 1}', flush=True); sys.stdin.read()"

    def start(argv, env):
        return Spawned(subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env=env, start_new_session=True, text=True, bufsize=1))

    monkeypatch.setattr(Spawned, "start", staticmethod(start))


def _threads_cpus(pid: int) -> set[str]:
    return {(Path(f"/proc/{pid}/task/{t}/status").read_text().split("Cpus_allowed_list:")[1].split()[0])
            for t in os.listdir(f"/proc/{pid}/task")}


def test_an_adopted_seed_runs_the_slots_jobs_with_the_slots_environment(folder, tmp_path):
    (planted,) = seed.plant(folder / seed.SOCKET, 1, "code-a", runner.child_env(), triton=False)
    one = str(max(os.sched_getaffinity(0)))
    # Set only in the slot's environment, not in the seed's: the visible GPU and the CPU set.
    env = {**runner.child_env(), "CUDA_VISIBLE_DEVICES": "3", "FLOPWATCH_JOB_CPUS": one}
    z = Zygote(env, seeds=str(folder / seed.SOCKET), code_key="code-a")
    try:
        z.ensure_started()
        assert isinstance(z.proc, Adopted) and z.proc.pid == planted.pid and z.started == 1
        assert "adopted" in z.marks and "spawned" not in z.marks, z.marks
        assert z.marks["seeded"] <= z.marks["torch"] <= z.marks["ready"] and z.marks["adopted"] <= z.marks["ready"]
        assert _threads_cpus(planted.pid) == {one}  # every thread of the runner, torch's included
        (tmp_path / "env").mkdir()
        probe = z.run(["--env", "env.json"], 120, tmp_path / "env")
        seen = json.loads((tmp_path / "env" / "env.json").read_text())
        assert probe.returncode == 0 and seen["visible"]["CUDA_VISIBLE_DEVICES"] == "3" and seen["cpus"] == one
        (tmp_path / "k").mkdir()
        v, files = python_variant(tmp_path / "k", GOOD, timeout_s=5.0)
        result = runner.execute_job(Job(v.name, v.op, v.shapes[0], "fp32", "cpu"), v,
                                    BuildResult(v.name, "h", True, "python"), files,
                                    {"timing": {"budget_s": 0.05}, "timeout_s": 120}, z.run)
        assert result.status == "ok", result.diagnostic
        # Adopted once: the socket has no seed left, and says so at once.
        began = time.monotonic()
        with pytest.raises(NoSeed) as no_seed:
            runner_process.adopt(str(folder / seed.SOCKET), env, "code-a")
        assert no_seed.value.why == "absent" and time.monotonic() - began < 0.5
    finally:
        z.close()
    assert not z.alive() and planted.wait(timeout=30) is not None  # the slot gone: the runner ended


def test_a_seed_of_other_code_is_refused_and_the_slot_spawns(folder, fake_spawn):
    (planted,) = seed.plant(folder / seed.SOCKET, 1, "code-a", runner.child_env(), triton=False)
    try:
        z = Zygote(runner.child_env(), seeds=str(folder / seed.SOCKET), code_key="code-b")
        z.ensure_started()
        assert isinstance(z.proc, Spawned) and "seed_refused" in z.marks and "spawned" in z.marks, z.marks
        z.close()
        # Another interpreter's slot, or another module path, is refused too; the seed waits on.
        env = {**runner.child_env(), "PYTHONPATH": "/elsewhere"}
        with pytest.raises(NoSeed) as refused:
            runner_process.adopt(str(folder / seed.SOCKET), env, "code-a")
        assert refused.value.why == "refused" and "PYTHONPATH" in str(refused.value)
        assert planted.poll() is None
    finally:
        planted.kill()
        planted.wait()


def test_without_a_seed_the_slot_spawns_at_once(folder, fake_spawn):
    began = time.time()
    z = Zygote(runner.child_env(), seeds=str(folder / "none"), code_key="code-a")
    z.ensure_started()
    z.close()
    assert "seed_absent" in z.marks and z.marks["spawned"] - began < 0.5, z.marks
    # No seeds named (a cluster that is not flopwatch's local Ray): spawned, nothing tried.
    z = Zygote(runner.child_env())
    z.ensure_started()
    z.close()
    assert set(z.marks) == {"ready", "spawned"}


def test_a_seed_nobody_adopts_ends_by_itself(folder):
    (planted,) = seed.plant(folder / seed.SOCKET, 1, "code-a", runner.child_env(), triton=False, idle_s=0.1)
    assert planted.wait(timeout=60) == 0
    with pytest.raises(NoSeed) as no_seed:
        runner_process.adopt(str(folder / seed.SOCKET), runner.child_env(), "code-a")
    assert no_seed.value.why == "absent"


class _RayStarted(Exception):
    pass


@pytest.mark.parametrize("off", [False, True])
def test_the_head_plants_its_slots_seeds_before_it_starts_ray(tmp_path, monkeypatch, off):
    import ray

    from pipeline.fleet import local_ray

    monkeypatch.setenv(runner_process.ENV_SOCKET, "left over")  # put back (removed) after the test
    if off:
        monkeypatch.setenv(seed.ENV_OFF, "0")
    else:
        monkeypatch.delenv(seed.ENV_OFF, raising=False)
    planted: list = []
    monkeypatch.setattr(seed, "plant", lambda path, count, code_key, env, triton: planted.append(
        (path, count, code_key, triton, env.get("OMP_NUM_THREADS"))) or [None] * count)
    monkeypatch.setattr(local_ray, "advertised_resources", lambda num_gpus: ({"flopwatch_cuda": 2}, 2))
    at_init: dict = {}

    def init(**kwargs):
        at_init.update(planted=list(planted), socket=os.environ.get(runner_process.ENV_SOCKET))
        raise _RayStarted

    monkeypatch.setattr(ray, "init", init)
    head = tmp_path / "head"
    with pytest.raises(_RayStarted):
        local_ray.serve(head, "k", None, 60.0)
    if off:
        assert at_init == {"planted": [], "socket": None}
        return
    # One per slot the head will ready (2 GPUs, the CPU slot), Triton too, with Ray's thread count for actors.
    assert at_init["planted"] == [(head / seed.SOCKET, 3, local_ray.own_digest(), True,
                                   os.environ.get("OMP_NUM_THREADS", "1"))]
    assert at_init["socket"] == str(head / seed.SOCKET)  # named to the workers Ray starts
