"""Identity of the device a job used, from the runtime's UUID / PCI bus id or the
visible-devices variables, mapped onto the management tool's rows (recorded output)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from workers.core.records import DeviceInfo
from workers.measure import smi

FIX = Path(__file__).parent / "fixtures" / "smi"
NV_ROWS = smi.parse_nvidia_csv((FIX / "nvidia_smi_2xh200.csv").read_text())
GPU1 = "GPU-a41d2e77-08c3-4b6f-b2d1-9f5e6c3a0d12"


def test_nvidia_csv_is_parsed_under_flopwatch_names():
    assert [r["smi_index"] for r in NV_ROWS] == ["0", "1"]
    assert NV_ROWS[1]["uuid"] == GPU1 and NV_ROWS[1]["pci_bus_id"] == "00000000:2A:00.0"
    assert NV_ROWS[1]["sm_clock_mhz"] == 1755.0 and NV_ROWS[1]["power_limit_w"] == 700.0


def test_cuda_visible_devices_1_maps_to_physical_gpu_1():
    token = smi.physical_token(smi.VENDORS["cuda"], {"CUDA_VISIBLE_DEVICES": "1"})
    assert token == "1"
    assert smi.pick_row(NV_ROWS, token=token)["uuid"] == GPU1
    # Without the variable, device 0 is physical GPU 0.
    assert smi.pick_row(NV_ROWS, token=smi.physical_token(smi.VENDORS["cuda"], {}))["smi_index"] == "0"


def test_runtime_uuid_and_bus_id_win_over_the_index():
    # torch writes the UUID without the GPU- prefix and the bus id with a 4-digit domain
    assert smi.pick_row(NV_ROWS, uuid=GPU1[4:].upper(), token="0")["smi_index"] == "1"
    assert smi.pick_row(NV_ROWS, bus="0000:2a:00.0", token="0")["uuid"] == GPU1
    assert smi.pick_row(NV_ROWS, uuid="ffffffff-0000-0000-0000-000000000000") == {}


def test_visible_list_of_uuids_and_rocm_nesting():
    env = {"CUDA_VISIBLE_DEVICES": f"{GPU1},GPU-0f6b9c2e-51a4-7d3b-9e28-3c1d5a7b8e90"}
    token = smi.physical_token(smi.VENDORS["cuda"], env)
    assert smi.pick_row(NV_ROWS, token=token)["smi_index"] == "1"
    rocm = smi.VENDORS["rocm"]
    assert smi.physical_token(rocm, {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "1"}) == "3"
    assert smi.physical_token(rocm, {"HIP_VISIBLE_DEVICES": "5"}) == "5"
    assert smi.physical_token(rocm, {"HIP_VISIBLE_DEVICES": "0"}, ordinal=1) == ""


def test_command_lines_ask_by_uuid_then_bus_then_token():
    assert smi.nvidia_selector("a41d2e77-08c3", "0000:2a:00.0", "1") == "GPU-a41d2e77-08c3"
    assert smi.nvidia_selector("", "0000:2a:00.0", "1") == "0000:2a:00.0"
    cmd = smi.nvidia_command(smi.nvidia_selector("", "", "1"))
    assert cmd[0] == "nvidia-smi" and cmd[-1] == "--id=1" and "-i" not in cmd
    assert "--query-gpu=index,uuid,pci.bus_id" in " ".join(cmd)
    assert smi.rocm_command()[0] == "rocm-smi" and "--json" in smi.rocm_command()


def test_torch_properties_to_bus_id():
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=0x2A, pci_device_id=0, uuid="a41d2e77-08c3")
    assert smi.torch_bus_id(props) == "0000:2a:00.0"
    assert smi.norm_bus(smi.torch_bus_id(props)) == smi.norm_bus("00000000:2A:00.0")
    assert smi.torch_bus_id(SimpleNamespace()) == "" and smi.torch_uuid(SimpleNamespace(uuid=None)) == ""


def test_rocm_smi_json_by_bus_id():
    rows = smi.parse_rocm_json((FIX / "rocm_smi_2xmi325x.json").read_text())
    row = smi.pick_row(rows, bus="0000:26:00.0", token="0")
    assert row["smi_index"] == "1" and row["uuid"] == "0x2a1b4c3d5e6f7081" and row["sm_clock_mhz"] == 132.0
    assert smi.pick_row(rows, token=smi.physical_token(smi.VENDORS["rocm"], {"HIP_VISIBLE_DEVICES": "1"}))["pci_bus_id"] == "0000:26:00.0"
    assert smi.parse_rocm_json("not json") == []


def test_device_info_keeps_json_round_trip_with_the_new_fields():
    info = DeviceInfo("cuda", "H200", "sm_90", GPU1, pci_bus_id="00000000:2A:00.0",
                      visible={"CUDA_VISIBLE_DEVICES": "1"}, ray_node_id="abc", slot="cuda/1")
    assert DeviceInfo.from_dict(info.to_dict()) == info
    assert DeviceInfo.from_dict({"kind": "cpu", "name": "x", "unknown_later_field": 1}).slot == ""


def test_cpu_identity_records_the_visible_variables():
    code = "import json; from workers.measure import device; print(json.dumps(device.info('cpu').to_dict()))"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="1", PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert '"visible": {"CUDA_VISIBLE_DEVICES": "1"}' in out


def test_query_falls_back_to_listing_every_gpu(monkeypatch):
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        out = "" if any(c.startswith("--id=") for c in cmd) else (FIX / "nvidia_smi_2xh200.csv").read_text()
        return SimpleNamespace(stdout=out, returncode=0)

    monkeypatch.setattr(smi.subprocess, "run", fake_run)
    row = smi.query_smi(smi.VENDORS["cuda"], "", "", smi.physical_token(smi.VENDORS["cuda"], {"CUDA_VISIBLE_DEVICES": "1"}))
    assert row["uuid"] == GPU1 and len(calls) == 2 and calls[0][-1] == "--id=1"


def test_a_cpu_jobs_identity_starts_no_process():
    """A job asks for its device's identity in a thread beside its checks. `platform.processor()`
    ran `uname -p` as a child process there: a job that failed early exited before it, the
    orphan was killed by the job's scope, and the result read "left processes behind (1
    killed)". Run in a fresh interpreter: platform caches what it found once."""
    probe = ("import subprocess\n"
             "started = []\n"
             "real = subprocess.Popen.__init__\n"
             "def spy(self, args, *a, **k):\n"
             "    started.append(args)\n"
             "    real(self, args, *a, **k)\n"
             "subprocess.Popen.__init__ = spy\n"
             "from workers.measure.device import cpu_info\n"
             "info = cpu_info()\n"
             "assert info.name and info.kind == 'cpu', info\n"
             "print(started)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_job_process_ends_only_after_its_identity_query(monkeypatch):
    """The identity query runs beside the checks; a job that fails before reading it (an op's
    code raising) must not leave the query's tool running as an orphan for its scope to kill:
    the child's main waits for every query it started before it returns."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from workers.job import child

    pool = ThreadPoolExecutor(1)
    query = pool.submit(time.sleep, 0.3)
    pool.shutdown(wait=False)
    monkeypatch.setattr(child, "_IDENTITY_QUERIES", [pool])
    child._identity_queries_done()
    assert query.done() and child._IDENTITY_QUERIES == []


def test_a_job_whose_op_raises_ends_its_main_only_after_its_identity_query(tmp_path, monkeypatch):
    """The same rule through the child's real path: a job whose op raises at its first call ends
    long before a slow identity query answers, and the child's main still returns only after
    the query it started has finished (else the tool would be an orphan its scope kills). Run
    in this process, as a slot's launcher runs it (`runner.execute_job`), so the query can be
    replaced by one that sleeps and says when it ended."""
    import time

    from python_kernel import python_variant

    from workers.core.records import BuildResult, Job
    from workers.isolation.sandbox import ChildOutcome
    from workers.job import child, runner
    from workers.measure import device

    answered = device.info("cpu")
    query_ended, main_returned = [], []

    def slow_info(kind):
        time.sleep(0.5)
        query_ended.append(time.perf_counter())
        return answered

    monkeypatch.setattr(device, "info", slow_info)

    def in_this_process(args, timeout_s, workdir, max_write_bytes=None):
        here = os.getcwd()
        os.chdir(workdir)
        try:
            t0 = time.perf_counter()
            child.main(["child", *args])
            main_returned.append(time.perf_counter())
            return ChildOutcome(0, "", False, main_returned[-1] - t0, "", "")
        finally:
            os.chdir(here)

    v, files = python_variant(tmp_path, "def gemm(a, b, c):\n    raise RuntimeError('the op broke')\n", 60.0)
    r = runner.execute_job(Job(v.name, v.op, v.shapes[0], "fp32", "cpu"), v, BuildResult(v.name, "h", True, "python"),
                           files, {"timing": {"budget_s": 0.05}}, in_this_process)
    assert r.status == "crashed" and "the op broke" in r.diagnostic, (r.status, r.diagnostic)
    assert query_ended, "main returned while its identity query was still running"
    assert query_ended[0] <= main_returned[0]
    assert child._IDENTITY_QUERIES == []
