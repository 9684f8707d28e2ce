"""What this node measures on: device kinds present and their identity for the record."""

from __future__ import annotations

import os
import platform

from workers.core.records import DeviceInfo
from workers.measure.smi import VENDORS, physical_token, query_smi, torch_bus_id, torch_uuid, visible_devices

# Cache flush size per device, from the device itself where it says (L2 size) plus what it
# does not report: MI300X/MI325X have a 256 MiB Infinity Cache behind 8×4 MiB of L2 (GUIDE §3).
_INFINITY_CACHE_BYTES = {"gfx942": 256 << 20, "gfx950": 256 << 20}
_MIN_FLUSH_BYTES = 256 << 20


def gpu_kind() -> str | None:
    """`cuda`, `rocm` or None, from the torch build this node has."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return "rocm" if getattr(torch.version, "hip", None) else "cuda"


def kinds_here() -> list[str]:
    gpu = gpu_kind()
    return ["cpu"] + ([gpu] if gpu else [])


def cpu_info() -> DeviceInfo:
    # Not platform.processor(): on Linux it runs `uname -p` in a child process. A job asks for
    # its identity in a thread beside its checks; a job that failed early exited with that
    # child still running, and its scope killed the orphan and marked the result "left
    # processes behind (1 killed)" (2 of 4 clean-clone runs of the suite on a loaded 2-core machine).
    name = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import torch

    return DeviceInfo(kind="cpu", name=name, arch=platform.machine(), node=platform.node(),
                      extra={"cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                             "torch": torch.__version__}, visible=visible_devices(dict(os.environ)))


def gpu_info(kind: str) -> DeviceInfo:
    """Identity of torch's device 0 — the first *visible* device of this process — queried by
    its own UUID / PCI bus id, so the record names the GPU that ran the job, whatever
    CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES Ray gave the slot."""
    import torch

    props = torch.cuda.get_device_properties(0)
    vendor = VENDORS[kind]
    env = dict(os.environ)
    uuid, bus = torch_uuid(props), torch_bus_id(props)
    extra = {"sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
             "l2_bytes": getattr(props, "L2_cache_size", 0), "torch": torch.__version__}
    row = query_smi(vendor, uuid, bus, physical_token(vendor, env))
    extra.update({k: row[k] for k in ("sm_clock_mhz", "max_sm_clock_mhz", "mem_clock_mhz", "power_limit_w",
                                      "smi_index") if row.get(k) not in (None, "")})
    arch = _arch(kind, props)
    if kind == "cuda":
        runtime, driver = f"CUDA {torch.version.cuda}", row.get("driver", "")
    else:
        runtime, driver = f"ROCm/HIP {torch.version.hip}", _rocm_driver()
    return DeviceInfo(kind, props.name, arch, row.get("uuid") or uuid, driver, runtime, platform.node(), extra,
                      pci_bus_id=row.get("pci_bus_id") or bus, visible=visible_devices(env))


def _arch(kind: str, props) -> str:
    if kind == "cuda":
        return f"sm_{props.major}{props.minor}"
    return getattr(props, "gcnArchName", "").split(":")[0]


def info(kind: str) -> DeviceInfo:
    return cpu_info() if kind == "cpu" else gpu_info(kind)


# What the vendor's tool read at the moment it was asked, not what the device is.
_MOMENTARY = ("sm_clock_mhz",)


def reusable_identity(found: dict) -> dict:
    """A job's `info` (as a dict) for the next jobs of the same slot to reuse: the device's
    identity without the momentary reading (its SM clock then) and without what the slot adds
    per result. Used by a GPU slot so that its jobs ask no vendor tool of their own."""
    keep = {k: v for k, v in found.items() if k not in ("ray_node_id", "slot", "cpus")}
    keep["extra"] = {k: v for k, v in (found.get("extra") or {}).items() if k not in _MOMENTARY}
    return keep


def flush_bytes(dev: DeviceInfo) -> int:
    """Twice the caches the device reports, plus what it does not report, at least 256 MiB."""
    return _flush_bytes(int(dev.extra.get("l2_bytes") or 0), dev.arch)


def flush_bytes_here(kind: str) -> int:
    """`flush_bytes` of torch's device 0, from torch's own properties: a timing loop need not
    wait for the vendor's tool (`info` runs nvidia-smi / rocm-smi, 0.1-0.5 s a call on a node
    whose GPUs are all busy) to size its flush buffer."""
    import torch

    props = torch.cuda.get_device_properties(0)
    return _flush_bytes(int(getattr(props, "L2_cache_size", 0) or 0), _arch(kind, props))


def _flush_bytes(l2: int, arch: str) -> int:
    return max(_MIN_FLUSH_BYTES, 2 * (l2 + _INFINITY_CACHE_BYTES.get(arch, 0)))


def _rocm_driver() -> str:
    try:
        with open("/sys/module/amdgpu/version") as f:
            return f.read().strip()
    except OSError:
        return ""
