"""Evaluate the counter formulas of ``counters_<arch>.toml`` for one dispatch.

Formulas are evaluated by the project's safe evaluator (``workers.core.formula``, shared with the
ncu metric table): numbers, names, parentheses and + - * /, no function the table does not
allow, no attribute access. A division by zero yields None, as rocprofiler-compute's
``... if (denominator != 0) else None`` does.
"""
from __future__ import annotations

import csv
import io
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workers.core.formula import evaluate as formula_eval
from workers.core.formula import names as formula_var_names

from .rocprof import Dispatch

_HERE = Path(__file__).resolve().parent
_CHANNEL = re.compile(r"^(?P<name>[A-Za-z0-9_]+)\[(?P<index>\d+)\]$")
DISPATCH_FIELDS = ("Start_Timestamp", "End_Timestamp", "LDS_Block_Size", "VGPR_Count",
                   "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size", "Grid_Size")


@dataclass(frozen=True)
class MetricDef:
    """One named metric: its formula and where the formula comes from."""

    name: str
    formula: str
    unit: str = ""
    source: str = ""


@dataclass(frozen=True)
class MetricTable:
    """All metrics of one architecture plus default system constants."""

    arch: str
    constants: dict[str, float]
    metrics: dict[str, MetricDef]


def load_metric_table(arch: str = "gfx942", path: Path | None = None) -> MetricTable:
    """Read ``counters_<arch>.toml`` (next to this module unless ``path`` is given)."""
    path = path or _HERE / f"counters_{arch}.toml"
    data = tomllib.loads(path.read_text())
    metrics = {name: MetricDef(name=name, **spec) for name, spec in data["metrics"].items()}
    return MetricTable(data["arch"], dict(data.get("constants", {})), metrics)


def formula_names(formula: str) -> set[str]:
    """Every variable name a formula reads (raises ExpressionError, a ValueError, when the
    formula does not parse)."""
    return set(formula_var_names(formula))


def required_counters(table: MetricTable, metric_names: list[str]) -> list[str]:
    """Hardware counters needed by the given metrics: names that are neither system
    constants nor dispatch fields, sorted."""
    needed: set[str] = set()
    for name in metric_names:
        needed |= formula_names(table.metrics[name].formula)
    return sorted(needed - set(table.constants) - set(DISPATCH_FIELDS))


def evaluate(formula: str, values: Mapping[str, float]) -> float | None:
    """Value of ``formula`` over ``values`` (the shared safe evaluator, ``workers.core.formula``);
    None on division by zero; KeyError when a counter or constant is missing."""
    missing = [n for n in formula_names(formula) if n not in values]
    if missing:
        raise KeyError(f"counter or constant {missing[0]!r} was not collected")
    try:
        return float(formula_eval(formula, values))
    except ZeroDivisionError:
        return None


def dispatch_values(dispatch: Dispatch) -> dict[str, float]:
    """Counters of a dispatch plus its record fields under rocprofv3's column names."""
    fields = {"Start_Timestamp": dispatch.start_ns, "End_Timestamp": dispatch.end_ns,
              "LDS_Block_Size": dispatch.lds_bytes, "VGPR_Count": dispatch.vgprs,
              "Accum_VGPR_Count": dispatch.accum_vgprs, "SGPR_Count": dispatch.sgprs,
              "Workgroup_Size": dispatch.workgroup_size, "Grid_Size": dispatch.grid_size}
    values = {k: float(v) for k, v in fields.items() if v is not None}
    values.update(dispatch.counters)
    return values


def compute_metrics(table: MetricTable, values: Mapping[str, float],
                    constants: Mapping[str, float] | None = None,
                    names: list[str] | None = None) -> dict[str, float | None]:
    """Evaluate the named metrics (all by default) whose inputs are all present."""
    scope = {**table.constants, **(constants or {}), **values}
    out: dict[str, float | None] = {}
    for name in names or list(table.metrics):
        formula = table.metrics[name].formula
        if formula_names(formula) <= set(scope):
            out[name] = evaluate(formula, scope)
    return out


def sum_channels(row: Mapping[str, str]) -> dict[str, float]:
    """Numeric columns of a rocprof-compute ``pmc_perf.csv`` row, with ``NAME_sum`` added as
    the sum of per-channel ``NAME[n]`` columns where the row lacks it. A recorded ``_sum``
    column is kept as is: it may come from another pass than the channels."""
    values: dict[str, float] = {}
    channels: dict[str, float] = {}
    for key, raw in row.items():
        try:
            number = float(raw)
        except (TypeError, ValueError):
            continue
        m = _CHANNEL.match(key)
        if m:
            channels[m.group("name")] = channels.get(m.group("name"), 0.0) + number
        else:
            values[key] = number
    for name, total in channels.items():
        values.setdefault(f"{name}_sum", total)
    return values


def system_constants(sysinfo_csv: str) -> dict[str, float]:
    """cu_count, num_xcd, max_waves_per_cu (and clocks) from a rocprof-compute sysinfo.csv."""
    row = next(csv.DictReader(io.StringIO(sysinfo_csv)))
    mapping = {"cu_count": "cu_per_gpu", "num_xcd": "num_xcd",
               "max_waves_per_cu": "max_waves_per_cu", "max_sclk": "max_sclk",
               "simd_per_cu": "simd_per_cu"}
    return {ours: float(row[theirs]) for ours, theirs in mapping.items() if row.get(theirs)}
