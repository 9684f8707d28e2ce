"""Counters and resources under the names kernel developers use, with units and precision.

flopwatch stores counters under short names (`l1_hit_pct`, from the per-architecture formula
tables in `workers/cuda/ncu_metrics_sm90.toml` and `workers/rocm/counters_gfx942.toml`) and
resources as the build's static analysis (`kernels.<kernel>.vgprs`, ...). Pages show them as
"vL1D hit 50.4%", "VGPR 128", "LDS 64 KiB", "MFMA 4.2 M"; the tooltip names flopwatch's metric
and where its value comes from (the formula and its source for counters). The commit, compare,
trend and bisect pages all go through `display`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from reports.format import sig

# kind decides the formatting: pct (3 significant digits + %), count (k/M/G), bytes (KiB/MiB),
# int (a whole number), dec1 (one decimal), ns (a duration), num (4 significant digits).
# Labels that differ by vendor are (nvidia, amd).
_COUNTERS: dict[str, tuple[str | tuple[str, str], str]] = {
    "l1_hit_pct": (("L1 hit", "vL1D hit"), "pct"),
    "l2_hit_pct": ("L2 hit", "pct"),
    "coalescing_pct": ("coalescing", "pct"),
    "async_copy_bytes": ("cp.async loads", "bytes"),
    "tma_load_bytes": ("TMA loads", "bytes"),
    "sectors_per_request": ("sectors/request", "num"),
    "occupancy_pct": ("occupancy", "pct"),
    "warps_per_sm": ("warps/SM", "dec1"),
    "occupancy_waves": ("waves (GPU)", "count"),
    "waves_per_cu": ("waves/CU", "dec1"),
    "tensor_insts": ("tensor insts", "count"),
    "mfma_insts": ("MFMA", "count"),
    "mfma_bf16_insts": ("MFMA bf16", "count"),
    "mfma_f16_insts": ("MFMA f16", "count"),
    "mfma_f32_insts": ("MFMA f32", "count"),
    "mfma_f64_insts": ("MFMA f64", "count"),
    "mfma_i8_insts": ("MFMA i8", "count"),
    "mfma_f8_insts": ("MFMA f8", "count"),
    "mfma_bf16_flop": ("MFMA bf16 FLOP", "count"),
    "dram_bytes": ("DRAM traffic", "bytes"),
    "registers_per_thread": ("registers/thread", "int"),
    "smem_per_block": ("shared mem/block", "bytes"),
    "lds_alloc": ("LDS", "bytes"),
    "vgprs": ("VGPR", "int"),
    "lds_bank_conflicts_per_access": ("LDS bank conflicts/access", "num"),
    "lds_bank_conflict_pct": ("LDS bank conflicts", "pct"),
    "lds_conflict_cycles_per_inst": ("LDS conflict cycles/inst", "num"),
    "duration_ns": ("duration", "ns"),
}

_RESOURCES: dict[str, tuple[str, str, str]] = {
    # name: (label, kind, where the value comes from)
    "registers": ("registers", "int", "ptxas --resource-usage (workers/cuda/resource_usage.py)"),
    "smem_bytes": ("smem static", "bytes", "ptxas --resource-usage: static shared memory per block (the compiler's)"),
    "smem_alloc_bytes": ("smem allocated", "bytes", ("static + dynamic shared memory + the driver's reserved 1 KiB per "
                         "block, rounded up to 128 B: what the occupancy calculation allocates (cuda_occupancy.h)")),
    "stack_bytes": ("stack", "bytes", "ptxas --resource-usage"),
    "spill_stores": ("spill stores", "bytes", "ptxas --resource-usage"),
    "spill_loads": ("spill loads", "bytes", "ptxas --resource-usage"),
    "sass_insts": ("SASS insts", "count", "cuobjdump -sass histogram (workers/cuda/sass.py)"),
    "tensor_insts": ("tensor insts", "count", "cuobjdump -sass: HMMA/GMMA instructions in the binary"),
    "lds_insts": ("LDS insts", "count", "cuobjdump -sass: shared-memory loads"),
    "ldsm_insts": ("LDSM insts", "count", "cuobjdump -sass: ldmatrix"),
    "vgprs": ("VGPR", "int", "compiler remarks / code-object notes (workers/backends/hip.py)"),
    "agprs": ("AGPR", "int", "compiler remarks / code-object notes"),
    "sgprs": ("SGPR", "int", "compiler remarks / code-object notes"),
    "lds_static_bytes": ("LDS static", "bytes", ("the compiler's static LDS per workgroup (code-object notes "
                         "group_segment_fixed_size / remark LDS Size)")),
    "lds_bytes": ("LDS allocated", "bytes", ("static + dynamic LDS rounded up to 512-byte granules: what the CDNA3 "
                  "occupancy model allocates per workgroup (workers/rocm/occupancy.py)")),
    "lds_dynamic_bytes": ("LDS dynamic", "bytes", ("LDS the launch requests (variant.toml [launch] dynamic_lds_bytes; "
                          "Triton's metadata.shared)")),
    "smem_dynamic_bytes": ("smem dynamic", "bytes", ("shared memory the launch requests (variant.toml [launch] "
                           "dynamic_smem_bytes; Triton's metadata.shared)")),
    "scratch_bytes": ("scratch", "bytes", "compiler remarks / code-object notes"),
    "vgpr_spill": ("VGPR spill", "int", "compiler remarks / code-object notes"),
    "sgpr_spill": ("SGPR spill", "int", "compiler remarks / code-object notes"),
    "waves_per_simd": ("waves/SIMD", "dec1", "CDNA3 occupancy model (workers/rocm/occupancy.py)"),
    "waves_per_cu": ("waves/CU", "dec1", "CDNA3 occupancy model (workers/rocm/occupancy.py)"),
    "mfma_insts": ("MFMA", "count", "disassembly: MFMA instructions in the code object"),
    "ds_reads": ("ds_read", "count", "disassembly"),
    "ds_writes": ("ds_write", "count", "disassembly"),
    "s_waitcnt": ("s_waitcnt", "count", "disassembly"),
}


@dataclass(frozen=True)
class Shown:
    """One metric as a page shows it: `label` and `text` ("vL1D hit", "50.4%"); `name` is
    flopwatch's metric (`counters.l1_hit_pct`) and `source` its formula or origin."""

    label: str
    text: str
    name: str
    source: str = ""

    @property
    def tooltip(self) -> str:
        return f"flopwatch metric: {self.name}" + (f"; {self.source}" if self.source else "")

    def __str__(self) -> str:
        return f"{self.label} {self.text}"


