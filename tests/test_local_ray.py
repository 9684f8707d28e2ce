"""flopwatch's kept local Ray head, its parts one by one: the folder it trusts, the key that
keeps a stale head from being found, its command line and environment, its record, and the
idle rule (real file locks, a counted clock: no sleeping, no wall-clock limits)."""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipeline.fleet import local_ray
from pipeline.fleet.local_ray import HeadRecord, folder_problem
from pipeline.fleet.ray_access import ClusterError

UID = os.getuid()
DIR = stat.S_IFDIR


def test_only_a_private_directory_of_this_user_is_trusted():
    assert folder_problem(DIR | 0o700, UID, UID) is None
    assert folder_problem(DIR | 0o750, UID, UID) == "is open to group or others (mode 750, needs 700)"
    assert folder_problem(DIR | 0o707, UID, UID).startswith("is open to group or others")
    assert folder_problem(DIR | 0o700, UID + 1, UID) == f"belongs to uid {UID + 1}, not to this user ({UID})"
    assert folder_problem(stat.S_IFLNK | 0o777, UID, UID) == "is a symbolic link"
    assert folder_problem(stat.S_IFREG | 0o600, UID, UID) == "is not a directory"


def test_private_folder_creates_700_and_refuses_what_others_could_enter(tmp_path):
    made = local_ray.private_folder(tmp_path / "heads")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    (tmp_path / "open").mkdir(mode=0o755)
    os.chmod(tmp_path / "open", 0o755)
    with pytest.raises(ClusterError, match=r"refusing to use .*open.*mode 755"):
        local_ray.private_folder(tmp_path / "open")
    (tmp_path / "link").symlink_to(made)
    with pytest.raises(ClusterError, match="symbolic link"):
        local_ray.private_folder(tmp_path / "link")


def test_the_key_changes_with_everything_a_head_depends_on():
    base = {"uid": 1000, "python": "/venv/bin/python3", "ray_version": "2.60.0", "code": "c0de"}
    key = local_ray.head_key(None, **base)
    assert key == local_ray.head_key(None, **base) and len(key) == 12
    others = [local_ray.head_key(1, **base),
              local_ray.head_key(None, **{**base, "uid": 1001}),
              local_ray.head_key(None, **{**base, "python": "/other/bin/python3"}),
              local_ray.head_key(None, **{**base, "ray_version": "2.61.0"}),
              local_ray.head_key(None, **{**base, "code": "c0df"})]
    assert key not in others and len(set(others)) == len(others)


def test_the_code_digest_follows_the_source(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    before = local_ray.code_digest((tmp_path / "pkg",))
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert local_ray.code_digest((tmp_path / "pkg",)) != before


def test_serve_command_line():
    argv = local_ray.serve_command(Path("/run/fw/abc"), "abc", 2, 600.0, python="/venv/bin/python3")
    assert " ".join(argv) == ("/venv/bin/python3 -m pipeline.fleet.local_ray serve --folder /run/fw/abc --key abc "
                              "--idle-s 600 --num-gpus 2")
    assert "--num-gpus" not in local_ray.serve_command(Path("/f"), "k", None, 30.0)


def test_the_head_uses_its_own_token_file_and_no_other_cluster():
    env = {"RAY_ADDRESS": "10.0.0.1:6379", "FLOPWATCH_RAY_ADDRESS": "10.0.0.1:6379", "RAY_AUTH_TOKEN": "theirs",
           "RAY_AUTH_MODE": "disabled", "PYTHONPATH": "/elsewhere", "HOME": "/home/u", "GITHUB_TOKEN": "ghs_x"}
    out = local_ray.head_env(env, Path("/run/fw/abc"))
    assert out["RAY_AUTH_MODE"] == "token" and out["RAY_AUTH_TOKEN_PATH"] == "/run/fw/abc/token"
    assert not {"RAY_ADDRESS", "FLOPWATCH_RAY_ADDRESS", "RAY_AUTH_TOKEN", "GITHUB_TOKEN"} & set(out)
    assert out["PYTHONPATH"] == f"{local_ray.PACKAGE_ROOT}{os.pathsep}/elsewhere" and out["HOME"] == "/home/u"
    # No idle worker per core at the head's start; a setting of the user's own is kept.
    assert out["RAY_prestart_worker_first_driver"] == "0"
    assert local_ray.head_env({"RAY_prestart_worker_first_driver": "1"}, Path("/f"))["RAY_prestart_worker_first_driver"] == "1"


def test_record_round_trip_and_garbage():
    record = HeadRecord("abc", 42, "192.0.2.2:41234", 600.0, 1.5e9, {"CPU": 2.0, "flopwatch_cpu": 1.0})
    assert HeadRecord.from_json(record.to_json()) == record
    assert HeadRecord.from_json("{") is None and HeadRecord.from_json('{"key": "abc"}') is None


def test_a_record_is_believed_only_for_a_live_server_of_its_key():
    # A process whose command line looks like a head's server for key "k1" (it only sleeps).
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)",
                             local_ray.MODULE, "serve", "--key", "k1"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "up\n"  # running its own command line now
        assert local_ray.is_serving(HeadRecord("k1", proc.pid, "h:1", 1, 0, {}))
        assert not local_ray.is_serving(HeadRecord("k2", proc.pid, "h:1", 1, 0, {}))
        assert not local_ray.is_serving(HeadRecord("k1", os.getpid(), "h:1", 1, 0, {}))  # pytest is no server
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert not local_ray.is_serving(HeadRecord("k1", proc.pid, "h:1", 1, 0, {}))  # gone


