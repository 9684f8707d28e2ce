"""What this node measures on: device kinds present and their identity for the record."""

from __future__ import annotations

import os
import platform
import subprocess

from workers.records import DeviceInfo

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
    name = platform.processor() or platform.machine()
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
                             "torch": torch.__version__})


def gpu_info(kind: str) -> DeviceInfo:
    import torch

    props = torch.cuda.get_device_properties(0)
    extra = {"sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
             "l2_bytes": getattr(props, "L2_cache_size", 0), "torch": torch.__version__}
    if kind == "cuda":
        arch = f"sm_{props.major}{props.minor}"
        smi = _nvidia_smi(["uuid", "driver_version", "clocks.sm", "clocks.max.sm"])
        extra.update({"sm_clock_mhz": smi.get("clocks.sm"), "max_sm_clock_mhz": smi.get("clocks.max.sm")})
        uuid = smi.get("uuid") or str(getattr(props, "uuid", ""))
        return DeviceInfo("cuda", props.name, arch, uuid, smi.get("driver_version", ""),
                          f"CUDA {torch.version.cuda}", platform.node(), extra)
    arch = getattr(props, "gcnArchName", "").split(":")[0]
    return DeviceInfo("rocm", props.name, arch, str(getattr(props, "uuid", "")), _rocm_driver(),
                      f"ROCm/HIP {torch.version.hip}", platform.node(), extra)


def info(kind: str) -> DeviceInfo:
    return cpu_info() if kind == "cpu" else gpu_info(kind)


def flush_bytes(dev: DeviceInfo) -> int:
    """Twice the caches the device reports, plus what it does not report, at least 256 MiB."""
    l2 = int(dev.extra.get("l2_bytes") or 0)
    return max(_MIN_FLUSH_BYTES, 2 * (l2 + _INFINITY_CACHE_BYTES.get(dev.arch, 0)))


def _nvidia_smi(fields: list[str]) -> dict:
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return {}
    values = [v.strip() for v in out.splitlines()[0].split(",")] if out else []
    return dict(zip(fields, values))


def _rocm_driver() -> str:
    try:
        with open("/sys/module/amdgpu/version") as f:
            return f.read().strip()
    except OSError:
        return ""
