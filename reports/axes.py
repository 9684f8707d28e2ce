"""The axes view of a swept variant: its points' throughput laid out over the parameter axes.

A variant with `[params]` runs as one variant per point (`gemm[BLOCK_M=128,STAGES=3]`,
`workers.core.params`). Per family and (shape, dtype, device) this module turns the result rows of
one commit into an `AxesTable`: rows are the values of the first axis, columns the values of the
second (or the product of the remaining ones, labelled `STAGES=3,num_warps=8`); a family with one
axis is a single row. Each cell holds the point's throughput, % of peer and a heat share (its
throughput over the best point's), or the status of a point that did not measure. The best point
is marked. Plain functions from rows to records; `reports/templates/_axes.html.j2` renders them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from reports import format as fmt
from reports import metric_names
from workers.core import params, status


@dataclass(frozen=True)
class AxesCell:
    """One point of the table. rate is None unless the point measured ok (then status shows
    instead); share is rate over the best point's rate, 0..1, for the heat colour."""

    variant: str
    point: str  # `BLOCK_M=128,STAGES=3`: the point without its family
    status: str
    rate: float | None
    pct_of_peer: float | None
    text: str  # the number in the table's unit (`612`), or the status
    share: float | None
    best: bool = False
    # What limits the point, from its static analysis (`resource_line`): why a point is slow.
    why: str = ""

    @property
    def failed(self) -> bool:
        """Did not measure for a fault of its own: a point that does not fit the device is
        left out, not broken (`fits`)."""
        return (not status.measured(self.status) or self.rate is None) and self.fits

    @property
    def fits(self) -> bool:
        return self.status != status.DOES_NOT_FIT


@dataclass(frozen=True)
class AxesTable:
    """One family at one shape, dtype and device. row_axis is None for a family with one axis
    (its table is one row); columns label the values of col_axes ("STAGES=3" or "3" when there is
    one column axis); cells[i][j] is None where that point was not run."""

    family: str
    shape: str
    dtype: str
    device: str
    unit: str  # of the numbers in the cells: `TFLOP/s`
    axes: tuple[str, ...]
    row_axis: str | None
    col_axes: tuple[str, ...]
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    cells: tuple[tuple[AxesCell | None, ...], ...]
    best: AxesCell | None
    n_points: int
    n_failed: int
    n_unfit: int = 0  # points that do not fit the device (not counted in n_failed)

    @property
    def caption(self) -> str:
        """`best: BLOCK_M=128,STAGES=3 — 612 TFLOP/s`, or why there is no best point."""
        if self.best is None:
            unfit = f", {self.n_unfit} do not fit the device" if self.n_unfit else ""
            return f"no point measured: {self.n_failed} of {self.n_points} failed{unfit}"
        return f"best: {self.best.point} — {self.best.text} {self.unit}"


def point_label(name: str) -> str:
    """The point part of a variant's name (`BLOCK_M=128,STAGES=3`); "" for a plain variant."""
    _, axes = params.sweep_family(name)
    return ",".join(f"{k}={params.format_value(v)}" for k, v in axes.items())


def swept_groups(rows: Iterable[dict]) -> dict[tuple[str, str, str, str], list[dict]]:
    """Rows of swept families keyed by (family, shape, dtype, device), in row order; only
    families with at least two points at that key (one point is no sweep to lay out)."""
    groups: dict[tuple[str, str, str, str], list[dict]] = {}
    for r in rows:
        family, axes = params.sweep_family(r["variant"])
        if axes:
            groups.setdefault((family, r["shape"], r["dtype"], r["device"]), []).append(r)
    return {k: v for k, v in groups.items() if len({r["variant"] for r in v}) >= 2}


def tables(rows: Sequence[dict]) -> list[AxesTable]:
    """The axes tables of one commit's result rows (dicts with variant, shape, dtype, device,
    status, and `rate` / `pct_of_peer` as `pipeline.run.summary.with_peer` adds them), by family,
    then in the order the rows came (the commit page's shape order)."""
    groups = swept_groups(rows)
    order = sorted(groups, key=lambda k: k[0])  # stable: shapes keep the rows' order within a family
    return [table(*key, groups[key]) for key in order]