class Ticks:
    """A clock that moves one second per reading and runs `at[t]` when it reaches t."""

    def __init__(self, at=None):
        self.t, self.at = 0.0, at or {}

    def __call__(self) -> float:
        self.t += 1.0
        if self.t in self.at:
            self.at.pop(self.t)()
        return self.t


def _hold(folder: Path):
    handle = open(folder / local_ray.IN_USE, "a")  # noqa: SIM115
    fcntl.flock(handle, fcntl.LOCK_SH)
    return handle


def test_an_attached_command_keeps_the_head_up(tmp_path):
    held, stop, idled = _hold(tmp_path), threading.Event(), []
    clock = Ticks(at={200.0: stop.set})
    why = local_ray.wait_until_idle(tmp_path, 5.0, stop, healthy=lambda: True, on_idle=lambda: idled.append(1),
                                    clock=clock, poll_s=0)
    held.close()
    assert why == "stopped" and idled == []


def test_idle_time_counts_from_the_last_release(tmp_path):
    held, stop, seen = _hold(tmp_path), threading.Event(), []

    def on_idle():
        # Still under the head's exclusive lock: a command cannot attach to a head that stops.
        with open(tmp_path / local_ray.IN_USE, "a") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
        seen.append(clock.t)

    clock = Ticks(at={50.0: held.close, 1000.0: stop.set})
    why = local_ray.wait_until_idle(tmp_path, 20.0, stop, healthy=lambda: True, on_idle=on_idle, clock=clock,
                                    poll_s=0)
    assert why == "idle" and len(seen) == 1
    assert 70.0 <= seen[0] < 100.0  # released at tick 50, then 20 idle seconds


def test_a_head_whose_ray_died_stops(tmp_path):
    stop = threading.Event()
    held = _hold(tmp_path)
    why = local_ray.wait_until_idle(tmp_path, 5.0, stop, healthy=lambda: False, on_idle=lambda: None,
                                    clock=Ticks(at={10_000.0: stop.set}), poll_s=0)
    held.close()
    assert why == "unhealthy"


def test_attached_reports_a_holder(tmp_path):
    (tmp_path / local_ray.IN_USE).touch()
    assert not local_ray.attached(tmp_path)
    held = _hold(tmp_path)
    assert local_ray.attached(tmp_path)
    held.close()
    assert not local_ray.attached(tmp_path)