def vendor_of(device: str | None, resources: dict | None = None) -> str:
    """"nvidia", "amd" or "" from a device key (`cuda:...`, `rocm:...`) or the build's analysis."""
    head = (device or "").split(":", 1)[0]
    if head == "cuda":
        return "nvidia"
    if head == "rocm":
        return "amd"
    return str((resources or {}).get("vendor") or "")


def format_value(kind: str, value: float) -> str:
    """`value` in the unit of `kind` (see the tables above)."""
    if kind == "pct":
        return f"{value:.3g}%"
    if kind == "int":
        return f"{value:.0f}"
    if kind == "dec1":
        return f"{value:.1f}"
    if kind == "bytes":
        for factor, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if abs(value) >= factor:
                return f"{sig(value / factor, 3)} {unit}"
        return f"{value:.0f} B"
    if kind == "count":
        for factor, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= factor:
                scaled = value / factor
                return f"{scaled:.1f} {unit}" if scaled < 100 else f"{scaled:.0f} {unit}"
        return f"{value:.0f}"
    if kind == "ns":
        return f"{sig(value / 1e3, 3)} µs" if value >= 1e3 else f"{value:.0f} ns"
    return sig(value)


@functools.cache
def _formulas(vendor: str) -> dict[str, str]:
    """flopwatch counter name → "formula — source" from the shipped per-architecture table."""
    if vendor == "nvidia":
        from workers.cuda.metrics import load_table

        return {n: f"{f.expr} (Nsight Compute; workers/cuda/ncu_metrics_sm90.toml)"
                for n, f in load_table("sm90").items()}
    if vendor == "amd":
        from workers.rocm.metrics import load_metric_table

        return {n: f"{m.formula}" + (f" — {m.source}" if m.source else "") +
                " (rocprofv3; workers/rocm/counters_gfx942.toml)" for n, m in load_metric_table("gfx942").metrics.items()}
    return {}


def counter(name: str, value: float, vendor: str = "") -> Shown:
    """A profiler counter stored as `counters[name]`."""
    label, kind = _COUNTERS.get(name, (name.replace("_", " "), "num"))
    if isinstance(label, tuple):
        label = label[1] if vendor == "amd" else label[0]
    formula = _formulas(vendor).get(name) or next((f for v in ("nvidia", "amd") if (f := _formulas(v).get(name))), "")
    return Shown(label, format_value(kind, value), f"counters.{name}", f"formula: {formula}" if formula else "")


