"""Read rocprofv3 CSV output: counter_collection.csv and kernel_trace.csv.

Columns are found by name, case-insensitively, because the format moved between releases:
``Agent_Id`` is ``"Agent 2"`` in new files and an integer in old ones; some versions add
``Guid``/``Pid``; old kernel traces say ``Private_Segment_Size``/``Group_Segment_Size`` where
new ones say ``Scratch_Size``/``LDS_Block_Size``; 2024 counter files lack ``Accum_VGPR_Count``
and the timestamps. Counter values of all hardware instances are already summed per row.
"""
from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

# record field -> accepted header names (lower case), first match wins
_COLUMNS = {
    "dispatch_id": ("dispatch_id",),
    "kernel_name": ("kernel_name",),
    "agent_id": ("agent_id",),
    "correlation_id": ("correlation_id",),
    "queue_id": ("queue_id",),
    "workgroup_size": ("workgroup_size",),
    "grid_size": ("grid_size",),
    "lds_bytes": ("lds_block_size", "group_segment_size"),
    "scratch_bytes": ("scratch_size", "private_segment_size"),
    "vgprs": ("vgpr_count", "arch_vgpr_count"),
    "accum_vgprs": ("accum_vgpr_count",),
    "sgprs": ("sgpr_count",),
    "start_ns": ("start_timestamp",),
    "end_ns": ("end_timestamp",),
}
_INT_FIELDS = set(_COLUMNS) - {"kernel_name"}

RUNTIME_PREFIXES = ("__amd_rocclr_",)  # HIP runtime blit/fill kernels (hipMemcpy, hipMemset)
TORCH_HELPER = re.compile(r"\b(at::native::|at::cuda::|c10::|rocprim::|hipcub::)")


@dataclass(frozen=True)
class Dispatch:
    """One kernel dispatch; ``counters`` is empty for kernel-trace records."""

    dispatch_id: int
    kernel_name: str
    agent_id: int | None = None
    correlation_id: int | None = None
    queue_id: int | None = None
    grid_size: int | None = None  # work-items, all dimensions multiplied
    workgroup_size: int | None = None  # work-items per work-group
    lds_bytes: int | None = None
    scratch_bytes: int | None = None
    vgprs: int | None = None
    accum_vgprs: int | None = None
    sgprs: int | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    counters: dict[str, float] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int | None:
        """End minus start timestamp, when both were recorded."""
        if self.start_ns is None or self.end_ns is None:
            return None
        return self.end_ns - self.start_ns


def _to_int(raw: str | None) -> int | None:
    if raw is None or raw.strip() == "":
        return None
    if re.fullmatch(r"\s*-?\d+\s*", raw):  # exact for 16-digit nanosecond timestamps
        return int(raw)
    digits = re.search(r"-?\d+(\.\d*)?([eE][+-]?\d+)?", raw)  # "Agent 2" -> 2
    return int(float(digits.group(0))) if digits else None