def test_serving_head_finds_only_a_live_server_of_this_commands_key(tmp_path):
    """What `compare` asks before it decides to put off starting Ray: no folder, a stale
    record, another key's server are all "no head up"; a live server of its key is one."""
    key = local_ray.head_key(None)
    assert local_ray.serving_head(None, base=tmp_path) is None  # nothing there
    (tmp_path / key).mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)",
                             local_ray.MODULE, "serve", "--key", key], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "up\n"
        record = HeadRecord(key, proc.pid, "127.0.0.1:1", 600, 0, {})
        (tmp_path / key / local_ray.RECORD).write_text(record.to_json())
        assert local_ray.serving_head(None, base=tmp_path) == record
        assert local_ray.serving_head(1, base=tmp_path) is None  # --num-gpus 1 is another head
        (tmp_path / key / local_ray.RECORD).write_text(HeadRecord("other", proc.pid, "h:1", 1, 0, {}).to_json())
        assert local_ray.serving_head(None, base=tmp_path) is None
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_planned_resources_count_the_slots_the_local_ray_will_have(monkeypatch):
    """Before a deferred local Ray starts, its slots are counted from what it will advertise;
    a GPU slot needs Ray's own GPU count too, or a GPU machine would plan no GPU work."""
    import torch

    from pipeline.fleet import slots
    from workers.measure import device

    monkeypatch.setattr(local_ray, "gpu_without_torch", lambda: None)  # torch answers
    monkeypatch.setattr(device, "gpu_kind", lambda: "cuda")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    planned = local_ray.planned_resources(None)
    assert slots.slot_count(planned, "cuda") == 2 and slots.slot_count(planned, "cpu") == 1
    assert slots.slot_count(local_ray.planned_resources(1), "cuda") == 1
    monkeypatch.setattr(device, "gpu_kind", lambda: None)
    assert slots.slot_count(local_ray.planned_resources(None), "cuda") == 0


def test_the_kept_local_rays_settings_are_read_once_and_refused_in_one_line():
    assert local_ray.kept_settings({}) == (True, local_ray.DEFAULT_IDLE_S)
    assert local_ray.kept_settings({"FLOPWATCH_RAY_REUSE": "off", "FLOPWATCH_RAY_IDLE_S": "30"}) == (False, 30.0)
    with pytest.raises(ValueError, match=r"^FLOPWATCH_RAY_REUSE='maybe': use 1 or 0$"):
        local_ray.kept_settings({"FLOPWATCH_RAY_REUSE": "maybe"})
    for bad in ("soon", "0", "-5"):
        with pytest.raises(ValueError, match=rf"^FLOPWATCH_RAY_IDLE_S='{bad}': give the idle seconds"):
            local_ray.kept_settings({"FLOPWATCH_RAY_IDLE_S": bad})


class _RayInit(Exception):
    pass


def test_the_head_probes_the_toolchains_ahead_of_ray_init_unless_it_readies_no_slots(tmp_path, monkeypatch):
    """`probe_toolchains_ahead`: the node's toolchains go into their disk cache in a thread the
    head starts before `ray.init`, after its seeds (the slot then reads the cache); none where the head readies
    no slots (FLOPWATCH_HEAD_PREPARE=0)."""
    import ray

    from workers.backends import build

    probed = []
    monkeypatch.setattr(build, "cached_toolchains", lambda: probed.append("probed") or ({}, {}))
    monkeypatch.delenv(local_ray.PREPARE_ENV, raising=False)
    thread = local_ray.probe_toolchains_ahead()
    thread.join(5)
    assert probed == ["probed"]

    order = []
    monkeypatch.setattr(local_ray, "probe_toolchains_ahead", lambda: order.append("toolchains"))
    monkeypatch.setattr(local_ray, "plant_seeds", lambda folder, gpus: order.append("seeds") or 0)
    monkeypatch.setattr(local_ray, "advertised_resources", lambda num_gpus: order.append("resources") or ({}, 0))

    def init(**kwargs):
        order.append("ray.init")
        raise _RayInit

    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(_RayInit):
        local_ray.serve(tmp_path / "head", "k", None, 60.0)
    # The runners first (from a count that needs neither torch nor Ray), the probe after Ray's
    # import (its torch import would share the interpreter lock with Ray's), before ray.init.
    assert order == ["resources", "seeds", "toolchains", "ray.init"]

    monkeypatch.undo()  # the real probe_toolchains_ahead and ray.init again
    monkeypatch.setenv(local_ray.PREPARE_ENV, "0")
    monkeypatch.setattr(build, "cached_toolchains", lambda: probed.append("again") or ({}, {}))
    assert local_ray.probe_toolchains_ahead() is None and probed == ["probed"]
