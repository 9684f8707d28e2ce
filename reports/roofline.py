"""The roofline of a commit page: per op, dtype and device, every variant's achieved FLOP/s against
its arithmetic intensity, under the ceilings that bound it.

Method (Williams, Waterman & Patterson, "Roofline: an insightful visual performance model for
multicore architectures", CACM 52(4), 2009): a kernel doing F FLOPs while moving Q bytes has
arithmetic intensity I = F / Q and can reach at most min(P, B · I), with P the peak compute rate
and B the memory bandwidth. flopwatch counts F and Q per op (`workers/ops`: GEMM 2·M·N·K FLOPs,
inputs read once and the output written once), so I is the op's, not a measured traffic.

Two pairs of ceilings, labelled which is which:
- spec: P for the series' dtype and B from the vendor's data sheet (`reports.device_specs`);
- measured: P = the best FLOP/s of the op's peer (torch.matmul) and B = the best B/s of any
  memory-bound op (a copy: no FLOPs) on the same device in the same run, the rates this machine
  actually reached that night.
A device without a data-sheet entry (a CPU) shows only the measured roof. Ops without FLOPs
(copies) have no point on a roofline: they give the measured bandwidth. Everything here is pure;
`reports.site` draws the figures on the commit page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reports import figures
from reports.device_specs import spec_of
from reports.format import shape_label, throughput
from workers.core import status
from workers.core.params import FORWARD, mode_of

SPEC, MEASURED = "spec", "measured"


@dataclass(frozen=True)
class Ceiling:
    """One bound: kind "compute" (FLOP/s) or "bandwidth" (B/s), from SPEC or MEASURED, and what
    it is (the data sheet, or the variant and shape that reached it)."""

    kind: str
    source: str
    value: float
    what: str

    @property
    def label(self) -> str:
        unit = "FLOP/s" if self.kind == "compute" else "B/s"
        return f"{self.source} {self.kind}: {throughput(self.value, unit)} ({self.what})"


@dataclass(frozen=True)
class RooflinePoint:
    """One result: intensity in FLOP/byte, achieved FLOP/s."""

    variant: str
    shape: str
    peer: bool
    intensity: float
    flops_per_s: float


@dataclass(frozen=True)
class Roofline:
    """The points of one op, dtype and device, and the ceilings drawn over them; run is the run
    whose peer and copy gave the measured ceilings."""

    op: str
    dtype: str
    device: str
    run_id: int | None
    points: tuple[RooflinePoint, ...]
    ceilings: tuple[Ceiling, ...]

    def roof(self, source: str) -> tuple[float | None, float | None]:
        """(compute, bandwidth) ceiling values of one source; None where it has none."""
        by_kind = {c.kind: c.value for c in self.ceilings if c.source == source}
        return by_kind.get("compute"), by_kind.get("bandwidth")


def _ok(row: dict) -> bool:
    """A measured forward row: a backward or full pass does other work than the op's count (its
    FLOPs and bytes are the forward's), so it has no place on a roofline."""
    return status.measured(row.get("status")) and bool(row.get("median_s")) and mode_of(row["variant"]) == FORWARD


