"""The private local Ray (`--no-ray-reuse`, FLOPWATCH_RAY_REUSE=0, which the test suite forces)
gets the kept head's token handling: a fresh token in a file of mode 600 in a folder of mode 700,
token mode on before `ray.init`, whatever RAY_AUTH_MODE the shell had. Ray listens on every
interface, so the token is all that keeps another machine's process out.

The holder runs with RAY_AUTH_MODE=disabled, as a user who opted out of Ray 2.59+'s default has
it, and as Ray up to 2.58 behaved by itself: a bare `ray.init(address="local")` then let a process
with no token join through the machine's network address and run a task as the user."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pipeline.fleet import local_ray
from pipeline.fleet.ray_access import ClusterError

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parent.parent

HOLDER = """
import json, os, sys
from pipeline.fleet import cluster
import ray
info = cluster.connect(None, announce=lambda line: None)
print(json.dumps({"gcs": ray.get_runtime_context().gcs_address, "mode": info.mode,
                  "session": ray._private.worker._global_node.get_session_dir_path(),
                  "token_path": os.environ.get("RAY_AUTH_TOKEN_PATH"),
                  "auth_mode": os.environ.get("RAY_AUTH_MODE")}), flush=True)
sys.stdin.readline()
cluster.shutdown(info)
print(json.dumps({"auth_mode_after": os.environ.get("RAY_AUTH_MODE"),
                  "token_path_after": os.environ.get("RAY_AUTH_TOKEN_PATH")}), flush=True)
"""

INTRUDER = """
import os, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR")
who = ray.get(ray.remote(lambda: os.getuid()).remote(), timeout=60)
print("JOINED and ran a task as uid", who, flush=True)
"""


def _network_address() -> str:
    """This machine's address on its network (not the loopback): what another machine dials."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent; the kernel picks the outgoing address
        return probe.getsockname()[0]


def _env(base: Path, name: str, **extra: str) -> dict:
    home = base / name
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "FLOPWATCH_RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH",
                        "RAY_AUTH_MODE")}
    env.update(HOME=str(home), RAY_TMPDIR=str(base / f"t-{name}"), RAY_USAGE_STATS_ENABLED="0",
               PYTHONPATH=str(ROOT), FLOPWATCH_RAY_REUSE="0", FLOPWATCH_LOCAL_RAY_DIR=str(base / "heads"), **extra)
    return env


def test_a_process_without_the_token_cannot_join_the_private_local_ray_by_network_address():
    base = Path(tempfile.mkdtemp(prefix="fwp", dir="/tmp"))  # short: Ray's socket paths live under it
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], env=_env(base, "owner", RAY_AUTH_MODE="disabled"),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT)
    try:
        line = holder.stdout.readline()
        assert line, holder.stderr.read()[-3000:]
        up = json.loads(line)
        assert up["mode"] == "private" and up["auth_mode"] == "token"
        token = Path(up["token_path"])
        # A fresh token of this Ray's own, private: not Ray's default ~/.ray/auth_token (mode 644).
        assert token.parent.parent == base / "heads"
        assert stat.S_IMODE(token.stat().st_mode) == 0o600
        assert stat.S_IMODE(token.parent.stat().st_mode) == 0o700
        assert len(token.read_text().strip()) >= 32
        assert not (base / "owner" / ".ray" / "auth_token").exists()
        # Its sockets and logs in that private folder too, not in Ray's shared temporary folder
        # (workflows review, 2026-12-06: another user read the logs and put a raylet socket there).
        assert Path(up["session"]).is_relative_to(token.parent), up["session"]
        assert not (base / "t-owner").exists() or not any((base / "t-owner").rglob("session_*"))

        port = up["gcs"].rsplit(":", 1)[1]
        address = f"{_network_address()}:{port}"
        intruder = subprocess.run([sys.executable, "-c", INTRUDER, address], env=_env(base, "intruder"),
                                  capture_output=True, text=True, timeout=200, cwd=base, check=False)
        assert "JOINED" not in intruder.stdout, intruder.stdout
        assert intruder.returncode != 0
        # The same join with the token gets in: the refusal above was the token's, not the address's.
        insider = subprocess.run([sys.executable, "-c", INTRUDER, address],
                                 env=_env(base, "insider", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token)),
                                 capture_output=True, text=True, timeout=200, cwd=base, check=False)
        assert "JOINED" in insider.stdout, insider.stderr[-3000:]

        out, err = holder.communicate("\n", timeout=120)
        after = json.loads(out.strip().splitlines()[-1])
        # The shell's own settings come back, and the token goes with the Ray it opened.
        assert after == {"auth_mode_after": "disabled", "token_path_after": None}, err[-3000:]
        assert not token.exists() and not token.parent.exists()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        subprocess.run(["rm", "-rf", str(base)], check=False)


def test_the_private_path_is_refused_where_ray_cannot_enforce_a_token(monkeypatch):
    """A Ray without token authentication (before 2.52) would start the private Ray open to the
    network: refused in one line that says what to install and what else to use."""
    import ray._raylet

    monkeypatch.delattr(ray._raylet, "AuthenticationTokenLoader")
    with pytest.raises(ClusterError) as caught:
        local_ray.require_token_auth()
    message = str(caught.value)
    assert "token authentication" in message and "ray>=2.52" in message and "--ray-address" in message
    assert "\n" not in message


def test_the_private_token_folder_is_fresh_and_private(tmp_path):
    first = local_ray.private_token_folder(tmp_path / "heads")
    second = local_ray.private_token_folder(tmp_path / "heads")
    assert first != second and first.parent == second.parent == tmp_path / "heads"
    # no longer than a kept head's folder name (its key, 12 characters): Ray's socket paths
    # below it must fit a Unix socket name (workflows review: 4 bytes longer broke a long uid's)
    assert len(first.name) <= 12 and len(second.name) <= 12
    for folder in (first, second):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE((folder / local_ray.TOKEN).stat().st_mode) == 0o600
    assert (first / local_ray.TOKEN).read_text() != (second / local_ray.TOKEN).read_text()


def test_a_default_folder_taken_by_someone_else_leaves_the_private_ray_a_fresh_one(tmp_path, monkeypatch):
    """Workflows review (2026-12-06): /tmp/flopwatch-<uid> has a name another user can take first,
    and then every command refused to start. A private Ray needs no name a later command finds:
    it takes a fresh private folder. A folder the user chose stays an error of theirs to fix."""
    taken = tmp_path / "taken"
    taken.symlink_to(tmp_path)  # refused as a symbolic link, as another user's folder is refused
    monkeypatch.delenv("FLOPWATCH_LOCAL_RAY_DIR", raising=False)
    monkeypatch.setattr(local_ray, "base_dir", lambda env=None: taken)
    folder = local_ray.private_token_folder()
    try:
        assert folder.parent == Path(tempfile.gettempdir()) and folder.name.startswith("flopwatch-p")
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE((folder / local_ray.TOKEN).stat().st_mode) == 0o600
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)
    with pytest.raises(ClusterError, match="symbolic link"):
        local_ray.private_token_folder(taken)
    monkeypatch.setenv("FLOPWATCH_LOCAL_RAY_DIR", str(taken))
    with pytest.raises(ClusterError, match="symbolic link"):
        local_ray.private_token_folder()