def _rows(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    header = {name.strip().lower(): name for name in (reader.fieldnames or [])}
    return header, list(reader)


def _pick(row: dict[str, str], header: dict[str, str], names: Sequence[str]) -> str | None:
    for name in names:
        if name in header:
            return row.get(header[name])
    return None


def _product(row: dict[str, str], header: dict[str, str], stem: str) -> int | None:
    direct = _to_int(_pick(row, header, (stem,)))
    if direct is not None:
        return direct
    parts = [_to_int(_pick(row, header, (f"{stem}_{axis}",))) for axis in "xyz"]
    if any(p is None for p in parts):
        return None
    return parts[0] * parts[1] * parts[2]


def _dispatch_fields(row: dict[str, str], header: dict[str, str]) -> dict:
    values: dict = {}
    for name, aliases in _COLUMNS.items():
        raw = _pick(row, header, aliases)
        values[name] = raw if name == "kernel_name" else _to_int(raw)
    # kernel traces split sizes into _X/_Y/_Z; counter files give the total
    values["grid_size"] = _product(row, header, "grid_size")
    values["workgroup_size"] = _product(row, header, "workgroup_size")
    return values


def parse_kernel_trace(text: str) -> list[Dispatch]:
    """Dispatch records from kernel_trace.csv, sorted by dispatch id (pure)."""
    header, rows = _rows(text)
    out = [Dispatch(**_dispatch_fields(row, header)) for row in rows]
    return sorted(out, key=lambda d: d.dispatch_id)


def parse_counter_collection(text: str) -> list[Dispatch]:
    """Dispatch records from counter_collection.csv (one row per dispatch x counter), with
    the counters of each dispatch gathered in ``counters``, sorted by dispatch id (pure)."""
    header, rows = _rows(text)
    by_id: dict[int, Dispatch] = {}
    for row in rows:
        base = _dispatch_fields(row, header)
        name = _pick(row, header, ("counter_name",))
        value = _pick(row, header, ("counter_value",))
        dispatch = by_id.setdefault(base["dispatch_id"], Dispatch(**base))
        if name:
            dispatch.counters[name.strip()] = float(value)
    return [by_id[k] for k in sorted(by_id)]


def kernel_kind(name: str) -> str:
    """"runtime" for HIP runtime copy/fill kernels, "torch-helper" for PyTorch/rocPRIM
    elementwise and reduction kernels (input generation, checks), "other" for the rest."""
    if name.startswith(RUNTIME_PREFIXES):
        return "runtime"
    if TORCH_HELPER.search(name):
        return "torch-helper"
    return "other"


def kernels_of_interest(dispatches: Iterable[Dispatch], name_regex: str | None = None,
                        dispatch_range: tuple[int, int] | None = None) -> list[Dispatch]:
    """Keep the dispatches a benchmark timed: not runtime or PyTorch helper kernels, name
    matching ``name_regex`` (search) if given, and dispatch id within the inclusive
    ``dispatch_range`` if given (the caller knows which launches its timed region issued)."""
    pattern = re.compile(name_regex) if name_regex else None
    kept = []
    for d in dispatches:
        if kernel_kind(d.kernel_name) != "other":
            continue
        if pattern and not pattern.search(d.kernel_name):
            continue
        if dispatch_range and not dispatch_range[0] <= d.dispatch_id <= dispatch_range[1]:
            continue
        kept.append(d)
    return kept


def merge_passes(passes: Sequence[Sequence[Dispatch]]) -> list[Dispatch]:
    """Join the counters of several collection passes into one record per dispatch.

    Every pass is a separate run of the application, so dispatch (and correlation) ids are
    not comparable between passes: runtime and library kernels come and go (a lazy hipBLASLt
    init, a blit) and shift the numbering. What a deterministic benchmark does repeat is the
    sequence of launches of each kernel, so the n-th dispatch of kernel K in one pass is
    matched with the n-th dispatch of K in every other pass. Grid and work-group sizes must
    agree, otherwise the runs diverged and a ValueError is raised instead of mixing data.
    Ids, timestamps and metadata of the first pass are kept.
    """
    if not passes:
        return []

    def ordinal_keys(dispatches: Sequence[Dispatch]) -> dict[tuple[str, int], Dispatch]:
        seen: dict[str, int] = {}
        keyed = {}
        for d in sorted(dispatches, key=lambda d: d.dispatch_id):
            n = seen.get(d.kernel_name, 0)
            seen[d.kernel_name] = n + 1
            keyed[(d.kernel_name, n)] = d
        return keyed

    first = ordinal_keys(passes[0])
    merged = {key: dict(d.counters) for key, d in first.items()}
    for index, other in enumerate(passes[1:], start=2):
        keyed = ordinal_keys(other)
        if set(keyed) != set(first):
            raise ValueError(f"pass {index} dispatched a different set of kernels than pass 1")
        for key, d in keyed.items():
            ref = first[key]
            if (d.grid_size, d.workgroup_size) != (ref.grid_size, ref.workgroup_size):
                raise ValueError(f"pass {index}: dispatch {key[1]} of {key[0]!r} has another "
                                 "launch shape than in pass 1")
            merged[key].update(d.counters)
    out = [replace(d, counters=merged[key]) for key, d in first.items()]
    return sorted(out, key=lambda d: d.dispatch_id)


def read_pass_directories(root: Path) -> list[list[Dispatch]]:
    """Parse every ``pmc_N/**/*counter_collection.csv`` under ``root``, ordered by N."""
    def number(path: Path) -> int:
        return _to_int(path.name.split("_")[-1]) or 0

    passes = []
    for folder in sorted(root.glob("pmc_*"), key=number):
        files = sorted(folder.rglob("*counter_collection.csv"))
        dispatches: list[Dispatch] = []
        for f in files:
            dispatches += parse_counter_collection(f.read_text())
        passes.append(dispatches)
    return passes
