"""The size axis of a commit's results: per op, dtype and device, every variant's throughput at
each of its timed sizes, side by side.

A variant timed at several sizes (`shapes`, a challenge problem's `benchmarks:`) has one series
per size: a size is a measurement, not an alternative, so every size is kept (by `run --points
best` too) and none is "the best". Across variants, the sizes are where they are compared: a
table's columns are the op's sizes in size order, its rows the variants (the peer among them;
a swept family as its best point at each size, named, as on the dashboard: its points are laid
out per size in the axes view, `reports.axes`), and at each size the fastest row is marked and
the others shaded against it. Only ops with a variant timed at two sizes or more get a table.
Plain functions from rows to records; `reports/templates/_sizes.html.j2` renders them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reports import format as fmt
from reports.axes import point_label
from workers.core import params, status


@dataclass(frozen=True)
class SizeCell:
    """One variant at one size: its throughput (None unless it measured; then `text` is its
    status), % of peer, and its share of the fastest row's throughput at that size (0..1)."""

    variant: str
    shape: str
    status: str
    rate: float | None
    pct_of_peer: float | None
    text: str
    share: float | None
    best: bool = False
    point: str = ""  # a swept family's point standing for it at this size (`BLOCK_M=128,STAGES=3`)


@dataclass(frozen=True)
class SizeTable:
    """One op at one dtype and device: `sizes` (shape keys, smallest first) by `labels` (a
    variant, or a swept family); cells[i][j] is None where row i was not run at size j."""

    op: str
    dtype: str
    device: str
    unit: str
    sizes: tuple[str, ...]
    labels: tuple[str, ...]
    peers: tuple[bool, ...]
    cells: tuple[tuple[SizeCell | None, ...], ...]

    @property
    def axis(self) -> str:
        """The sizes' names (`size`, `m,n,k`), from the first size's key."""
        return ",".join(part.split("=", 1)[0] for part in self.sizes[0].split(",")) if self.sizes else ""


def size_order(key: str) -> tuple:
    """Shape keys by their number of elements, then as written (`size=256` before `size=1024`)."""
    values = [int(v) for v in (p.partition("=")[2] for p in key.split(",")) if v.lstrip("-").isdigit()]
    return (math.prod(values) if values else 0, key)


def tables(rows: Sequence[dict]) -> list[SizeTable]:
    """The size tables of one commit's result rows (dicts with variant, op, shape, dtype, device,
    status, peer and `rate` / `pct_of_peer` as `pipeline.run.summary.with_peer` adds them)."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        if r.get("shape") and r.get("op"):
            groups.setdefault((r["op"], r["dtype"], r["device"]), []).append(r)
    out = []
    for key in sorted(groups):
        members = groups[key]
        by_label: dict[str, dict[str, list[dict]]] = {}
        for r in members:
            by_label.setdefault(params.family_of(r["variant"]), {}).setdefault(r["shape"], []).append(r)
        if not any(len(sizes) >= 2 for sizes in by_label.values()) or not any(_rate(r) for r in members):
            continue  # no variant of the op was timed at two sizes here (or none measured): nothing to lay out
        out.append(_table(*key, by_label))
    return out


def _table(op: str, dtype: str, device: str, by_label: dict[str, dict[str, list[dict]]]) -> SizeTable:
    sizes = sorted({s for per in by_label.values() for s in per}, key=size_order)
    chosen = {label: {s: _standing(rs) for s, rs in per.items()} for label, per in by_label.items()}
    peers = {label: any(r.get("peer") for per in by_label[label].values() for r in per) for label in by_label}
    labels = sorted(chosen, key=lambda label: (not peers[label], label))
    fastest = {s: max((_rate(c[s]) or 0.0 for c in chosen.values() if s in c), default=0.0) for s in sizes}
    measured = [r for c in chosen.values() for r in c.values() if _rate(r)]
    unit_row = max(measured, key=_rate) if measured else next(r for c in chosen.values() for r in c.values())
    factor, unit = fmt.scale_for(_rate(unit_row) or 0.0, fmt.unit_of(unit_row)) if measured else \
        (1.0, fmt.unit_of(unit_row))
    several = len(labels) > 1

    def cell(label: str, size: str) -> SizeCell | None:
        r = chosen[label].get(size)
        if r is None:
            return None
        rate = _rate(r)
        top = fastest[size]
        return SizeCell(r["variant"], size, r["status"], rate, r.get("pct_of_peer"),
                        fmt.sig(rate / factor, 3) if rate else r["status"],
                        rate / top if rate and top and several else None,
                        best=bool(several and rate and rate == top), point=point_label(r["variant"]))

    cells = tuple(tuple(cell(label, s) for s in sizes) for label in labels)
    return SizeTable(op, dtype, device, unit, tuple(sizes), tuple(labels), tuple(peers[label] for label in labels),
                     cells)


def _standing(rows: list[dict]) -> dict:
    """The row that stands for a variant (or a swept family) at one size: the fastest measured
    point, else the first by name (its status is the news)."""
    measured = [r for r in rows if _rate(r)]
    return max(measured, key=_rate) if measured else min(rows, key=lambda r: r["variant"])


def _rate(row: dict | None) -> float | None:
    if not row or not status.measured(row["status"]):
        return None
    return row.get("rate") if row.get("rate") is not None else fmt.rate(row)
