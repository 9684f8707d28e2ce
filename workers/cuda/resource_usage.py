"""Parse ``nvcc --resource-usage`` (ptxas info) output into one record per kernel and arch.

The lines look like (CUDA 13)::

    ptxas info    : Compiling entry function '_Z9my_kernelPKfPfi' for 'sm_90a'
    ptxas info    : Function properties for _Z9my_kernelPKfPfi
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 39 registers, used 1 barriers, 33792 bytes smem

Older toolkits add ``N bytes cmem[0]`` and put barriers at the end; fields are matched one by one
so their order does not matter. ``smem`` is static shared memory only: dynamic shared memory is
a launch parameter and never appears here."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM0 = re.compile(r"(\d+) bytes cmem\[0\]")


@dataclass(frozen=True)
class KernelResources:
    """Build-time resource use of one kernel for one arch, as ptxas reported it.

    ``name`` is the demangled name (equal to ``mangled`` for ``extern "C"`` kernels or when no
    demangler was given); ``smem_bytes`` is static shared memory per block."""

    mangled: str
    name: str
    arch: str
    registers: int
    barriers: int
    smem_bytes: int
    cmem0_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int


def _int(pattern: re.Pattern, line: str) -> int:
    match = pattern.search(line)
    return int(match.group(1)) if match else 0


def parse_resource_usage(text: str, demangled: dict[str, str] | None = None) -> list[KernelResources]:
    """Kernels (entry functions) in the order ptxas compiled them.

    ``demangled`` maps mangled to readable names (see ``demangle``). Device functions that get a
    "Function properties" block but are not entries are ignored."""
    demangled = demangled or {}
    entries: list[dict] = []
    stacks: dict[str, tuple[int, int, int]] = {}
    current: dict | None = None
    properties_of: str | None = None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            current = {"mangled": m.group(1), "arch": m.group(2)}
            entries.append(current)
            properties_of = None
        elif m := _PROPERTIES.search(line):
            properties_of = m.group(1)
        elif (m := _STACK.search(line)) and properties_of:
            stacks[properties_of] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif _USED.search(line) and current is not None:
            current.update(
                registers=_int(_USED, line),
                barriers=_int(_BARRIERS, line),
                smem_bytes=_int(_SMEM, line),
                cmem0_bytes=_int(_CMEM0, line),
            )
            # Stack and spill lines belong to the entry ptxas was compiling when it printed them.
            if current["mangled"] in stacks:
                current["stack"] = stacks.pop(current["mangled"])
    records = []
    for e in entries:
        stack, stores, loads = e.get("stack", stacks.get(e["mangled"], (0, 0, 0)))
        records.append(
            KernelResources(
                mangled=e["mangled"],
                name=demangled.get(e["mangled"], e["mangled"]),
                arch=e["arch"],
                registers=e.get("registers", 0),
                barriers=e.get("barriers", 0),
                smem_bytes=e.get("smem_bytes", 0),
                cmem0_bytes=e.get("cmem0_bytes", 0),
                stack_bytes=stack,
                spill_stores=stores,
                spill_loads=loads,
            )
        )
    return records


def mangled_names(text: str) -> list[str]:
    """The entry-function names in ptxas output, once each, for ``demangle``."""
    return list(dict.fromkeys(m.group(1) for m in _ENTRY.finditer(text)))


def demangle(names: Iterable[str], demangler: str | None, run: Callable = subprocess.run) -> dict[str, str]:
    """Readable names through cu++filt or c++filt (one name per line on stdin); names that are
    not mangled (``extern "C"``) come back unchanged. Without a demangler, an empty mapping."""
    names = list(names)
    if not demangler or not names:
        return {}
    out = run([demangler], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) != len(names):
        return {}
    return dict(zip(names, lines))


# Shared memory a block is allocated, as CUDA's occupancy calculator counts it (cuda_occupancy.h:
# smemAllocatedPerCTA = roundUp(static + reservedSharedMemPerBlock + dynamic,
# cudaOccSMemAllocationGranularity)): 128-byte granules on compute capability 8.x to 12.x, 256
# before; the driver reserves 1 KiB per block from sm_80 on (the device's
# reservedSharedMemPerBlock, 1024 on A100 and H100), none before.
def smem_allocated_bytes(static_bytes: int, dynamic_bytes: int, arch: str) -> int:
    """What one block of a kernel is allocated on `arch` (`sm_90a`) (pure)."""
    digits = "".join(ch for ch in arch.split("_", 1)[-1] if ch.isdigit())
    major = int(digits[:-1] or 0) if digits else 0
    granule = 128 if major >= 8 else 256
    reserved = 1024 if major >= 8 else 0
    total = static_bytes + dynamic_bytes + reserved
    return -(-total // granule) * granule
