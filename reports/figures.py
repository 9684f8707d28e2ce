"""Figures of the site: plotly specs embedded as escaped JSON, and inline SVG sparklines.

A trend page's figure is written as a plain plotly dict, not through plotly's validating
graph objects (a hundred series took seconds that way): its x values are positions in the
site's shared commit table (`assets/commits.js`), which `assets/flopwatch.js` turns into the
hover's SHA, subject, author and date, so a year of commit metadata is written once, not once
per series. Plotted values are rounded to 4 significant digits and every trace has its own
hovertemplate, so no hover shows a raw float.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
from markupsafe import Markup

from reports import metric_names
from reports.format import scale_for

MAX_PANELS = 6  # resource/counter panels under the throughput plot; more stops being readable
TICKS = 12  # x-axis labels on a trend page, however many commits


def _json(obj) -> str:
    payload = json.dumps(obj, default=str, separators=(",", ":"))
    return payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def embed(fig: dict, div_id: str, height: int = 420, commits: bool = False) -> Markup:
    """A div plus the script that draws the plotly spec `fig` with the site's own plotly.js.
    commits=True draws through `fwPlot`, which fills hovers from the shared commit table."""
    spec = fig
    call = "fwPlot" if commits else "Plotly.newPlot"
    return Markup(
        f'<div id="{div_id}" class="plot" style="height:{height}px"></div>\n'
        f'<script>(function(){{var f={_json(spec)};{call}("{div_id}", f.data, f.layout, '
        f'{{responsive: true, displaylogo: false}});}})();</script>'
    )


def commit_table_js(commits: Sequence[dict]) -> str:
    """`assets/commits.js`: [sha, subject, author, date] per commit, in first-parent order."""
    rows = [[c.get("sha") or "", (c.get("subject") or "")[:200], c.get("author") or "",
             (c.get("authored_at") or "")[:10]] for c in commits]
    return f"window.FW_COMMITS={_json(rows)};\n"


def _r(value: float | None, digits: int = 4) -> float | None:
    """Rounded to `digits` (at most 4) significant digits: the data is compact and any default
    hover is short."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits - 1 - math.floor(math.log10(abs(value)))) if value else 0.0


def packed(values: Sequence[float | None], digits: int = 4) -> dict:
    """A trace's y values as {"fwD": [e, d0, d1, ...]}: each value is an integer count of 10^e
    (e puts the largest value at `digits` significant digits, so none has more), written as the
    difference to the previous one (null for a missing value). A series' nights differ by a few
    units of its last digit, so a number takes 2–3 characters instead of 6; assets/flopwatch.js
    unpacks it (fwUnpack) before plotting: an integer divided by an exact power of ten is the
    double nearest the short decimal, so a value prints as 164.6, never 164.60000000000002."""
    x = np.array([np.nan if v is None else v for v in values], dtype=float)
    finite = np.isfinite(x)
    top = float(np.max(np.abs(x[finite]))) if finite.any() else 0.0
    e = math.floor(math.log10(top)) - (digits - 1) if top > 0 else 0
    counts = (np.round(x[finite] / 10.0 ** e) if e >= 0 else np.round(x[finite] * 10.0 ** -e)).astype(np.int64)
    deltas = np.diff(counts, prepend=0).tolist()
    if finite.all():
        return {"fwD": [e, *deltas]}
    out: list[int | None] = [None] * x.size
    for i, d in zip(np.flatnonzero(finite).tolist(), deltas):
        out[i] = d
    return {"fwD": [e, *out]}


def unpack(encoded: dict) -> list[float | None]:
    """The values of a `packed` trace, as the browser computes them (for checks)."""
    e, *deltas = encoded["fwD"]
    out, last = [], 0
    for d in deltas:
        if d is None:
            out.append(None)
            continue
        last += d
        out.append(last * 10.0 ** e if e >= 0 else last / 10.0 ** -e)
    return out


def _columns(points: Sequence) -> dict[str, list]:
    """Each resource and counter name → its value per point (None where a point lacks it);
    a resource beats a counter of the same name. Consecutive points usually share one resources
    dict (the build did not change), so those are copied once per run of points, not per point."""
    n = len(points)
    columns: dict[str, list] = {}
    for i, p in enumerate(points):
        for k, v in (p.counters or {}).items():
            column = columns.get(k)
            if column is None:
                column = columns[k] = [None] * n
            column[i] = v
    start = 0
    for i in range(1, n + 1):
        if i < n and points[i].resources is points[start].resources:
            continue
        for k, v in (points[start].resources or {}).items():
            column = columns.get(k)
            if column is None:
                column = columns[k] = [None] * n
            column[start:i] = [v] * (i - start)
        start = i
    return columns


