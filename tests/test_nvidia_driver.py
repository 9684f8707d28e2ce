"""The GPU count a local head reads from the kernel driver, and the NVML hold that keeps the
GPUs attached while it serves (`pipeline.fleet.nvidia_driver`)."""

from __future__ import annotations

import threading
import time

import pytest

from pipeline.fleet import local_ray, nvidia_driver


def _driver_listing(tmp_path, n: int):
    proc = tmp_path / "gpus"
    for i in range(n):
        (proc / f"0000:{i + 0x18:02x}:00.0").mkdir(parents=True)
    (proc / "not-a-gpu.txt").parent.mkdir(parents=True, exist_ok=True)
    (proc / "not-a-gpu.txt").write_text("")  # a file beside the folders is not counted
    return proc


def test_the_count_is_the_drivers_list_within_cuda_visible_devices(tmp_path):
    proc = _driver_listing(tmp_path, 4)
    assert nvidia_driver.gpu_count({}, proc) == 4
    # CUDA_VISIBLE_DEVICES as Ray reads it: its entries, whatever the driver lists.
    assert nvidia_driver.gpu_count({"CUDA_VISIBLE_DEVICES": "2,3"}, proc) == 2
    assert nvidia_driver.gpu_count({"CUDA_VISIBLE_DEVICES": "GPU-0c1d"}, proc) == 1
    assert nvidia_driver.gpu_count({"CUDA_VISIBLE_DEVICES": ""}, proc) == 0
    assert nvidia_driver.gpu_count({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, proc) == 0
    # No driver listing (no NVIDIA driver, a container without it): unknown, not zero.
    assert nvidia_driver.gpu_count({}, tmp_path / "missing") is None


def test_ray_reads_cuda_visible_devices_the_same_way(monkeypatch):
    from ray._private.accelerators.nvidia_gpu import NvidiaGPUAcceleratorManager as manager

    for value in (None, "", "NoDevFiles", "0", "1,3", "GPU-a,GPU-b,GPU-c"):
        if value is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
        env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
        assert nvidia_driver.visible_ids(env) == manager.get_current_process_visible_accelerator_ids(), value


def test_the_head_counts_nvidia_gpus_without_nvml(tmp_path, monkeypatch):
    """A CUDA build of torch and a driver listing: the count comes from the listing, Ray's
    NVML count is never asked; without a listing Ray's accelerator manager answers as before."""
    from ray._private.accelerators.nvidia_gpu import NvidiaGPUAcceleratorManager

    proc = _driver_listing(tmp_path, 3)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(nvidia_driver, "PROC_GPUS", proc)
    monkeypatch.setattr(NvidiaGPUAcceleratorManager, "get_current_node_num_accelerators",
                        staticmethod(lambda: pytest.fail("NVML was asked")))
    assert local_ray.gpu_without_torch({"cuda": "12.8", "hip": None}) == ("cuda", 3)
    monkeypatch.setattr(nvidia_driver, "PROC_GPUS", tmp_path / "missing")
    monkeypatch.setattr(NvidiaGPUAcceleratorManager, "get_current_node_num_accelerators", staticmethod(lambda: 2))
    assert local_ray.gpu_without_torch({"cuda": "12.8", "hip": None}) == ("cuda", 2)


def test_no_nvml_holds_nothing_and_says_so(tmp_path):
    held_before = list(nvidia_driver._held)
    assert nvidia_driver.hold_attached(str(tmp_path / "libnvidia-ml.so.1")) is None
    assert nvidia_driver._held == held_before
    # Where the driver lists GPUs, a thread tries; a library that cannot load records None.
    proc = _driver_listing(tmp_path, 2)
    threads = threading.active_count()
    record = nvidia_driver.hold_in_background({}, proc, library=str(tmp_path / "missing.so"))
    deadline = time.monotonic() + 10
    while "attach_s" not in record and time.monotonic() < deadline:
        time.sleep(0.01)
    assert record == {"attach_s": None}
    assert nvidia_driver._held == held_before
    # Switched off, or no GPU listed: no thread at all.
    assert nvidia_driver.hold_in_background({nvidia_driver.HOLD_ENV: "0"}, proc) == {}
    assert nvidia_driver.hold_in_background({}, tmp_path / "missing") == {}
    assert threading.active_count() <= threads
