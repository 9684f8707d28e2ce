"""A GPU slot's CPUs: its GPU's local CPUs from sysfs, shared by whole cores among the GPUs of
its NUMA node, within this process's affinity; none where sysfs says nothing. The slot names
them to its warm runner, which pins itself (and so its jobs), caps its jobs' host threads at
their count and records them with each result. All on a fake sysfs and procfs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.fleet import slots
from pipeline.run import accounting
from workers.core.records import Result
from workers.isolation import affinity
from workers.job import runner

# Two sockets of 8 cores with 2 threads each: core i is CPUs i and i + 16.
NODES = {0: "0-7,16-23", 1: "8-15,24-31"}
GPUS = {"0000:18:00.0": 0, "0000:2a:00.0": 0, "0000:9a:00.0": 1, "0000:ab:00.0": 1}
UUIDS = {bus: f"GPU-{i}aaa" for i, bus in enumerate(GPUS)}


def fake_sysfs(root: Path, gpus: dict = GPUS, local: bool = True) -> Path:
    for node, cpus in NODES.items():
        (root / "devices/system/node" / f"node{node}").mkdir(parents=True)
        (root / "devices/system/node" / f"node{node}" / "cpulist").write_text(cpus + "\n")
    for cpu in range(32):
        topo = root / "devices/system/cpu" / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        topo.joinpath("thread_siblings_list").write_text(f"{cpu % 16},{cpu % 16 + 16}\n")
    for bus, node in gpus.items():
        dev = root / "bus/pci/devices" / bus
        dev.mkdir(parents=True)
        dev.joinpath("numa_node").write_text(f"{node}\n")
        dev.joinpath("local_cpulist").write_text((NODES[node] if local else "") + "\n")
    return root


def fake_proc(root: Path) -> Path:
    for bus in reversed(list(GPUS)):  # the listing's order is not the GPUs' order
        d = root / "driver/nvidia/gpus" / bus
        d.mkdir(parents=True)
        d.joinpath("information").write_text(f"Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t {UUIDS[bus]}\n"
                                             f"Bus Location: \t {bus}\n")
    return root


ALL = set(range(32))


def test_cpulists_parse_and_format():
    assert affinity.parse_cpulist("0-15,32-47\n") == set(range(16)) | set(range(32, 48))
    assert affinity.parse_cpulist("3") == {3} and affinity.parse_cpulist("") == set()
    assert affinity.parse_cpulist("0-x") == set()  # malformed: nothing, never an error
    assert affinity.format_cpulist({8, 0, 1, 2, 3, 5}) == "0-3,5,8" and affinity.format_cpulist(()) == ""
    assert affinity.sysfs_bus_id("00000000:9A:00.0") == "0000:9a:00.0" == affinity.sysfs_bus_id("9a:00.0")


def test_four_gpus_two_per_node_get_disjoint_halves_of_their_nodes_cpus(tmp_path):
    sysfs = fake_sysfs(tmp_path)
    listed = ["00000000:AB:00.0", "00000000:18:00.0", "00000000:9A:00.0", "00000000:2A:00.0"]  # nvidia-smi's form
    got = {bus: affinity.gpu_cpus(bus.upper(), listed, sysfs, allowed=ALL) for bus in GPUS}
    assert {b: affinity.format_cpulist(c) for b, c in got.items()} == {
        "0000:18:00.0": "0-3,16-19", "0000:2a:00.0": "4-7,20-23",  # node 0's cores, halved, threads of a core together
        "0000:9a:00.0": "8-11,24-27", "0000:ab:00.0": "12-15,28-31"}
    assert set().union(*got.values()) == ALL and sum(map(len, got.values())) == 32  # disjoint, none left out
    # Alone on its node, a GPU takes all of it.
    alone = affinity.gpu_cpus("0000:18:00.0", ["0000:18:00.0", "0000:9a:00.0"], sysfs, allowed=ALL)
    assert affinity.format_cpulist(alone) == NODES[0]


def test_the_numa_node_answers_where_local_cpulist_is_empty(tmp_path):
    sysfs = fake_sysfs(tmp_path, local=False)
    assert affinity.format_cpulist(affinity.gpu_cpus("0000:9a:00.0", list(GPUS), sysfs, allowed=ALL)) == "8-11,24-27"
    (sysfs / "bus/pci/devices/0000:9a:00.0/numa_node").write_text("-1\n")  # no NUMA information
    assert affinity.gpu_cpus("0000:9a:00.0", list(GPUS), sysfs, allowed=ALL) is None


def test_a_gpu_missing_from_sysfs_or_a_bad_bus_id_is_not_pinned(tmp_path):
    sysfs = fake_sysfs(tmp_path)
    assert affinity.gpu_cpus("0000:c1:00.0", [*GPUS, "0000:c1:00.0"], sysfs, allowed=ALL) is None
    assert affinity.gpu_cpus("", list(GPUS), sysfs, allowed=ALL) is None
    assert affinity.gpu_cpus("0000:18:00.0", list(GPUS), tmp_path / "nothing", allowed=ALL) is None


def test_only_cpus_this_process_may_use_are_shared_out(tmp_path, monkeypatch):
    sysfs = fake_sysfs(tmp_path)
    allowed = {0, 1, 2, 3, 4, 5, 16, 17, 18, 19, 20, 21}  # six of node 0's cores (a cpuset)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: allowed)
    first, second = (affinity.gpu_cpus(b, list(GPUS), sysfs) for b in ("0000:18:00.0", "0000:2a:00.0"))
    assert affinity.format_cpulist(first) == "0-2,16-18" and affinity.format_cpulist(second) == "3-5,19-21"
    assert affinity.gpu_cpus("0000:9a:00.0", list(GPUS), sysfs) is None  # none of node 1's: not pinned


def test_apply_pins_the_process_to_the_named_cpus(monkeypatch):
    calls = []
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: calls.append((pid, set(cpus))))
    assert affinity.apply({affinity.ENV_CPUS: "0-1,4"}) == {0, 1, 4} and calls == [(0, {0, 1, 4})]
    assert affinity.apply({}) is None and len(calls) == 1


def test_a_slots_gpu_is_found_from_rays_visible_devices(tmp_path, monkeypatch):
    sysfs, proc = fake_sysfs(tmp_path / "sys"), fake_proc(tmp_path / "proc")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: ALL)

    def cpus(kind, **env):
        return affinity.format_cpulist(slots.job_cpus(kind, env, sysfs, proc) or ())

    assert cpus("cuda", CUDA_VISIBLE_DEVICES="1") == "4-7,20-23"  # index 1 in bus order: 0000:2a
    assert cpus("cuda", CUDA_VISIBLE_DEVICES=UUIDS["0000:ab:00.0"]) == "12-15,28-31"
    assert cpus("cuda", CUDA_VISIBLE_DEVICES="2", FLOPWATCH_PIN_CPUS="0") == ""
    assert cpus("cuda", CUDA_VISIBLE_DEVICES="7") == ""  # a GPU the driver does not list
    assert cpus("cpu") == "" and cpus("rocm", HIP_VISIBLE_DEVICES="0") == ""


class _FakeZygote:
    def __init__(self, env, **_):
        self.env, self.started = env, 0


def test_a_gpu_slot_pins_its_runner_caps_threads_and_records_its_cpus(monkeypatch):
    import workers.job.zygote

    monkeypatch.setattr(slots, "job_cpus", lambda kind, env: frozenset({4, 5, 6, 7}))
    monkeypatch.setattr(workers.job.zygote, "Zygote", _FakeZygote)
    monkeypatch.setattr(slots.ray, "get_runtime_context", lambda: SimpleNamespace(get_node_id=lambda: "n1"))
    monkeypatch.setenv(affinity.ENV_CPUS, "")  # the slot sets it: put back as it was after the test
    monkeypatch.setenv("FLOPWATCH_DEVICE_LOCK", "/tmp/flopwatch-test-lock")
    slot = slots.DeviceSlot("cuda", "cuda/1")
    slot._share = 8  # the node's cores over its GPUs, capped at GPU_JOB_MAX_THREADS
    assert slot._zygote().env[affinity.ENV_CPUS] == "4-7"  # the warm runner is told its CPUs
    assert slot._job_settings({})["threads"] == 4  # one thread per CPU of the set
    assert slot._job_settings({"threads": 16})["threads"] == 16  # --threads as asked
    result = Result(variant="v", op="gemm", backend="python", shape="M=8", dtype="fp32", device="cuda:H100",
                    status="ok", phases={"timing_s": 1.0})
    measured = slot._measured_here(result, 100.0)
    assert measured["device_info"]["cpus"] == "4-7"
    (row,) = accounting.summarise([("cuda/1", Result.from_dict(measured))], 100.0, {"cuda/1": 102.0})
    assert row["cpus"] == "4-7"  # the run's per-device rows (its --json) say which CPUs each GPU had


def test_an_unpinned_slot_keeps_its_threads_and_names_no_cpus(monkeypatch):
    import workers.job.zygote

    monkeypatch.setattr(slots, "job_cpus", lambda kind, env: None)
    monkeypatch.setattr(workers.job.zygote, "Zygote", _FakeZygote)
    monkeypatch.setenv(affinity.ENV_CPUS, "0")  # left over in the environment: not passed on
    monkeypatch.setenv("FLOPWATCH_DEVICE_LOCK", "/tmp/flopwatch-test-lock")
    slot = slots.DeviceSlot("cuda", "cuda/0")
    slot._share = 8
    assert affinity.ENV_CPUS not in slot._zygote().env
    assert slot._job_settings({})["threads"] == 8


def test_the_warm_runner_and_a_spawned_child_pin_themselves(tmp_path, monkeypatch):
    from workers.job.zygote import Zygote

    one = str(min(os.sched_getaffinity(0)))
    monkeypatch.setenv(affinity.ENV_CPUS, one)
    z = Zygote(runner.child_env())
    try:
        z.ensure_started()
        assert os.sched_getaffinity(z.proc.pid) == {int(one)}  # the runner itself: its forks inherit it
        forked = z.run(["--env", "env.json"], 120, tmp_path)
    finally:
        z.close()
    assert forked.returncode == 0 and json.loads((tmp_path / "env.json").read_text())["cpus"] == one
    spawned_dir = tmp_path / "spawned"
    spawned_dir.mkdir()
    assert runner.spawn(["--env", "env.json"], 120, spawned_dir).returncode == 0
    assert json.loads((spawned_dir / "env.json").read_text())["cpus"] == one


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to tell pinned from not")
def test_a_child_without_a_set_keeps_every_cpu(tmp_path, monkeypatch):
    monkeypatch.delenv(affinity.ENV_CPUS, raising=False)
    assert runner.spawn(["--env", "env.json"], 120, tmp_path).returncode == 0
    assert json.loads((tmp_path / "env.json").read_text())["cpus"] == affinity.format_cpulist(os.sched_getaffinity(0))


def test_without_the_drivers_proc_files_nvidia_smis_list_names_the_gpus(tmp_path, monkeypatch):
    from workers.measure import smi

    lines = [f"{i}, {UUIDS[bus]}, 0000{bus.upper()}, 550.54, 1980, 1980, 2619, 700.00" for i, bus in enumerate(GPUS)]
    out = "\n".join(reversed(lines))  # in any order: the GPUs are numbered in bus-id order
    monkeypatch.setattr(smi.subprocess, "run", lambda *a, **k: SimpleNamespace(stdout=out))
    rows = smi.node_gpus(tmp_path / "no-proc")
    assert [(r["smi_index"], r["uuid"]) for r in rows] == [(str(i), UUIDS[b]) for i, b in enumerate(GPUS)]
    assert affinity.sysfs_bus_id(rows[2]["pci_bus_id"]) == "0000:9a:00.0"
