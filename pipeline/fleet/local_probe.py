"""The probes a local Ray's slots would answer, answered on this machine before any Ray runs.

A `compare` whose series are all unchanged times nothing, yet it needs the toolchains (their
idents are part of every build hash) and each device kind's model (part of every series key)
to know that. When the command would start a local Ray for itself (no cluster to join, no
kept head up), starting it costs more than everything else such a compare does (13 s of 30 s
on a 2-core machine). So the same questions are asked here, of the same machine and the same
environment that the Ray started later would inherit, and Ray starts only when a job must run.

A GPU's identity is asked in a child process, as a slot asks it: the driver must not hold a
GPU context (device memory for the whole command, and a context does not survive a fork).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from workers.backends import build
from workers.job import runner
from workers.measure import device

PROBE_TIMEOUT_S = 300.0


def _gpu_probe(kind: str, folder: Path) -> subprocess.Popen:
    # The environment a job child gets (this checkout's workers first, no secrets).
    return subprocess.Popen([sys.executable, "-m", "workers.job.child", "--probe", kind, f"{kind}.json"], cwd=folder,
                            env=runner.child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def probe(kinds: list[str], with_toolchains: bool, notes: dict | None = None) -> tuple[dict, dict]:
    """({kind: device identity as a slot's probe gives it}, toolchains or {}): the GPU probes
    run in children while the toolchains are probed here (from the disk cache where nothing
    they depend on changed: `build.cached_toolchains`). `notes`, when given, receives what the
    toolchain probe did."""
    devices: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="flopwatch-probe-") as tmp:
        folder = Path(tmp)
        children = {kind: _gpu_probe(kind, folder) for kind in kinds if kind != "cpu"}
        toolchains, how = build.cached_toolchains() if with_toolchains else ({}, None)
        if notes is not None and how is not None:
            notes["toolchains"] = how
        if "cpu" in kinds:
            devices["cpu"] = {**device.cpu_info().to_dict(), "slot": "cpu/0"}
        for kind, child in children.items():
            try:
                _, err = child.communicate(timeout=PROBE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                _, err = child.communicate()
            out = folder / f"{kind}.json"
            if not out.exists():
                raise RuntimeError(f"device probe of {kind} on this machine failed (exit {child.returncode}): "
                                   f"{(err or '').strip()[-2000:]}")
            devices[kind] = {**json.loads(out.read_text()), "slot": f"{kind}/0"}
    return devices, toolchains