def rooflines(rows: Sequence[dict]) -> list[Roofline]:
    """The rooflines of one commit's result rows (dicts as the store returns them)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if _ok(r) and (r.get("flops") or 0) > 0 and (r.get("bytes_moved") or 0) > 0:
            groups.setdefault((r.get("op") or "", r["dtype"], r["device"]), []).append(r)
    out = []
    for (op, dtype, device), members in sorted(groups.items()):
        run = max((r.get("run_id") or 0 for r in members), default=0) or None
        points = tuple(RooflinePoint(r["variant"], r["shape"], bool(r.get("peer")), r["flops"] / r["bytes_moved"],
                                     r["flops"] / r["median_s"]) for r in members)
        ceilings = []
        spec = spec_of(device)
        if spec and dtype in spec.peak_flops:
            ceilings.append(Ceiling("compute", SPEC, spec.peak_flops[dtype], f"{spec.name}, {dtype}: {spec.source}"))
        if spec:
            ceilings.append(Ceiling("bandwidth", SPEC, spec.bandwidth, f"{spec.name}: {spec.source}"))
        same_run = [r for r in rows if _ok(r) and r["device"] == device and (r.get("run_id") or None) == run]
        peers = [r for r in same_run if r.get("peer") and (r.get("op") or "") == op and r["dtype"] == dtype
                 and (r.get("flops") or 0) > 0]
        if peers:
            best = max(peers, key=lambda r: r["flops"] / r["median_s"])
            ceilings.append(Ceiling("compute", MEASURED, best["flops"] / best["median_s"],
                                    f"best peer: {best['variant']} {shape_label(best['shape'])}"))
        copies = [r for r in same_run if not (r.get("flops") or 0) and (r.get("bytes_moved") or 0) > 0]
        if copies:
            best = max(copies, key=lambda r: r["bytes_moved"] / r["median_s"])
            ceilings.append(Ceiling("bandwidth", MEASURED, best["bytes_moved"] / best["median_s"],
                                    f"best copy: {best['variant']} {shape_label(best['shape'])}"))
        out.append(Roofline(op, dtype, device, run, points, tuple(ceilings)))
    return out


def attainable(compute: float | None, bandwidth: float | None, intensity: float) -> float | None:
    """min(P, B · I), with whichever bound is known."""
    bounds = [b for b in (compute, bandwidth * intensity if bandwidth else None) if b]
    return min(bounds) if bounds else None


_STYLE = {SPEC: {"color": "#444444", "dash": "solid"}, MEASURED: {"color": "#b3261e", "dash": "dash"}}


def figure(roofline: Roofline) -> dict:
    """A log-log plotly spec: the spec roof (solid), the measured roof (dashed), the points
    (the peer as a diamond), hover with % of each roof."""
    xs = [p.intensity for p in roofline.points]
    ridges = []
    for source in (SPEC, MEASURED):
        compute, bandwidth = roofline.roof(source)
        if compute and bandwidth:
            ridges.append(compute / bandwidth)
    lo = min(xs + ridges) / 4
    hi = max(xs + ridges) * 4
    top = max([p.flops_per_s for p in roofline.points] + [c.value for c in roofline.ceilings if c.kind == "compute"])
    factor, unit = 1e12, "TFLOP/s"
    if top < 1e12:
        factor, unit = 1e9, "GFLOP/s"
    data = []
    for source in (SPEC, MEASURED):
        compute, bandwidth = roofline.roof(source)
        if not compute and not bandwidth:
            continue
        grid = [lo * (hi / lo) ** (i / 60) for i in range(61)]
        if compute and bandwidth:
            grid = sorted(set(grid) | {compute / bandwidth})
        ys = [attainable(compute, bandwidth, x) / factor for x in grid]
        data.append({"type": "scatter", "mode": "lines", "x": [figures._r(x) for x in grid],
                     "y": [figures._r(y) for y in ys], "name": f"{source} roof", "line": {"width": 2, **_STYLE[source]},
                     "hovertemplate": f"{source} roof<br>%{{x:.3g}} FLOP/B: %{{y:.4g}} {unit}<extra></extra>",
                     "legendgroup": source})
    spec_roof, measured_roof = roofline.roof(SPEC), roofline.roof(MEASURED)
    for peer in (True, False):
        mine = [p for p in roofline.points if p.peer == peer]
        if not mine:
            continue
        shares = []
        for p in mine:
            parts = []
            for source, roof in ((SPEC, spec_roof), (MEASURED, measured_roof)):
                bound = attainable(*roof, p.intensity)
                if bound:
                    parts.append(f"{100 * p.flops_per_s / bound:.3g}% of the {source} roof")
            shares.append("; ".join(parts))
        # Only the peer is named on the plot: a suite's dozens of variants would be unreadable
        # labels; the hover names each point.
        data.append({"type": "scatter", "mode": "markers+text" if peer else "markers", "name": "peer" if peer else "variants",
                     "x": [figures._r(p.intensity) for p in mine], "y": [figures._r(p.flops_per_s / factor) for p in mine],
                     "text": [p.variant if peer else "" for p in mine], "textposition": "top center",
                     "textfont": {"size": 10},
                     "customdata": [[p.variant, shape_label(p.shape), s] for p, s in zip(mine, shares)],
                     "marker": {"size": 10 if peer else 8, "symbol": "diamond" if peer else "circle",
                                "color": "#1f77b4" if not peer else "#137333"},
                     "hovertemplate": "%{customdata[0]} %{customdata[1]}<br>%{x:.3g} FLOP/B, %{y:.4g} " + unit
                                      + "<br>%{customdata[2]}<extra></extra>"})
    return {"data": data, "layout": {
        "xaxis": {"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}},
        "yaxis": {"type": "log", "title": {"text": unit}},
        "legend": {"orientation": "h", "y": -0.2}, "margin": {"t": 20, "l": 70, "r": 20, "b": 70},
        "hovermode": "closest"}}
