"""Starting flopwatch's local Ray head before a command's imports (`pipeline.fleet.head_ahead`,
`local_ray.start_ahead`): which command lines start it, and how `acquire` takes over a head
started ahead (a process that stands in for the head's server: no Ray is started here)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.fleet import head_ahead, local_ray
from pipeline.fleet.local_ray import HeadRecord

ON = {"FLOPWATCH_RAY_REUSE": "1"}


@pytest.mark.parametrize("argv, env, expected", [
    (["run"], ON, (True, None, None)),
    (["run", "HEAD", "--num-gpus", "2"], ON, (True, 2, None)),
    (["bisect", "--good", "a", "--bad", "b", "--num-gpus=1"], {**ON, "FLOPWATCH_RAY_IDLE_S": "30"}, (True, 1, 30.0)),
    (["nightly"], {}, (True, None, None)),  # the kept local Ray is the default
    (["nightly"], {"RAY_ADDRESS": "local"}, (True, None, None)),  # "local" is a local Ray, as for ray.init
])
def test_a_command_that_will_start_the_kept_head_starts_it_ahead(argv, env, expected):
    assert head_ahead.wanted(argv, env) == expected


@pytest.mark.parametrize("argv, env", [
    (["compare", "A", "B"], ON),  # starts Ray only for a job it must run
    (["ls"], ON), ([], ON),
    (["run", "--help"], ON),
    (["run", "--no-ray-reuse"], ON),
    (["run"], {"FLOPWATCH_RAY_REUSE": "0"}),
    (["run", "--ray-address", "10.0.0.1:6379"], ON),
    (["run", "--ray-address=10.0.0.1:6379"], ON),
    (["run"], {**ON, "FLOPWATCH_RAY_ADDRESS": "10.0.0.1:6379"}),
    (["run"], {**ON, "RAY_ADDRESS": "10.0.0.1:6379"}),
    (["run", "--num-gpus", "two"], ON),  # the command's parser says what is wrong
    (["run"], {**ON, "FLOPWATCH_RAY_IDLE_S": "soon"}),
    (["run"], {**ON, "FLOPWATCH_RAY_IDLE_S": "0"}),
    (["run"], {**ON, "FLOPWATCH_HEAD_AHEAD": "0"}),
])
def test_any_other_command_line_starts_nothing_ahead(argv, env):
    assert head_ahead.wanted(argv, env)[0] is False
    assert head_ahead.start(argv, env) is False


def _stand_in(key: str) -> subprocess.Popen:
    """A process whose command line is a head's server of `key` (it only sleeps)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)",
                             local_ray.MODULE, "serve", "--key", key], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"
    return proc


def test_acquire_waits_for_the_head_started_ahead_instead_of_starting_another(tmp_path):
    base = local_ray.private_folder(tmp_path / "heads")
    key = local_ray.head_key(None)
    folder = local_ray.private_folder(base / key)
    head = _stand_in(key)
    try:
        (folder / local_ray.STARTING).write_text(json.dumps({"pid": head.pid, "key": key}))
        record = HeadRecord(key, head.pid, "127.0.0.1:1", 600.0, time.time(), {"CPU": 1.0})
        # The head writes its record once its Ray is up, a moment after the command asks.
        writer = threading.Timer(0.5, lambda: (folder / local_ray.RECORD).write_text(record.to_json()))
        writer.start()
        before = set(Path("/proc").iterdir())
        lease = local_ray.acquire(None, base=base)
        writer.join()
        try:
            assert lease.started and lease.ahead and lease.record == record
            assert not (folder / local_ray.STARTING).exists()
            # A head `acquire` starts is `serve --folder <folder>`; heads of other folders (other
            # tests', other users') may start meanwhile on the machine and are no concern here.
            started = {p for p in set(Path("/proc").iterdir()) - before
                       if p.name.isdigit() and local_ray.MODULE.encode() in (line := _cmdline(p))
                       and str(folder).encode() in line}
            assert started == set()  # no second head
        finally:
            lease.release()
        # Once it serves, a head is not started ahead again.
        assert local_ray.start_ahead(None, base=base) is False
    finally:
        head.kill()
        head.wait()