def runs(positions: Sequence[int]) -> list[list[int]]:
    """Increasing positions as [first, count] runs of consecutive ones: the x values of a
    series measured every night are one run, a few bytes instead of a number per commit."""
    out: list[list[int]] = []
    for x in positions:
        if out and out[-1][0] + out[-1][1] == x:
            out[-1][1] += 1
        else:
            out.append([x, 1])
    return out


def tile_heatmap(tile_map: list[list], tile: int, title: str) -> dict:
    """Per-tile max-abs-error map; unwritten/NaN tiles ("inf") drawn at the top of the scale."""
    finite = [v for row in tile_map for v in row if isinstance(v, (int, float)) and math.isfinite(v)]
    top = max(finite) if finite else 1.0
    z = [[(_r(v) if isinstance(v, (int, float)) and math.isfinite(v) else (_r(top * 10) or 1.0)) for v in row]
         for row in tile_map]
    text = [[(f"{v:.3g}" if isinstance(v, (int, float)) and math.isfinite(v) else "never written / NaN")
             for v in row] for row in tile_map]
    rows, cols = len(tile_map), len(tile_map[0]) if tile_map else 0
    return {"data": [{
        "type": "heatmap", "z": z, "text": text, "colorscale": "Reds",
        "colorbar": {"title": {"text": "max |err|"}, "tickformat": ".2g"},
        "x": [f"{c * tile}" for c in range(cols)], "y": [f"{r * tile}" for r in range(rows)],
        "hovertemplate": "tile rows %{y}+, cols %{x}+<br>max abs err %{text}<extra></extra>"}],
        "layout": {"title": {"text": title}, "yaxis": {"autorange": "reversed", "title": {"text": "row"}},
                   "xaxis": {"title": {"text": "col"}}, "margin": {"t": 40, "l": 60, "r": 20, "b": 40}}}


def _panel_scale(kind: str, top: float) -> tuple[float, str]:
    """Divisor and unit for a panel's axis: bytes in KiB/MiB, counts in k/M/G, % as is."""
    if kind == "bytes":
        for factor, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if top >= factor:
                return float(factor), unit
        return 1.0, "B"
    if kind == "count":
        for factor, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if top >= factor:
                return factor, unit
    if kind == "pct":
        return 1.0, "%"
    if kind == "ns":
        return 1e3, "µs"
    return 1.0, ""


