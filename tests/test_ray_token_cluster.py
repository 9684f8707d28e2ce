"""Ray as users start it, with token authentication on: a head and a second node started with
`ray start` (separate processes and ports on this machine, RAY_AUTH_MODE=token, one token file),
and `flopwatch run` as a separate process against it, as the README's Clusters section says.

Also: a second driver by address finds the device slots the first kept on the cluster and
probes nothing, one of another flopwatch version does not use them; a driver without the token
gets one line and exit 2; `flopwatch run` without an address
beside a running cluster (whose address Ray would pick up by itself) starts its own local Ray;
and a second command attaches to flopwatch's kept local Ray instead of starting Ray again."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from suite_repo import make_suite_repo

from pipeline.fleet import cluster, local_ray, slots
from pipeline.fleet.ray_access import Address, tcp_problem

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parent.parent
RAY = str(Path(sys.executable).parent / "ray")
# Generous limits that only keep a broken cluster from hanging the suite; nothing is timed.
START_LIMIT_S = 240
RUN_LIMIT_S = 900


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ports(*names: str) -> list[str]:
    """Every port a `ray start` node would otherwise take at a fixed default (6379, 8265,
    52365, ...), set to a free one: other Ray clusters may run on this machine."""
    return [arg for name in names for arg in (f"--{name}", str(_free_port()))]


NODE_PORTS = ("dashboard-agent-listen-port", "dashboard-agent-grpc-port", "runtime-env-agent-port",
              "metrics-export-port")


@dataclass(frozen=True)
class TokenCluster:
    address: str
    env: dict  # a driver environment with the cluster's token
    base: Path
    token: str
    worker_node_id: str
    node_ids: frozenset


def _clean_env(base: Path, home: str = "home") -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "FLOPWATCH_RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH",
                        "RAY_AUTH_MODE")}
    home = base / home
    home.mkdir(exist_ok=True)
    # A home of its own: the cluster's token lives in its ~/.ray/auth_token, as the README has it,
    # and no token of this machine's user stands in for a missing one.
    env.update(HOME=str(home), RAY_TMPDIR=str(base / "t"), RAY_USAGE_STATS_ENABLED="0",
               PYTHONPATH=str(ROOT), RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0", FLOPWATCH_RAY_REUSE="0")
    return env


def _start(argv: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    """`ray start --block` stops its node's processes on SIGTERM; a process group kill if not."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _nodes(address: str, env: dict) -> list[dict]:
    code = (f"import json, ray; ray.init(address={address!r}, logging_level='ERROR'); "
            "print(json.dumps([{'id': n['NodeID'], 'alive': n['Alive'], 'resources': n['Resources']} "
            "for n in ray.nodes()]))")
    host, port = address.rsplit(":", 1)
    if tcp_problem(Address(host, int(port), "test"), 2.0):
        return []  # not up yet: a driver would wait long for it
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                             check=False)
    except subprocess.TimeoutExpired:
        return []
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else []


