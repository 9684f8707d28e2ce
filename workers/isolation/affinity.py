"""The CPUs a GPU's jobs run on: those local to the GPU (its NUMA node), shared out among the
GPUs of that node, so that each job's host work (inputs, the check's reference, its threads)
runs beside its GPU and no two GPUs' jobs share a core.

The kernel says which CPUs are local to a PCI device (`/sys/bus/pci/devices/<bus id>/local_cpulist`,
else the CPUs of its `numa_node`). GPUs whose local CPUs are the same set (two GPUs on one
socket) split that set's cores between them, in bus-id order; the threads of one core (its
hyperthread siblings, `topology/thread_siblings_list`) stay together, so two GPUs' jobs never
share a physical core. Only CPUs this process may use (`os.sched_getaffinity`) are shared out.
Where the kernel says nothing (a GPU missing from sysfs, a device without a NUMA node, a share
that comes out empty) the answer is None: no pinning, never an error.

A slot names the set to its processes in `ENV_CPUS` (cpulist syntax, "0-7,64-71"); its warm
runner pins itself at its start (`apply`), so every job it forks inherits the set.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_CPUS = "FLOPWATCH_JOB_CPUS"  # the CPUs a slot's processes are pinned to, in cpulist syntax
ENV_OFF = "FLOPWATCH_PIN_CPUS"  # "0" in the slots' environment: no pinning


def parse_cpulist(text: str) -> set[int]:
    """The CPUs of a kernel cpulist ("0-15,32-47", "3", "" → none); a malformed list is none."""
    cpus: set[int] = set()
    try:
        for part in (text or "").strip().split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                first, last = part.split("-", 1)
                cpus.update(range(int(first), int(last) + 1))
            else:
                cpus.add(int(part))
    except ValueError:
        return set()
    return cpus


def format_cpulist(cpus) -> str:
    """`{0, 1, 2, 3, 8}` → "0-3,8"."""
    out, run = [], []
    for cpu in sorted(set(cpus)):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            out.append(_span(run))
        run = [cpu]
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def sysfs_bus_id(bus_id: str) -> str | None:
    """A PCI bus id as sysfs names the device ("00000000:18:00.0", "0000:18:00.0" → "0000:18:00.0";
    a bus id without a domain, "18:00.0", is in domain 0), or None."""
    parts = (bus_id or "").strip().lower().split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    try:
        domain, bus, rest = parts
        dev, fn = rest.split(".")
        return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{int(fn, 16):x}"
    except ValueError:
        return None


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def local_cpus(bus_id: str, sysfs: str | Path = "/sys") -> frozenset[int] | None:
    """The CPUs local to the PCI device `bus_id`, or None where sysfs does not say."""
    bus = sysfs_bus_id(bus_id)
    if bus is None:
        return None
    device = Path(sysfs) / "bus" / "pci" / "devices" / bus
    cpus = parse_cpulist(_read(device / "local_cpulist"))
    if not cpus:
        node = _read(device / "numa_node")
        if node.lstrip("-").isdigit() and int(node) >= 0:
            cpus = parse_cpulist(_read(Path(sysfs) / "devices" / "system" / "node" / f"node{int(node)}" / "cpulist"))
    return frozenset(cpus) or None


def _cores(cpus: set[int], sysfs: str | Path) -> list[list[int]]:
    """`cpus` grouped by physical core (hyperthread siblings together), cores in order of their first CPU."""
    cores: dict[int, list[int]] = {}
    for cpu in sorted(cpus):
        siblings = parse_cpulist(_read(Path(sysfs) / "devices" / "system" / "cpu" / f"cpu{cpu}" / "topology"
                                       / "thread_siblings_list")) & cpus
        cores.setdefault(min(siblings | {cpu}), []).append(cpu)
    return [cores[k] for k in sorted(cores)]


def gpu_cpus(bus_id: str, all_bus_ids: list[str], sysfs: str | Path = "/sys",
             allowed: set[int] | None = None) -> frozenset[int] | None:
    """The CPUs for the jobs of the GPU `bus_id`, one of the node's GPUs `all_bus_ids`: the CPUs
    local to it that this process may use (`allowed`, default `os.sched_getaffinity(0)`), split
    by whole cores among the GPUs with the same local CPUs, in bus-id order. None: no pinning."""
    mine = sysfs_bus_id(bus_id)
    local = local_cpus(bus_id, sysfs)
    if mine is None or local is None:
        return None
    allowed = set(os.sched_getaffinity(0)) if allowed is None else set(allowed)
    usable = set(local) & allowed
    # The GPUs sharing this one's CPUs (itself included, whether or not it was listed).
    sharing = sorted({b for b in (sysfs_bus_id(x) for x in all_bus_ids) if b and local_cpus(b, sysfs) == local}
                     | {mine})
    cores = _cores(usable, sysfs)
    index, count = sharing.index(mine), len(sharing)
    # Core shares as even as they come: the first `len(cores) % count` GPUs take one core more.
    size, extra = divmod(len(cores), count)
    start = index * size + min(index, extra)
    share = cores[start:start + size + (index < extra)]
    cpus = frozenset(cpu for core in share for cpu in core)
    return cpus or None


def apply(env: dict) -> frozenset[int] | None:
    """Pin this process (and so every process and thread it starts from now on) to the CPUs
    named in `env[ENV_CPUS]`; returns them, or None when none are named or the kernel refused."""
    cpus = parse_cpulist(env.get(ENV_CPUS, ""))
    if not cpus:
        return None
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:  # CPUs this process may not use (another cpuset): left as it was
        return None
    return frozenset(cpus)


def wanted(env: dict) -> bool:
    """Pinning is on unless `FLOPWATCH_PIN_CPUS=0`."""
    return env.get(ENV_OFF) != "0"
