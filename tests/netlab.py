"""A private network of Linux network namespaces for the cluster tests: every node (a Ray head, a
Ray worker, the PostgreSQL server) gets a namespace of its own with one veth link to a bridge
that lives in a further namespace, and an address from 198.18.0.0/15 (RFC 2544's range for
network tests). Nothing is attached to the machine's own namespace, so the nodes reach only
each other, and a cut link (`cut`) is a real one: packets vanish, connections go silent
without a reset, as when a cable or a switch port fails.

Namespaces carry a random prefix (two test runs side by side never share one), and `close()`
ends every process still inside them before deleting them, whatever state the test left them
in (stopped processes are continued first, so that SIGKILL reaches them at once).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

IP = "/usr/sbin/ip" if Path("/usr/sbin/ip").exists() else "ip"
SUBNET = "198.18.0"
PREFIX_LEN = 24


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([IP, *args], capture_output=True, text=True, timeout=30, check=check)


def why_not_available() -> str | None:
    """None when namespaces can be made and linked here; else the reason (tests skip with it)."""
    probe = f"fwprobe-{uuid.uuid4().hex[:8]}"
    try:
        made = _ip("netns", "add", probe, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`ip netns` cannot run here: {exc}"
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here ({made.stderr.strip() or 'no reason given'}; needs root)"
    try:
        veth = _ip("-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1", check=False)
        if veth.returncode != 0:
            return f"veth links cannot be made here: {veth.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


@dataclass(frozen=True)
class Node:
    name: str  # the namespace
    address: str

    def argv(self, *command: str) -> list[str]:
        """`command` run inside this node's namespace."""
        return [IP, "netns", "exec", self.name, *command]


class Lab:
    """A bridge namespace and the nodes linked to it. `add` a node, `cut`/`mend` its link."""

    def __init__(self) -> None:
        self.prefix = f"fw{uuid.uuid4().hex[:6]}"
        self.switch = f"{self.prefix}-sw"
        self.nodes: list[Node] = []
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")

    def add(self, role: str, host: int) -> Node:
        node = Node(f"{self.prefix}-{role}", f"{SUBNET}.{host}")
        _ip("netns", "add", node.name)
        self.nodes.append(node)
        port = f"p{host}"  # the node's port on the bridge
        _ip("-n", node.name, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", self.switch)
        _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
        _ip("-n", node.name, "addr", "add", f"{node.address}/{PREFIX_LEN}", "dev", "eth0")
        _ip("-n", node.name, "link", "set", "lo", "up")
        _ip("-n", node.name, "link", "set", "eth0", "up")
        # A default route into the lab: a program that finds its own address by routing towards a
        # public one (Ray does) finds the lab address; the packets themselves end at the bridge.
        _ip("-n", node.name, "route", "add", "default", "dev", "eth0")
        return node

    def cut(self, node: Node) -> None:
        """Take the node's link down: from now on its packets are lost, both ways."""
        _ip("-n", node.name, "link", "set", "eth0", "down")

    def mend(self, node: Node) -> None:
        _ip("-n", node.name, "link", "set", "eth0", "up")
        _ip("-n", node.name, "route", "replace", "default", "dev", "eth0")

    def pids(self, node: Node) -> list[int]:
        """Every process inside the node's namespace."""
        out = _ip("netns", "pids", node.name, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    def close(self) -> None:
        """End every process in the lab's namespaces, then delete them (always safe to call)."""
        for _ in range(3):
            alive = [pid for node in self.nodes for pid in self.pids(node)]
            if not alive:
                break
            for pid in alive:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
            time.sleep(0.5)
        for name in [n.name for n in self.nodes] + [self.switch]:
            _ip("netns", "del", name, check=False)
        self.nodes.clear()