def resource(name: str, value: float, kernel: str = "") -> Shown:
    """A static-analysis figure stored as `resources.kernels[kernel][name]`."""
    label, kind, source = _RESOURCES.get(name, (name.replace("_", " "), "num", "static analysis of the build"))
    path = f"resources.kernels.{kernel}.{name}" if kernel else f"resources.{name}"
    return Shown(label, format_value(kind, value), path, f"from {source}")


def flat(name: str, value: float, vendor: str = "") -> Shown:
    """A flattened name as compare and the trend panels carry it (`kernels.k.vgprs`,
    `l1_hit_pct`): resources under `kernels.<kernel>.`, counters at the top."""
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "kernels":
        shown = resource(parts[2], value, parts[1])
        return Shown(f"{parts[1]}: {shown.label}", shown.text, shown.name, shown.source)
    return counter(name, value, vendor)


def unit_kind(name: str) -> str:
    """The formatting kind of a flattened name (for axis units of the trend panels)."""
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "kernels":
        return _RESOURCES.get(parts[2], ("", "num", ""))[1]
    return _COUNTERS.get(name, ("", "num"))[1]


# (compiler's static figure, the allocation the occupancy model uses, label): shown together as
# "LDS 4160 B, 4608 B allocated", so a reader knows which number is which.
_STATIC_AND_ALLOCATED = (("lds_static_bytes", "lds_bytes", "LDS"), ("smem_bytes", "smem_alloc_bytes", "smem"))


def kernels(resources: dict | None) -> list[tuple[str, list[Shown]]]:
    """Per kernel of a result's resources, its numeric figures (non-numbers such as `arch`
    and nested tables are left out); a static size and its allocation are one figure."""
    out = []
    for kname, k in ((resources or {}).get("kernels") or {}).items():
        if not isinstance(k, dict):
            continue
        numbers = {key: v for key, v in k.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        pairs = {static: (alloc, label) for static, alloc, label in _STATIC_AND_ALLOCATED
                 if static in numbers and alloc in numbers}
        shown = []
        for key, v in numbers.items():
            if key in pairs:
                shown.append(static_and_allocated(pairs[key][1], v, numbers[pairs[key][0]], kname, key, pairs[key][0]))
            elif key not in {alloc for alloc, _ in pairs.values()}:
                shown.append(resource(key, float(v), kname))
        out.append((kname, shown))
    return out


def static_and_allocated(label: str, static: float, allocated: float, kernel: str, static_key: str,
                         alloc_key: str) -> Shown:
    """"LDS 4160 B, 4608 B allocated": exact bytes, the compiler's figure first."""
    text = f"{static:.0f} B" if static == allocated else f"{static:.0f} B, {allocated:.0f} B allocated"
    return Shown(label, text, f"resources.kernels.{kernel}.{static_key} / {alloc_key}",
                 f"from {_RESOURCES[static_key][2]}; allocated: {_RESOURCES[alloc_key][2]}")


def counters(values: dict | None, vendor: str = "") -> list[Shown]:
    """A result's numeric counters (the kernel-name list and other text are left out), and a
    counter the profiler could not give with its reason (`coalescing_na`: "coalescing n/a: ...")."""
    values = values or {}
    shown = [counter(k, float(v), vendor) for k, v in values.items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for key, why in values.items():
        if key.endswith("_na") and isinstance(why, str):
            base = counter(key[:-3] + "_pct" if key[:-3] + "_pct" in _COUNTERS else key[:-3], 0.0, vendor)
            shown.append(Shown(base.label, why, f"counters.{key}", base.source))
    return shown


def legend(rows: list[dict]) -> list[Shown]:
    """One entry per metric label shown for `rows` (result dicts), with its flopwatch name
    (kernel name generalised) and source: the legend under a results table."""
    seen: dict[tuple[str, str], Shown] = {}
    for r in rows:
        vendor = vendor_of(r.get("device"), r.get("resources"))
        for _, items in kernels(r.get("resources")):
            for m in items:
                general = "resources.kernels.<kernel>." + m.name.rsplit(".", 1)[-1]
                seen.setdefault((m.label, general), Shown(m.label, "", general, m.source))
        for m in counters(r.get("counters"), vendor):
            seen.setdefault((m.label, m.name), m)
    return sorted(seen.values(), key=lambda m: (not m.name.startswith("resources"), m.label.lower()))