def table(family: str, shape: str, dtype: str, device: str, rows: Sequence[dict]) -> AxesTable:
    """The axes table of one family's rows at one shape, dtype and device."""
    points = _latest_per_point(rows)
    axes = _axes_in_order(points)
    values = {a: _values_in_order(points, a) for a in axes}
    best_row = max((r for r in points.values() if _rate(r)), key=_rate, default=None)
    top = _rate(best_row) if best_row else 0.0
    unit_row = best_row or next(iter(points.values()))
    factor, unit = fmt.scale_for(top, fmt.unit_of(unit_row)) if top else (1.0, fmt.unit_of(unit_row))

    def cell_of(row: dict | None) -> AxesCell | None:
        if row is None:
            return None
        rate = _rate(row)
        unfit = row["status"] == status.DOES_NOT_FIT
        text = fmt.sig(rate / factor, 3) if rate else ("does not fit" if unfit else row["status"])
        # A point that does not fit has no resources to show; the compiler's line says which limit.
        why = (row.get("diagnostic") or "").split("\n")[0] if unfit else resource_line(row.get("resources"))
        return AxesCell(row["variant"], point_label(row["variant"]), row["status"], rate, row.get("pct_of_peer"),
                        text, rate / top if rate else None, best=row is best_row, why=why)

    row_axis, col_axes = (None, axes) if len(axes) == 1 else (axes[0], axes[1:])
    row_keys = [((row_axis, v),) for v in values[row_axis]] if row_axis else [()]
    col_keys = list(itertools.product(*([(a, v) for v in values[a]] for a in col_axes)))
    by_point = {tuple(sorted(params.sweep_family(name)[1].items(), key=lambda kv: axes.index(kv[0]))): r
                for name, r in points.items()}
    cells = tuple(tuple(cell_of(by_point.get(_key(rk + ck, axes))) for ck in col_keys) for rk in row_keys)
    col_labels = tuple(",".join(f"{a}={params.format_value(v)}" if len(col_axes) > 1 else params.format_value(v)
                                for a, v in ck) for ck in col_keys)
    row_labels = tuple(params.format_value(rk[0][1]) for rk in row_keys) if row_axis else ("",)
    best = next((c for line in cells for c in line if c and c.best), None)
    unfit = sum(1 for r in points.values() if r["status"] == status.DOES_NOT_FIT)
    return AxesTable(family, shape, dtype, device, unit, axes, row_axis, col_axes, row_labels, col_labels, cells,
                     best, len(points), sum(1 for r in points.values() if not _rate(r)) - unfit, unfit)


def resource_line(resources: dict | None) -> str:
    """The figures that tell one point from another, of its kernel with the most shared memory
    (LDS): registers, shared memory, spills, and on AMD the waves per CU and what limits them —
    `255 regs · smem 144 KiB · spills 5300 B`, `VGPR 128 · LDS 64 KiB · 16 waves/CU (lds)`."""
    kernels = [k for k in ((resources or {}).get("kernels") or {}).values() if isinstance(k, dict)]
    if not kernels:
        return ""
    k = max(kernels, key=lambda x: x.get("smem_bytes") or x.get("lds_bytes") or 0)
    parts = []
    if k.get("registers") is not None:
        parts.append(f"{k['registers']} regs")
    if k.get("vgprs") is not None:
        parts.append(f"VGPR {k['vgprs']}" + (f" + AGPR {k['agprs']}" if k.get("agprs") else ""))
    for key, label in (("smem_bytes", "smem"), ("lds_bytes", "LDS")):
        if k.get(key):
            parts.append(f"{label} {metric_names.format_value('bytes', k[key])}")
    if k.get("spill_stores") or k.get("spill_loads"):
        parts.append(f"spills {max(k.get('spill_stores') or 0, k.get('spill_loads') or 0)} B")
    if k.get("vgpr_spill") or k.get("sgpr_spill"):
        parts.append(f"spills {(k.get('vgpr_spill') or 0) + (k.get('sgpr_spill') or 0)} regs")
    if k.get("waves_per_cu") is not None:
        parts.append(f"{k['waves_per_cu']:g} waves/CU" + (f" ({k['occupancy_limit']})" if k.get("occupancy_limit")
                                                          else ""))
    return " · ".join(parts)


def heat_colour(share: float | None) -> str:
    """A cell's background: white at no throughput to full green at the best point's. The
    scale starts at half the best so that the points worth a look stand apart."""
    if share is None:
        return ""
    strength = min(max((share - 0.5) / 0.5, 0.0), 1.0)
    return f"rgba(52, 168, 83, {0.08 + 0.5 * strength:.2f})"


def _rate(row: dict | None) -> float | None:
    if not row or not status.measured(row["status"]):
        return None
    return row.get("rate") if row.get("rate") is not None else fmt.rate(row)


def _latest_per_point(rows: Sequence[dict]) -> dict[str, dict]:
    """One row per point name; a later row (a re-run in the same list) replaces an earlier."""
    return {r["variant"]: r for r in rows}


def _axes_in_order(points: dict[str, dict]) -> tuple[str, ...]:
    """The axes as the point names list them (the manifest's order); an axis only some points
    have (a manifest edited between runs) comes after those all points share."""
    seen: list[str] = []
    for name in points:
        for axis in params.sweep_family(name)[1]:
            if axis not in seen:
                seen.append(axis)
    return tuple(seen)


def _values_in_order(points: dict[str, dict], axis: str) -> list:
    """An axis' values: numbers in numeric order, anything else as first seen."""
    found: list = []
    for name in points:
        value = params.sweep_family(name)[1].get(axis)
        if value is not None and value not in found:
            found.append(value)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in found):
        return sorted(found)
    return found


def _key(pairs: tuple, axes: tuple[str, ...]) -> tuple:
    return tuple(sorted(pairs, key=lambda kv: axes.index(kv[0])))
