"""Numbers and labels as the site and the terminal show them.

Every number a page shows goes through here, so that no page prints a raw float: throughput
with a unit prefix and 3–4 significant digits, changes as signed percentages, shapes as
`512×512×512`. The driver's end-of-run table and PR markdown use the same helpers.
"""

from __future__ import annotations

import math
import re

from workers.core import status

_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"))


def sig(value: float | None, digits: int = 4) -> str:
    """`value` with at most `digits` significant digits ("—" for None): plain below 10^4,
    with a k/M/G/T prefix up to 10^15 ("123.5 k"), in e-notation beyond either end."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    value = float(f"{value:.{digits}g}")  # rounded first: 9999.5 is "10 k", not "10000"
    magnitude = abs(value)
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if 1e4 <= magnitude < 1e15 and magnitude >= factor:
            return f"{sig(value / factor, digits)} {prefix}"
    text = f"{value:.{digits}g}"
    if "e" in text and 1e-4 <= magnitude < 1e4:
        text = f"{value:.{max(digits - 1 - math.floor(math.log10(magnitude)), 0)}f}"
    return text


def rate(row: dict) -> float | None:
    """FLOP/s of a result row (bytes/s for ops that do no arithmetic), or None when not timed."""
    if not row.get("median_s"):
        return None
    work = row.get("flops") or row.get("bytes_moved") or 0.0
    return work / row["median_s"] if work else None


def unit_of(row: dict) -> str:
    return "FLOP/s" if row.get("flops") else "B/s"


def throughput(value: float | None, unit: str) -> str:
    """`697.5 TFLOP/s`, `2953 GB/s`: at most 4 significant digits, 3 below 100."""
    if not value:
        return "—"
    for scale, prefix in _PREFIXES:
        if value >= scale:
            scaled = value / scale
            return f"{scaled:.3g} {prefix}{unit}" if scaled < 100 else f"{scaled:.0f} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def format_rate(row: dict) -> str:
    """The throughput of a result row, or "—" when it was not timed."""
    return throughput(rate(row), unit_of(row))


def scale_for(top: float, unit: str) -> tuple[float, str]:
    """The divisor and unit (TFLOP/s, GB/s, ...) that keep values up to `top` readable."""
    for factor, prefix in _PREFIXES:
        if top >= factor:
            return factor, f"{prefix}{unit}"
    return 1.0, unit


def pct(change: float | None) -> str:
    """A relative change as `+1.2%` ("" for None)."""
    return "" if change is None else f"{change:+.1%}"


def short(sha: str | None) -> str:
    return (sha or "")[:10]


def shape_label(key: str) -> str:
    """`M=512,N=512,K=512` → `512×512×512` for tables."""
    if "=" not in (key or ""):
        return key or ""
    return "×".join(part.split("=", 1)[1] for part in key.split(","))


def seconds(value: float | None) -> str:
    """A duration with a unit: `1.234 ms`, `56.7 µs`."""
    if value is None:
        return "—"
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if value >= factor:
            return f"{sig(value / factor)} {unit}"
    return f"{sig(value / 1e-9)} ns"


def mem_bytes(value: float | None) -> str:
    """A memory size with a binary unit: `512 B`, `12.34 MiB`, `1.5 GiB` ("—" for None)."""
    if value is None:
        return "—"
    for factor, unit in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(value) >= factor:
            return f"{sig(value / factor)} {unit}"
    return f"{int(value)} B"


def mem_change(before: float | None, after: float | None) -> str:
    """`10 MiB → 12 MiB (+20.0%)`: a peak memory at base and head ("" when either is unknown)."""
    if before is None or after is None:
        return ""
    change = f" ({(after - before) / before:+.1%})" if before else ""
    return f"{mem_bytes(before)} → {mem_bytes(after)}{change}"


def anchor(*parts: str) -> str:
    """An HTML id for a series (`fail-cpp_naive-M_256_N_256_K_256-fp32-cpu_x`)."""
    return "fail-" + re.sub(r"[^A-Za-z0-9_-]+", "_", "-".join(p or "" for p in parts)).strip("_")


def status_class(value: str) -> str:
    """The CSS class of a status cell on every page: red for a failure (and a lost result),
    the status' own colour otherwise (a point that does not fit is no failure: grey, not red)."""
    return "fail" if value in status.FAILURES | status.INCOMPLETE else f"status-{value}"
