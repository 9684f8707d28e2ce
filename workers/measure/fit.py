"""Does a shape fit the device at all? Asked in the job's child before anything is allocated,
so a `1000000³` gemm is `invalid` with both figures instead of a crash after trying.

The figure compared is a lower bound of what the check holds at once, from the op's own byte
count (`bytes_moved`: inputs read once, output written once): those tensors in the job's dtype
plus the fp64 copies the reference check makes of them. A shape under it may still run out of
memory later (the check's error tensors, the timing's cache-flush buffer): that ends `crashed`
with the runtime's message, as any other allocation failure.
"""

from __future__ import annotations

import os


def bytes_needed(op, dims: dict, itemsize: int) -> int:
    return int(op.bytes_moved(dims, itemsize) + op.bytes_moved(dims, 8))


def bytes_available(kind: str) -> int:
    """Free memory of the job's device: the GPU's (the runtime's figure for device 0, the first
    visible one), or the host's available memory for a CPU job."""
    if kind != "cpu":
        import torch

        return int(torch.cuda.mem_get_info(0)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


# How long a job waits for memory the device has but another process holds: the job before it
# on the same slot is still ending (its last check and exit overlap this job's start,
# `workers.job.handoff`), and a problem of tens of GiB takes seconds to judge and free.
WAIT_FOR_MEMORY_S = 120.0


def bytes_total(kind: str) -> int:
    if kind == "cpu":
        return bytes_available(kind)
    import torch

    return int(torch.cuda.mem_get_info(0)[1])


def too_big(op, dims: dict, itemsize: int, kind: str, wait_s: float = WAIT_FOR_MEMORY_S) -> str:
    """Why the shape cannot run on this device, or "" when it may. A GPU shape that fits the
    device but not what is free now waits up to `wait_s` for the memory to be freed."""
    import time

    need, have = bytes_needed(op, dims, itemsize), bytes_available(kind)
    deadline = time.monotonic() + wait_s
    while need > have and kind != "cpu" and need <= bytes_total(kind) and time.monotonic() < deadline:
        time.sleep(0.1)
        have = bytes_available(kind)
    if need <= have:
        return ""
    where = "host memory available" if kind == "cpu" else "free on the device"
    held = ""
    if kind != "cpu" and need <= bytes_total(kind):
        held = (f" (the device has {_size(bytes_total(kind))}: other processes held the rest for the "
                f"{wait_s:g} s this job waited)")
    return (f"the shape needs at least {_size(need)} ({need} bytes: inputs and output, and their fp64 reference) "
            f"but only {_size(have)} ({have} bytes) are {where}{held}; not run")


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"
