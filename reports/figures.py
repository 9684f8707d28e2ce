"""plotly figures for the site, embedded as escaped JSON (no user string can end a <script>)."""

from __future__ import annotations

import json

import plotly.graph_objects as go
from markupsafe import Markup


def embed(fig: go.Figure, div_id: str, height: int = 420) -> Markup:
    """A div plus the script that draws `fig` into it with the site's own plotly.js."""
    payload = json.dumps(fig.to_plotly_json(), default=str)
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(
        f'<div id="{div_id}" class="plot" style="height:{height}px"></div>\n'
        f'<script>(function(){{var f={payload};Plotly.newPlot("{div_id}", f.data, f.layout, '
        f'{{responsive: true, displaylogo: false}});}})();</script>'
    )


def tile_heatmap(tile_map: list[list], tile: int, title: str) -> go.Figure:
    """Per-tile max-abs-error map; unwritten/NaN tiles ("inf") drawn at the top of the scale."""
    finite = [v for row in tile_map for v in row if isinstance(v, (int, float))]
    top = max(finite) if finite else 1.0
    z = [[(v if isinstance(v, (int, float)) else top * 10 or 1.0) for v in row] for row in tile_map]
    text = [[(f"{v:.3g}" if isinstance(v, (int, float)) else "never written / NaN") for v in row] for row in tile_map]
    rows, cols = len(tile_map), len(tile_map[0]) if tile_map else 0
    fig = go.Figure(go.Heatmap(
        z=z, text=text, colorscale="Reds", colorbar={"title": "max |err|"},
        x=[f"{c * tile}" for c in range(cols)], y=[f"{r * tile}" for r in range(rows)],
        hovertemplate="tile rows %{y}+, cols %{x}+<br>max abs err %{text}<extra></extra>",
    ))
    fig.update_layout(title=title, yaxis={"autorange": "reversed", "title": "row"},
                      xaxis={"title": "col"}, margin={"t": 40, "l": 60, "r": 20, "b": 40})
    return fig
