"""Per-kernel metadata from an AMDGPU code object's ``amdhsa.kernels`` note.

``llvm-readelf --notes`` prints the NT_AMDGPU_METADATA note as YAML. Only the flat scalar
keys of each kernel entry are needed, so this reads them line by line instead of pulling in
a YAML parser. Note that ``.vgpr_count`` is the unified count on gfx90a/gfx942:
alignTo(arch VGPRs, 4) + AGPRs.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_KEYS = {
    ".name": "name",
    ".symbol": "symbol",
    ".vgpr_count": "vgpr_count",
    ".agpr_count": "agpr_count",
    ".sgpr_count": "sgpr_count",
    ".group_segment_fixed_size": "group_segment_fixed_size",
    ".private_segment_fixed_size": "private_segment_fixed_size",
    ".wavefront_size": "wavefront_size",
    ".max_flat_workgroup_size": "max_flat_workgroup_size",
    ".sgpr_spill_count": "sgpr_spill_count",
    ".vgpr_spill_count": "vgpr_spill_count",
    ".uses_dynamic_stack": "uses_dynamic_stack",
}
_ENTRY = re.compile(r"^(?P<indent>\s*)(?P<dash>-\s+)?(?P<key>\.[a-z_]+):\s*(?P<value>.*)$")


@dataclass(frozen=True)
class KernelNote:
    """One kernel's entry of the amdhsa.kernels metadata."""

    name: str
    symbol: str | None = None
    vgpr_count: int | None = None  # unified: arch VGPRs (aligned to 4) + AGPRs
    agpr_count: int | None = None
    sgpr_count: int | None = None
    group_segment_fixed_size: int | None = None  # static LDS bytes
    private_segment_fixed_size: int | None = None  # scratch bytes per work-item
    wavefront_size: int | None = None
    max_flat_workgroup_size: int | None = None
    sgpr_spill_count: int | None = None
    vgpr_spill_count: int | None = None
    uses_dynamic_stack: bool | None = None


def _convert(field: str, raw: str):
    raw = raw.strip().strip("'\"")
    if field in ("name", "symbol"):
        return raw
    if field == "uses_dynamic_stack":
        return raw.lower() == "true"
    return int(raw)


def parse_notes(text: str) -> tuple[str | None, list[KernelNote]]:
    """(target, kernels) from ``llvm-readelf --notes`` output (pure).

    A kernel entry starts at a ``- .key:`` line at the kernel list's indentation; keys of
    nested lists (``.args``) are deeper and skipped.
    """
    target = None
    m = re.search(r"^amdhsa\.target:\s*(\S+)", text, re.MULTILINE)
    if m:
        target = m.group(1).strip("'\"")
    kernels: list[dict] = []
    in_kernels = False
    kernel_indent: int | None = None
    for line in text.splitlines():
        if line.startswith("amdhsa.kernels:"):
            in_kernels = True
            continue
        if in_kernels and re.match(r"^[a-z]", line):  # next top-level key
            in_kernels = False
        if not in_kernels:
            continue
        e = _ENTRY.match(line)
        if not e:
            continue
        indent = len(e.group("indent")) + len(e.group("dash") or "")
        if e.group("dash") and (kernel_indent is None or indent == kernel_indent):
            kernel_indent = indent
            kernels.append({})
        if indent != kernel_indent or not kernels:
            continue
        field = _KEYS.get(e.group("key"))
        if field:
            kernels[-1][field] = _convert(field, e.group("value"))
    return target, [KernelNote(**k) for k in kernels if "name" in k]


def find_readelf(rocm_path: str | None = None) -> str | None:
    """ROCm's llvm-readelf when a ROCm path is given and has one, else llvm-readelf-19."""
    if rocm_path:
        candidate = Path(rocm_path) / "llvm" / "bin" / "llvm-readelf"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("llvm-readelf-19") or shutil.which("llvm-readelf")


def read_notes(code_object: str, readelf: str) -> str:
    """Run ``readelf --notes`` on a code object and return its text."""
    return subprocess.run([readelf, "--notes", code_object], capture_output=True, text=True,
                          timeout=60, check=True).stdout