@pytest.fixture(scope="module")
def token_cluster():
    base = Path(tempfile.mkdtemp(prefix="fwt", dir="/tmp"))  # short: Ray's socket paths live under it
    env = dict(_clean_env(base), RAY_AUTH_MODE="token")
    # The README's commands: make the token in ~/.ray/auth_token, keep it private, export RAY_AUTH_MODE.
    made = subprocess.run([RAY, "get-auth-token", "--generate"], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    token_file = Path(env["HOME"]) / ".ray" / "auth_token"
    token_file.chmod(0o600)
    token = token_file.read_text().strip()
    assert made.stdout.strip() == token and len(token) >= 32
    port = _free_port()
    address = f"127.0.0.1:{port}"
    head = _start([RAY, "start", "--head", "--port", str(port), "--num-cpus", "1", "--include-dashboard", "false",
                   *_ports("dashboard-port", *NODE_PORTS), "--block"], env,
                  base / "head.log")
    worker = None
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while not _nodes(address, env):
            assert head.poll() is None, (base / "head.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the head did not come up"
            time.sleep(2)
        worker = _start([RAY, "start", "--address", address, "--num-cpus", "2", "--resources",
                         '{"flopwatch_cpu": 1}', *_ports(*NODE_PORTS), "--block"], env, base / "worker.log")
        while len(nodes := [n for n in _nodes(address, env) if n["alive"]]) < 2:
            assert worker.poll() is None, (base / "worker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the second node did not join"
            time.sleep(2)
        (worker_id,) = [n["id"] for n in nodes if n["resources"].get("flopwatch_cpu")]
        yield TokenCluster(address, env, base, token, worker_id, frozenset(n["id"] for n in nodes))
    finally:
        for proc in (worker, head):
            if proc is not None:
                _stop(proc)
        shutil.rmtree(base, ignore_errors=True)


def _flopwatch(env: dict, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=RUN_LIMIT_S, cwd=ROOT, check=False)


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("suite") / "repo"
    make_suite_repo(path, good=("cpp_naive",))
    return path


def _run(env: dict, repo: Path, db: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = _flopwatch(env, "run", "--repo", str(repo), "--db", str(db), "--no-report", "--json", *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads(done.stdout)


def _no_token_anywhere(token: str, *texts: str, db: Path) -> None:
    for text in texts:
        assert token not in text
    assert token.encode() not in db.read_bytes()


def test_a_driver_with_the_token_runs_by_address_on_the_worker_node(token_cluster, suite, tmp_path):
    # The address through the environment, as the workflows pass it (not on the command line).
    env = dict(token_cluster.env, RAY_ADDRESS=token_cluster.address)
    done, report = _run(env, suite, tmp_path / "r.db")
    assert f"joined the Ray cluster at {token_cluster.address} (from RAY_ADDRESS)" in done.stderr
    rows = report["results"]
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}  # cpp_naive and the peer, 2 shapes
    assert {r["device_info"]["ray_node_id"] for r in rows} == {token_cluster.worker_node_id}
    assert report["ray"]["mode"] == "joined"
    _no_token_anywhere(token_cluster.token, done.stdout, done.stderr, db=tmp_path / "r.db")


def _where(report: dict) -> set:
    """Where each result was measured, and its measurement identity (toolchain and device model in it)."""
    return {(r["variant"], r["device"], r["identity"], r["device_info"]["ray_node_id"], r["device_info"]["slot"])
            for r in report["results"]}


def test_a_driver_by_address_finds_the_slots_an_earlier_one_kept_and_probes_nothing(token_cluster, suite, tmp_path):
    """Kept slots on a joined cluster: the second driver finds the worker's CPU slot with its
    probes answered, and measures where and as the first did; a driver of another flopwatch
    version does not use it (it stops it, and probes a slot of its own). Each driver asks each
    slot once: its start, device identity and toolchains in one call."""
    env, address = dict(token_cluster.env), ("--ray-address", token_cluster.address)
    _, first = _run(env, suite, tmp_path / "a.db", *address)
    _, second = _run(env, suite, tmp_path / "b.db", *address)
    keys = ("slots", "found", "nodes", "probed", "stopped", "calls")
    kept = {k: second["ray"]["slots"].get(k) for k in keys}
    assert kept == {"slots": 1, "found": 1, "nodes": 1, "probed": 0, "stopped": 0, "calls": 1}, second["ray"]
    assert first["ray"]["slots"]["calls"] == first["ray"]["slots"]["slots"] == 1, first["ray"]
    assert {"lookup_s", "answer_s"} <= set(second["ray"]["slots"]), second["ray"]
    assert slots.kept_line(second["ray"]["slots"]) == "slots: 1 found on 1 node, 0 probed"
    assert _where(second) == _where(first) and len(_where(first)) == 4
    assert {w[3] for w in _where(first)} == {token_cluster.worker_node_id}

    # Another flopwatch version (its source digest stands in for an upgrade), in text mode.
    other = ("import sys; from pipeline.fleet import slots; slots._code_key = lambda: 'another000'; "
             "from pipeline import cli; sys.exit(cli.main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", other, "run", "--repo", str(suite), "--db", str(tmp_path / "c.db"),
                           "--no-report", *address], env=env, capture_output=True, text=True, timeout=RUN_LIMIT_S,
                          cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    # (where the new slot's toolchains came from may be named between: "; toolchains from the cache")
    assert re.search(r"slots: 0 found on 0 nodes, 1 started, 1 probed(; toolchains [a-z /]+)?; 1 kept slot\(s\) of "
                     r"another flopwatch version or token stopped", done.stdout), done.stdout[-3000:]
    _no_token_anywhere(token_cluster.token, done.stdout, done.stderr, db=tmp_path / "c.db")


@pytest.mark.parametrize("who", ["no token", "wrong token"])
def test_a_driver_without_the_token_gets_one_line_and_exit_2(token_cluster, suite, tmp_path, who):
    env = _clean_env(token_cluster.base, "empty-home")  # no RAY_AUTH_MODE, no token anywhere
    if who == "wrong token":
        wrong = tmp_path / "token"
        wrong.write_text(secrets.token_hex(32))
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(wrong))
    done = _flopwatch(env, "run", "--repo", str(suite), "--db", str(tmp_path / "x.db"), "--no-report",
                      "--ray-address", token_cluster.address)
    assert done.returncode == 2
    mode = "RAY_AUTH_MODE is not set here" if who == "no token" else "RAY_AUTH_MODE=token here"
    assert done.stderr.strip().splitlines() == [(
        f"flopwatch: error: the Ray cluster at {token_cluster.address} (from --ray-address) refused this driver: "
        f"authentication token missing or wrong ({mode}); set RAY_AUTH_MODE=token and give the cluster's token "
        f"in RAY_AUTH_TOKEN_PATH (a file, mode 600) or ~/.ray/auth_token, as on the cluster's nodes")]


def test_run_beside_a_running_cluster_starts_a_local_ray_of_its_own(token_cluster, suite, tmp_path):
    env = dict(token_cluster.env)
    # The hazard: `ray start --head` left its address where a plain ray.init() looks for one.
    current = Path(env["RAY_TMPDIR"]) / "ray" / "ray_current_cluster"
    assert current.read_text().strip().endswith(token_cluster.address.split(":")[1])
    done, report = _run(env, suite, tmp_path / "b.db")
    assert 'starting a local Ray for this command (Ray\'s address="local"' in done.stderr
    rows = report["results"]
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}
    assert not {r["device_info"]["ray_node_id"] for r in rows} & token_cluster.node_ids
    assert report["ray"]["mode"] == "private"


def _ray_processes_under(folder: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(folder).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@contextlib.contextmanager
def _attached(folder: Path):
    with open(folder / local_ray.IN_USE, "a") as held:
        fcntl.flock(held, fcntl.LOCK_SH)
        yield


def test_a_second_command_attaches_to_flopwatchs_kept_local_ray(suite, tmp_path):
    base = Path(tempfile.mkdtemp(prefix="fwk", dir="/tmp"))
    try:
        heads = base / "heads"
        # Idle time: each command holds the head for its whole run, and the test takes it (below)
        # before the second starts, so nothing waits on it but the last check, which waits it out.
        env = dict(_clean_env(base), FLOPWATCH_RAY_REUSE="1", FLOPWATCH_LOCAL_RAY_DIR=str(heads),
                   FLOPWATCH_RAY_IDLE_S="6")
        # A record left by a head that is gone, its pid now someone else's: never believed.
        folder = local_ray.private_folder(local_ray.private_folder(heads) / local_ray.head_key(None))
        squatter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        (folder / local_ray.RECORD).write_text(
            local_ray.HeadRecord(local_ray.head_key(None), squatter.pid, "127.0.0.1:1", 20, 0, {}).to_json())
        try:
            first, report1 = _run(env, suite, tmp_path / "k.db")
        finally:
            squatter.kill()
            squatter.wait()
        assert f"flopwatch's local Ray of pid {squatter.pid} is gone; starting a new one" in first.stderr
        assert "started flopwatch's local Ray at" in first.stderr and report1["ray"]["mode"] == "started"
        record = local_ray.read_record(folder)
        assert record is not None and record.pid != squatter.pid and local_ray.is_serving(record)
        # The head readied its CPU slot as it started (runner, probe, toolchains): the first command
        # found it prepared, and its own probe asked nothing again.
        assert report1["ray"]["head"]["slots"] == 1 and record.startup["slots"] == 1
        # It started its slot's runner before Ray (`workers.job.seed`), and the slot adopted it.
        assert record.startup["seeds"] == 1
        assert set(report1["ray"]["head"]) >= {"python", "resources", "ray_init", "waited", "join", "launched_at",
                                               "joined_at"}
        # Its start on one clock, from the head's launch (before this command's connect: it was
        # started ahead) to the join: the parts of the driver's line add up to its whole.
        whole, parts = cluster.head_account(report1["ray"]["head"], report1["ray"]["connect_s"])
        assert round(sum(s for _, s in parts), 1) == whole >= round(report1["ray"]["connect_s"], 1), parts
        # It was started before the command's own imports (`pipeline.fleet.head_ahead`).
        assert report1["ray"]["head"]["ahead"] is True
        # The slot's start-up, step by step, in seconds into the command: its process began
        # after the command did, its runner's imports before its probes answered.
        steps = report1["ray"]["slots"]["timeline"]["cpu/0"]
        assert 0 < steps["process"] <= steps["actor"] <= steps["runner_ready"] <= steps["probe"], steps
        assert "runner_spawned" not in steps and steps["runner_adopted"] <= steps["runner_ready"], steps
        assert steps["runner_seeded"] <= steps["runner_torch"] <= steps["runner_ready"], steps
        assert steps["runner_seeded"] < steps["process"]  # its process began before the slot's
        assert report1["ray"]["slots"].get("prepared") == 1 and report1["ray"]["slots"]["probed"] == 0, report1["ray"]
        assert report1["ray"]["slots"]["calls"] == 1  # one call to the one slot: start, identity, toolchains

        # Hold the head as an attached command does (a shared lock on its in-use file) while the
        # next command starts: a slow start on a loaded machine must not let it idle out between.
        with _attached(folder):
            second, report2 = _run(env, suite, tmp_path / "k.db")
        assert f"attached to flopwatch's local Ray at {record.address}" in second.stderr
        assert report2["ray"]["mode"] == "reused" and local_ray.read_record(folder) == record
        assert {r["status"] for r in report2["results"]} == {"ok"} and len(report2["results"]) == 4
        # The head's token: a private file, never shown or stored.
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE((folder / local_ray.TOKEN).stat().st_mode) == 0o600
        token = (folder / local_ray.TOKEN).read_text()
        _no_token_anywhere(token, first.stdout, first.stderr, second.stdout, second.stderr, db=tmp_path / "k.db")

        # Nobody attached: after its idle time the head stops Ray and forgets itself.
        deadline = time.monotonic() + START_LIMIT_S
        while local_ray.is_serving(record) and time.monotonic() < deadline:
            time.sleep(1)
        assert not local_ray.is_serving(record) and local_ray.read_record(folder) is None
        assert "flopwatch's local Ray stopped: idle" in (folder / local_ray.LOG).read_text()
        while _ray_processes_under(folder) and time.monotonic() < deadline:
            time.sleep(1)
        assert _ray_processes_under(folder) == []
    finally:
        for pid in _ray_processes_under(base):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # ended meanwhile; an error here would hide the test's own
                pass
        shutil.rmtree(base, ignore_errors=True)

