"""Map a profiled launch's raw Nsight Compute metrics to flopwatch's short names through a
per-architecture table (``ncu_metrics_sm90.toml``): vendor names live in data, not in code."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workers.core.formula import ExpressionError, evaluate, names

_HERE = Path(__file__).parent
FUNCTIONS = {"min": min, "max": max}


@dataclass(frozen=True)
class MetricFormula:
    """One short metric: its ncu expression, fallback expressions tried in order when a metric
    of the one before was not collected (older reports), and its unit."""

    name: str
    expr: str
    fallback: str | tuple[str, ...] | None
    unit: str

    @property
    def expressions(self) -> tuple[str, ...]:
        fallbacks = (self.fallback,) if isinstance(self.fallback, str) else tuple(self.fallback or ())
        return (self.expr, *fallbacks)


def parse_table(text: str) -> dict[str, MetricFormula]:
    """Formulas of a metric table (TOML text); checks that every expression parses."""
    data = tomllib.loads(text)
    table = {}
    for name, entry in data["metrics"].items():
        fallback = entry.get("fallback")
        formula = MetricFormula(name, entry["expr"], tuple(fallback) if isinstance(fallback, list) else fallback,
                                entry.get("unit", ""))
        for expression in formula.expressions:
            names(expression)  # raises ExpressionError now rather than when a report is derived
        table[name] = formula
    return table


def load_table(arch: str = "sm90") -> dict[str, MetricFormula]:
    """The table shipped for ``arch`` ('sm90' -> ncu_metrics_sm90.toml)."""
    return parse_table((_HERE / f"ncu_metrics_{arch}.toml").read_text())


def required_metrics(table: Mapping[str, MetricFormula]) -> list[str]:
    """Every raw metric any formula or fallback reads: the list to pass to ``ncu --metrics``."""
    wanted: list[str] = []
    for formula in table.values():
        for expression in formula.expressions:
            wanted += names(expression)
    return list(dict.fromkeys(wanted))


def derive(raw: Mapping[str, float], table: Mapping[str, MetricFormula]) -> dict[str, float]:
    """Short-name values of one launch. A metric whose expression and fallback both need a raw
    metric that was not collected is left out (never reported as 0); a division by zero (a kernel
    with no global loads has no coalescing) is left out too."""
    derived = {}
    for name, formula in table.items():
        for expr in formula.expressions:
            if not all(n in raw for n in names(expr)):
                continue
            try:
                derived[name] = float(evaluate(expr, raw, FUNCTIONS))
            except (ZeroDivisionError, ExpressionError):
                pass
            break
    return derived
