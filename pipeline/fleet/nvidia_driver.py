"""What a fresh NVIDIA node's head needs from the GPU driver, at the cost of a directory listing.

Two things on the path of a fresh machine's first command (issue 39):

- **How many GPUs.** Ray counts them through NVML, and so did the head, before it could start
  its slots' runners. Where the driver keeps no GPU attached (persistence mode off, nothing
  else using the GPUs) NVML's first initialisation attaches every GPU: 0.6-2.4 s measured on a
  4-GPU node, in the head's start before anything else could begin. The kernel driver lists its
  GPUs under `/proc/driver/nvidia/gpus` (one folder per GPU, by PCI address), which answers the
  same count at once. CUDA_VISIBLE_DEVICES is read as Ray reads it.
- **Keeping them attached** (`hold_attached`). With persistence mode off the driver detaches a
  GPU when its last client closes it, and the next client (Ray's own GPU checks in `ray.init`,
  each slot's CUDA initialisation, `nvidia-smi`) attaches it again. A head that keeps NVML
  initialised for as long as it serves is such a client: the GPUs are attached once, beside
  the head's other start-up work, instead of on the path of each of those. It holds no GPU
  memory and no context; `nvidia-persistenced`, where a machine runs it, does the same.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

PROC_GPUS = Path("/proc/driver/nvidia/gpus")
NVML_LIBRARY = "libnvidia-ml.so.1"
HOLD_ENV = "FLOPWATCH_HOLD_GPUS"  # "0": the head does not keep NVML initialised

_held: list = []  # the loaded library, kept for the process's life (never shut down)


def visible_ids(env: Mapping[str, str]) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as Ray reads it (`NvidiaGPUAcceleratorManager`): None when unset,
    no devices for "" or "NoDevFiles", else its comma-separated entries."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    if value in ("", "NoDevFiles"):
        return []
    return value.split(",")


def gpu_count(env: Mapping[str, str] | None = None, proc: Path | None = None) -> int | None:
    """The GPUs this process may use, as Ray would count them: the visible ones where
    CUDA_VISIBLE_DEVICES is set, else every GPU the kernel driver lists. None where the driver
    lists nothing readable (no NVIDIA driver, a container without /proc/driver/nvidia): the
    caller asks NVML then."""
    visible = visible_ids(os.environ if env is None else env)
    if visible is not None:
        return len(visible)
    try:
        return sum(1 for entry in (PROC_GPUS if proc is None else proc).iterdir() if entry.is_dir())
    except OSError:
        return None


def hold_attached(library: str = NVML_LIBRARY) -> float | None:
    """Initialise NVML in this process and never shut it down: the driver keeps every GPU
    attached while this process lives. Seconds it took, or None where there is no NVML (no
    NVIDIA driver) or it failed; then nothing is held and nothing else changes."""
    began = time.perf_counter()
    try:
        lib = ctypes.CDLL(library)
        if lib.nvmlInit_v2() != 0:  # NVML_SUCCESS
            return None
    except (OSError, AttributeError):
        return None
    _held.append(lib)
    return round(time.perf_counter() - began, 3)


def hold_in_background(env: Mapping[str, str] | None = None, proc: Path | None = None,
                       library: str = NVML_LIBRARY) -> dict:
    """`hold_attached` in a thread of its own, so that the head's start does not wait for the
    attach. Returns a record that gets "attach_s" when it is done (None where nothing is held);
    empty, and no thread, with FLOPWATCH_HOLD_GPUS=0 or where the driver lists no GPU."""
    env = os.environ if env is None else env
    record: dict = {}
    if env.get(HOLD_ENV) == "0" or not gpu_count({}, proc):
        return record

    def hold() -> None:
        record["attach_s"] = hold_attached(library)

    threading.Thread(target=hold, name="flopwatch-hold-gpus", daemon=True).start()
    return record
