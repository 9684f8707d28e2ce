"""A Ray cluster on the namespaces of `netlab`: a head and workers started with `ray start`, as
an operator starts them on separate machines, each bound to its own lab address, with token
authentication (RAY_AUTH_MODE=token and one token file, as flopwatch's own local Ray runs), and
the `flopwatch` driver run inside the head's namespace (a Ray driver attaches to a raylet of
its own machine).

The head checks its nodes' health every 0.5 s, gives each check 1 s to be answered, and
declares a silent one dead after four misses: seconds here, so a test of a cut link waits little;
what flopwatch does once Ray has decided is the same. (Without the 1 s, a check of a cut node
waits out Ray's default of 10 s before it counts as missed: four of them took 40 s.)
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from netlab import Lab, Node

ROOT = Path(__file__).resolve().parent.parent
RAY = str(Path(sys.executable).parent / "ray")
GCS_PORT = 6379  # each namespace has ports of its own: Ray's defaults cannot clash
FAST_HEALTH_CHECK = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                     "health_check_timeout_ms": 1000, "health_check_failure_threshold": 4}
START_LIMIT_S = 180

# Asks the head's control store which nodes are alive: {node address: node id}; asks again every
# 0.5 s, for up to argv[3] seconds, until argv[2] of them are (one interpreter and one import of
# Ray for the whole wait, not one per question).
_ALIVE = """
import json, sys, time
from ray._raylet import GcsClient
address, count, until = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while True:
    try:
        nodes = GcsClient(address=address).get_all_node_info(timeout=10)
        alive = {n.node_manager_address: n.node_id.hex() for n in nodes.values() if n.state == 0}
    except Exception:
        alive = {}
    if len(alive) >= count or time.monotonic() >= until:
        break
    time.sleep(0.5)
print(json.dumps(alive))
"""


class LabCluster:
    """`start_head`, `start_worker`, then `flopwatch(...)` runs in the head's namespace."""

    def __init__(self, lab: Lab, base: Path):
        self.lab, self.base = lab, base
        self.token_path = base / "token"
        self.token_path.write_text(secrets.token_hex(32))
        self.token_path.chmod(0o600)
        self.head: Node | None = None
        self.procs: dict[str, subprocess.Popen] = {}  # node name -> its `ray start --block`

    @property
    def address(self) -> str:
        return f"{self.head.address}:{GCS_PORT}"

    def env(self, node: Node) -> dict:
        """A node's (and the driver's) environment: the cluster's token and nothing of this
        machine's Ray (no address to wander off to, a temp dir of the node's own)."""
        dropped = ("RAY_ADDRESS", "FLOPWATCH_RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE")
        env = {k: v for k, v in os.environ.items() if k not in dropped}
        temp = self.base / node.name.rsplit("-", 1)[1]
        temp.mkdir(exist_ok=True)
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(self.token_path), RAY_TMPDIR=str(temp),
                   HOME=str(temp), RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(ROOT), FLOPWATCH_RAY_REUSE="0",
                   RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0")
        return env

    def _start(self, node: Node, *args: str) -> None:
        with open(self.base / f"{node.name}.log", "ab") as log:
            self.procs[node.name] = subprocess.Popen(
                node.argv(RAY, "start", "--node-ip-address", node.address, "--disable-usage-stats", *args, "--block"),
                env=self.env(node), stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)

    def start_head(self) -> Node:
        self.head = self.lab.add("head", 1)
        # One CPU for builds; no flopwatch_cpu slot: jobs run on the workers only.
        self._start(self.head, "--head", "--port", str(GCS_PORT), "--num-cpus", "1", "--include-dashboard", "false",
                    "--system-config", json.dumps(FAST_HEALTH_CHECK))
        self.wait_alive(1)
        return self.head

    def start_worker(self, node: Node) -> None:
        """A worker node with one CPU timing slot (`flopwatch_cpu`), on `node`."""
        self._start(node, "--address", self.address, "--num-cpus", "1", "--resources", '{"flopwatch_cpu": 1}')

    def alive(self, count: int = 0, patience_s: float = 0.0) -> dict[str, str]:
        """{node address: node id} of the nodes the head counts alive ({} while it cannot say);
        with `count`, asked again for up to `patience_s` until that many are."""
        try:
            out = subprocess.run(self.head.argv(sys.executable, "-c", _ALIVE, self.address, str(count),
                                                str(patience_s)), env=self.env(self.head),
                                 capture_output=True, text=True, timeout=60 + patience_s, check=False)
        except subprocess.TimeoutExpired:
            return {}
        lines = out.stdout.strip().splitlines()
        return json.loads(lines[-1]) if out.returncode == 0 and lines else {}

    def wait_alive(self, count: int, limit_s: float = START_LIMIT_S) -> dict[str, str]:
        deadline = time.monotonic() + limit_s
        # Each question waits up to 10 s for the count; between them, a node's `ray start` that
        # ended is reported at once.
        while len(nodes := self.alive(count, patience_s=min(10.0, max(0.0, deadline - time.monotonic())))) < count:
            for name, proc in self.procs.items():
                assert proc.poll() is None, f"{name} ended: " + (self.base / f"{name}.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"{count} node(s) did not come up in {limit_s:g} s: {nodes}"
            time.sleep(0.5)  # (a question that could not even be asked returns at once)
        return nodes

    def stop_node(self, node: Node) -> None:
        """End every process of a node, as a machine that is switched off."""
        for pid in self.lab.pids(node):
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        self.procs.pop(node.name, None)

    def ray_processes(self, node: Node, but: int | None = None) -> list[int]:
        """The processes of the node's Ray (its `ray start` and everything under it)."""
        proc = self.procs[node.name]
        parents = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        found, frontier = [], [proc.pid]
        while frontier:
            pid = frontier.pop()
            if pid != but:
                found.append(pid)
                frontier += [child for child, parent in parents.items() if parent == pid]
        return found

    def flopwatch(self, *argv: str, extra_env: dict | None = None) -> subprocess.Popen:
        """`flopwatch ARGV` on the head's machine, joined to the cluster by address."""
        env = dict(self.env(self.head), FLOPWATCH_RAY_ADDRESS=self.address, **(extra_env or {}))
        return subprocess.Popen(self.head.argv(sys.executable, "-m", "pipeline.cli", *argv), env=env, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