def test_a_note_of_a_head_that_is_gone_is_dropped(tmp_path):
    base = local_ray.private_folder(tmp_path / "heads")
    key = local_ray.head_key(None)
    folder = local_ray.private_folder(base / key)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (folder / local_ray.STARTING).write_text(json.dumps({"pid": gone.pid, "key": key}))
    assert local_ray._starting(folder, key) is None and not (folder / local_ray.STARTING).exists()
    # A live process that is not a head of this key does not count either.
    other = _stand_in("another-key")
    try:
        (folder / local_ray.STARTING).write_text(json.dumps({"pid": other.pid, "key": key}))
        assert local_ray._starting(folder, key) is None
    finally:
        other.kill()
        other.wait()


def _cmdline(proc_dir: Path) -> bytes:
    try:
        return (proc_dir / "cmdline").read_bytes()
    except OSError:
        return b""


def _started(head: dict, connect_s: float):
    from pipeline.fleet import cluster

    return cluster.ClusterInfo("192.0.2.2:6379", cluster.STARTED, {}, connect_s, head)


def test_the_start_line_of_a_head_started_ahead_adds_up():
    """Docs review (2026-12-06): "started flopwatch's local Ray in 15.6 s (… ray.init 17.2 s …)".
    The head began before the command's connect (started ahead of its imports), and the whole
    was the connect's time while the parts were the head's. Both now run on the head's clock,
    from its launch to this driver joined, and the parts add up to the whole."""
    from pipeline.fleet import cluster

    launched = 1_000_000.0
    # The head: 1.2 s to its serve(), resources 0.1, Ray's import 0.4, ray.init 17.2, then seeds,
    # slots and its record (0.5 s); the command connected 3.4 s after the launch, joined 0.2 s.
    head = {"python": 1.2, "resources": 0.1, "ray_import": 0.4, "ray_init": 17.2, "seeds": 1, "slots": 1,
            "launched_at": launched, "waited": 15.4, "join": 0.2, "joined_at": launched + 19.6, "ahead": True}
    whole, parts = cluster.head_account(head, connect_s=15.6)
    assert whole == 19.6 and round(sum(s for _, s in parts), 1) == whole
    assert parts == [("its python and imports", 1.2), ("resources", 0.1), ("Ray's import", 0.4), ("ray.init", 17.2),
                     ("its other steps", 0.5), ("joined", 0.2)]
    line = _started(head, 15.6).driver_line()
    assert line == ("driver: started flopwatch's local Ray in 19.6 s (its python and imports 1.2 s, resources 0.1 s, "
                    "Ray's import 0.4 s, ray.init 17.2 s, its other steps 0.5 s, joined 0.2 s; 1 device slot(s) "
                    "readied beside); 4.0 s of it before this command's connect, beside its imports")
    numbers = [float(x) for x in re.findall(r"(\d+\.\d) s", line.split("(", 1)[1].split(";")[0])]
    assert round(sum(numbers), 1) == float(re.search(r"in (\d+\.\d) s", line).group(1))


def test_a_head_started_by_the_command_itself_adds_up_to_its_connect():
    head = {"python": 1.0, "resources": 0.1, "ray_import": 0.5, "ray_init": 6.0, "launched_at": 50.0,
            "join": 0.3, "joined_at": 58.4, "ahead": False}
    # The command's connect began 0.1 s before it launched the head (its lock, the key).
    assert _started(head, 8.5).driver_line() == (
        "driver: started flopwatch's local Ray in 8.5 s (this command before launching it 0.1 s, its python and "
        "imports 1.0 s, resources 0.1 s, Ray's import 0.5 s, ray.init 6.0 s, its other steps 0.5 s, joined 0.3 s)")