def trend_figure(points: Sequence, position: dict[str, int], unit: str, vendor: str,
                 steps: Sequence[dict] = (), culprits: Sequence[dict] = ()) -> tuple[dict, list]:
    """Throughput per commit with its noise band, change points and culprits marked, and the
    resources/counters that vary as panels sharing the commit axis.

    points are the series' measured points (oldest first); position maps a SHA to its index
    in the shared commit table; steps are {"sha", "label"} of detected change points (marked
    as a line before that commit), culprits {"sha", "label"} of bisected first bad commits.
    Returns the figure and the panels' metrics (`metric_names.Shown`) for the page's legend."""
    top = max((p.rate for p in points), default=0.0)
    factor, shown_unit = scale_for(top, unit)
    x = [position[p.sha] for p in points]
    # Every trace of the figure shares these x values: written once, as runs (`fwX` in
    # assets/flopwatch.js), not once per trace; y values are `packed` (throughput and its band
    # at 4 significant digits, counter panels at 3): a 3-year series' page stays near 40 KB.
    shared = "fwX"
    columns = _columns(points)
    # Resources (static, a step in them is news) before counters (measured, they jitter).
    varying = sorted((k for k, column in columns.items() if len(set(column)) > 1),
                     key=lambda k: (not k.startswith("kernels."), k))[:MAX_PANELS]
    rows = 1 + len(varying)
    weights = [3.0] + [1.0] * len(varying)
    gap = 0.04
    span = 1.0 - gap * (rows - 1)
    domains, top_edge = [], 1.0
    for w in weights:
        height = span * w / sum(weights)
        domains.append([round(max(top_edge - height, 0.0), 4), round(top_edge, 4)])
        top_edge -= height + gap
    commit_hover = "%{customdata[0]}<br>%{customdata[1]}<br>%{customdata[2]} · %{customdata[3]}<br>"
    data = [
        {"type": "scatter", "x": shared, "y": packed([p.rate_hi / factor if p.rate_hi else None for p in points]),
         "mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False, "xaxis": "x", "yaxis": "y"},
        {"type": "scatter", "x": shared, "y": packed([p.rate_lo / factor if p.rate_lo else None for p in points]),
         "mode": "lines", "line": {"width": 0}, "fill": "tonexty", "fillcolor": "rgba(31,119,180,0.2)",
         "name": "95% CI of the median", "hoverinfo": "skip", "xaxis": "x", "yaxis": "y"},
        {"type": "scatter", "x": shared, "y": packed([p.rate / factor for p in points]), "mode": "lines+markers",
         "marker": {"size": 4}, "line": {"width": 1.5, "color": "#1f77b4"}, "name": shown_unit, "fwCommits": True,
         "hovertemplate": commit_hover + f"%{{y:.4g}} {shown_unit}<extra></extra>", "xaxis": "x", "yaxis": "y"},
    ]
    rate_at = {p.sha: p.rate / factor for p in points}
    marked = [c for c in culprits if c["sha"] in rate_at]
    if marked:
        data.append({"type": "scatter", "x": [position[c["sha"]] for c in marked],
                     "y": [_r(rate_at[c["sha"]]) for c in marked], "mode": "markers+text",
                     "marker": {"symbol": "star", "size": 14, "color": "#b3261e"},
                     "text": [c["label"] for c in marked], "textposition": "bottom center",
                     "name": "bisect culprit", "fwCommits": True,
                     "hovertemplate": "culprit " + commit_hover + f"%{{y:.4g}} {shown_unit}<extra></extra>",
                     "xaxis": "x", "yaxis": "y"})
    layout: dict = {
        "margin": {"t": 60, "l": 80, "r": 20, "b": 70},
        "legend": {"orientation": "h", "x": 0, "y": 1, "yanchor": "top", "yref": "container"},
        "hovermode": "closest", "showlegend": True, "height": 420 + 150 * len(varying),
        "yaxis": {"domain": domains[0], "title": {"text": shown_unit}, "tickformat": ".4~g"},
        "shapes": [], "annotations": [], "fwX": runs(x),
    }
    panels = []
    for i, k in enumerate(varying, start=2):
        kind = metric_names.unit_kind(k)
        ys = columns[k]
        div, suffix = _panel_scale(kind, max((abs(v) for v in ys if v is not None), default=0.0))
        shown = metric_names.flat(k, 0.0, vendor)
        panels.append(shown)
        label = shown.label
        data.append({"type": "scatter", "x": shared, "y": packed([v / div if v is not None else None for v in ys], 3),
                     "mode": "lines", "line": {"shape": "hv", "width": 1.5}, "name": label, "fwCommits": True,
                     "showlegend": False,
                     "hovertemplate": commit_hover + f"{label} %{{y:.4g}}{' ' if suffix != '%' else ''}{suffix}"
                                      "<extra></extra>", "xaxis": f"x{i}", "yaxis": f"y{i}"})
        short = label.rsplit(": ", 1)[-1]  # the kernel is in the hover and the legend below
        layout[f"yaxis{i}"] = {"domain": domains[i - 1], "title": {"text": short + (f" ({suffix})" if suffix
                               else "")}, "tickformat": ".4~g"}
    n = len(position)
    every = max(1, math.ceil(n / TICKS))
    commits_sorted = sorted(position.items(), key=lambda kv: kv[1])
    tickvals = [i for _, i in commits_sorted][::every]
    for i in range(1, rows + 1):
        axis = {"range": [min(x, default=0) - 0.5, max(x, default=0) + 0.5], "showgrid": True, "zeroline": False,
                "anchor": "y" if i == 1 else f"y{i}", "tickvals": tickvals, "showticklabels": i == rows}
        if i > 1:
            axis["matches"] = "x"
        layout["xaxis" if i == 1 else f"xaxis{i}"] = axis
    # Tick labels (date + short SHA) come from the shared commit table in the browser.
    layout[f"xaxis{rows}" if rows > 1 else "xaxis"]["fwTicks"] = True
    layout[f"xaxis{rows}" if rows > 1 else "xaxis"]["title"] = {"text": "commit (first-parent order)"}
    for s in steps:
        if s["sha"] not in position:
            continue
        at = position[s["sha"]] - 0.5
        layout["shapes"].append({"type": "line", "xref": "x", "yref": "paper", "x0": at, "x1": at, "y0": 0, "y1": 1,
                                 "line": {"color": "#b3261e", "width": 1.5, "dash": "dash"}})
        layout["annotations"].append({"x": at, "y": 1, "xref": "x", "yref": "paper", "yanchor": "bottom",
                                      "text": s["label"], "showarrow": False, "font": {"color": "#b3261e"}})
    return {"data": data, "layout": layout}, panels


def sparkline(values: Sequence[float], width: int = 90, height: int = 22, color: str = "#1f77b4") -> Markup:
    """An inline SVG polyline of `values` (oldest first), scaled to its own range."""
    vals = [v for v in values if v is not None]
    if len(vals) < 2:
        return Markup("")
    lo, hi = min(vals), max(vals)
    spread = (hi - lo) or 1.0
    step = (width - 2) / (len(vals) - 1)
    pts = " ".join(f"{1 + i * step:.1f},{height - 2 - (v - lo) / spread * (height - 4):.1f}" for i, v in enumerate(vals))
    return Markup(f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
                  f'aria-hidden="true"><polyline fill="none" stroke="{color}" stroke-width="1.2" '
                  f'points="{pts}"/></svg>')
