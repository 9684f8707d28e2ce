"""Parse ``-Rpass-analysis=kernel-resource-usage`` remarks into per-kernel records.

Two shapes occur in practice:
- clang-19 prints ``remark: Function Name: <mangled>`` before each kernel's block and echoes
  the source line (``   15 | ...`` / ``      | ^``) after it;
- the ROCm hipcc output recorded on an MI325X has no ``Function Name`` line at all: a kernel
  is only identified by the ``file:line:col`` location that prefixes each remark.
So a block starts at a ``Function Name`` remark, at a change of location, or when a field
repeats; lines that are not remarks are ignored.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

_REMARK = re.compile(
    r"^(?P<loc>\S+?):\s*remark:\s*(?P<key>[^:]+?):\s*(?P<value>.*?)\s*"
    r"\[-Rpass-analysis=kernel-resource-usage\]\s*$")

# remark label -> record field
_FIELDS = {
    "SGPRs": "sgprs",
    "VGPRs": "vgprs",
    "AGPRs": "agprs",
    "ScratchSize [bytes/lane]": "scratch_bytes",
    "Dynamic Stack": "dynamic_stack",
    "Occupancy [waves/SIMD]": "occupancy_waves_per_simd",
    "SGPRs Spill": "sgpr_spill",
    "VGPRs Spill": "vgpr_spill",
    "LDS Size [bytes/block]": "lds_bytes",
}


@dataclass(frozen=True)
class KernelResources:
    """One kernel's resource usage as reported by the compiler. ``name`` is demangled when a
    demangler was available, else equal to ``mangled``; both are None when the compiler did
    not print a name (then ``location`` identifies the kernel)."""

    location: str
    mangled: str | None = None
    name: str | None = None
    sgprs: int | None = None
    vgprs: int | None = None  # architectural VGPRs only
    agprs: int | None = None
    scratch_bytes: int | None = None  # per lane
    occupancy_waves_per_simd: int | None = None
    sgpr_spill: int | None = None
    vgpr_spill: int | None = None
    lds_bytes: int | None = None  # static LDS per block; dynamic LDS is not included
    dynamic_stack: bool | None = None


def _value(field: str, raw: str):
    if field == "dynamic_stack":
        return raw.strip().lower() == "true"
    return int(raw)


def parse_remarks(text: str,
                  demangle: Callable[[list[str]], list[str]] | None = None
                  ) -> list[KernelResources]:
    """Per-kernel records in the order the compiler printed them (pure unless ``demangle``
    runs a tool). ``demangle`` maps a list of mangled names to display names."""
    kernels: list[KernelResources] = []
    current: dict | None = None

    def close() -> None:
        if current is not None:
            kernels.append(KernelResources(**current))

    for line in text.splitlines():
        m = _REMARK.match(line)
        if not m:
            continue
        loc, key, raw = m.group("loc"), m.group("key").strip(), m.group("value")
        if key == "Function Name":
            close()
            current = {"location": loc, "mangled": raw, "name": raw}
            continue
        field = _FIELDS.get(key)
        if field is None:
            continue
        if current is None or current["location"] != loc or field in current:
            close()
            current = {"location": loc}
        current[field] = _value(field, raw)
    close()
    if demangle is not None:
        named = [k.mangled for k in kernels if k.mangled]
        pretty = dict(zip(named, demangle(named))) if named else {}
        kernels = [replace(k, name=pretty.get(k.mangled, k.name)) for k in kernels]
    return kernels


def find_demangler() -> str | None:
    """Path of llvm-cxxfilt-19 or c++filt, whichever exists first."""
    for tool in ("llvm-cxxfilt-19", "llvm-cxxfilt", "c++filt"):
        path = shutil.which(tool)
        if path:
            return path
    return None


def demangle_names(names: Iterable[str], tool: str | None = None) -> list[str]:
    """Demangle C++ names with an external demangler, one name per line; names come back
    unchanged when no demangler exists or it fails."""
    names = list(names)
    tool = tool or find_demangler()
    if not names or tool is None:
        return names
    try:
        out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True,
                             text=True, timeout=30, check=True).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return names
    return out if len(out) == len(names) else names
