"""History pages of the site: dashboard, one trend page per series, regressions (page and JSON
feed), and the compare and bisect pages written by those commands.

Templates autoescape every string; figures go through `reports.figures.embed`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from pathlib import Path

import plotly.graph_objects as go
from jinja2 import Environment, PackageLoader, select_autoescape
from plotly.subplots import make_subplots

from pipeline.history import series as history
from pipeline.history.bisect import bound
from pipeline.history.compare import format_rate
from pipeline.history.regressions import RegressionStore
from pipeline.summary import shape_label
from reports import figures

_ENV = Environment(loader=PackageLoader("reports", "templates"), autoescape=select_autoescape(["html", "j2"]))
_ENV.filters["short"] = lambda sha: (sha or "")[:10]
_ENV.filters["pct"] = lambda v: "" if v is None else f"{v:+.1%}"
_ENV.filters["shape"] = shape_label
_ENV.filters["side"] = format_rate
_ENV.filters["rate"] = lambda value, unit: "—" if not value else next(
    f"{value / f:.4g} {prefix}{unit}" for f, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1.0, "")) if value >= f
    or f == 1.0)
# Extra panels under the throughput plot; more than this and the page stops being readable.
MAX_PANELS = 6


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def trend_page_name(s: history.Series) -> str:
    return f"trend-{s.slug}.html"


def compare_page_name(base: str, head: str) -> str:
    return f"compare-{base[:12]}-{head[:12]}.html"


def bisect_page_name(variant: str, bad: str) -> str:
    return f"bisect-{_safe(variant)}-{bad[:12]}.html"


def _render(path: Path, template: str, **ctx) -> Path:
    path.write_text(_ENV.get_template(template).render(**ctx))
    return path


def _scale(series: history.Series) -> tuple[float, str]:
    """The unit prefix that keeps the series' numbers between 1 and 1000 (TFLOP/s, GFLOP/s, ...)."""
    top = max((p.rate for p in series.measured), default=0.0)
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if top >= factor:
            return factor, f"{prefix}{series.unit}"
    return 1.0, series.unit


def trend_figure(s: history.Series) -> go.Figure:
    """Throughput per commit with its noise band, and the resource/counter values that vary,
    as subplots sharing the commit axis so a jump in one lines up with the others."""
    points = s.measured
    factor, unit = _scale(s)
    x = [p.sha[:8] for p in points]
    hover = [[p.sha, p.subject, p.author, p.authored_at, p.n_samples] for p in points]
    extra_names = sorted({k for p in points for k in (p.resources or {})} | {k for p in points for k in (p.counters or {})})
    varying = [k for k in extra_names
               if len({(p.resources or {}).get(k, (p.counters or {}).get(k)) for p in points}) > 1][:MAX_PANELS]
    fig = make_subplots(rows=1 + len(varying), cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        row_heights=[3] + [1] * len(varying))
    fig.add_trace(go.Scatter(x=x, y=[p.rate_hi / factor for p in points], mode="lines", line={"width": 0},
                             hoverinfo="skip", showlegend=False), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=[p.rate_lo / factor for p in points], mode="lines", line={"width": 0},
                             fill="tonexty", fillcolor="rgba(31,119,180,0.2)", name="95% CI of the median",
                             hoverinfo="skip"), row=1, col=1)
    fig.add_trace(go.Scatter(
        x=x, y=[p.rate / factor for p in points], mode="lines+markers", name=unit, customdata=hover,
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>%{customdata[2]}<br>%{customdata[3]}"
                      f"<br>%{{y:.4g}} {unit} (%{{customdata[4]}} samples)<extra></extra>"), row=1, col=1)
    for i, name in enumerate(varying, start=2):
        ys = [(p.resources or {}).get(name, (p.counters or {}).get(name)) for p in points]
        fig.add_trace(go.Scatter(x=x, y=ys, mode="lines+markers", name=name, line={"shape": "hv"}), row=i, col=1)
        fig.update_yaxes(title_text=name.rsplit(".", 1)[-1], row=i, col=1)
    fig.update_yaxes(title_text=unit, row=1, col=1)
    fig.update_xaxes(type="category", title_text="commit (first-parent order)", row=1 + len(varying), col=1)
    fig.update_layout(margin={"t": 30, "l": 70, "r": 20, "b": 50}, legend={"orientation": "h"},
                      height=420 + 160 * len(varying))
    return fig


def write_feed(store, site: Path) -> Path:
    """regressions.json: every stored regression, newest first (see `pipeline.history.series.feed`)."""
    site.mkdir(parents=True, exist_ok=True)
    regressions = RegressionStore(store).all()
    commits = {sha: store.commit(sha) or {} for r in regressions
               for sha in (r.good_sha, r.bad_sha, r.culprit_sha) if sha}
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    path = site / "regressions.json"
    path.write_text(json.dumps(history.feed(regressions, commits, now), indent=1, default=str))
    return path


def write_pages(store, site: Path, order: list[str] | None = None, last_n: int = 10) -> dict[str, str]:
    """Dashboard, trend pages, regressions page and feed; returns {link title: file} for the index."""
    series = history.load(store, order)
    for s in series:
        plot = None
        if s.measured:
            fig = trend_figure(s)
            plot = figures.embed(fig, "trend", height=int(fig.layout.height))
        _render(site / trend_page_name(s), "trend.html.j2", s=s, plot=plot, points=list(reversed(s.points)))
    rows = history.dashboard(series, last_n)
    _render(site / "dashboard.html", "dashboard.html.j2", rows=rows, last_n=last_n, page=trend_page_name)
    write_feed(store, site)
    regressions = sorted(RegressionStore(store).all(), key=lambda r: -r.id)
    _render(site / "regressions.html", "regressions.html.j2", regressions=regressions,
            bisect_page=lambda r: bisect_page_name(r.variant, r.bad_sha))
    links = {"Dashboard: trends of every series": "dashboard.html",
             f"Regressions ({len(regressions)})": "regressions.html", "Regressions feed (JSON)": "regressions.json"}
    for kind in ("compare", "bisect"):
        for page in sorted(site.glob(f"{kind}-*.html"), key=lambda p: -p.stat().st_mtime)[:20]:
            links[f"{kind}: {page.stem[len(kind) + 1:]}"] = page.name
    return links


def write_compare_page(site: Path, report) -> Path:
    """The compare page of a `pipeline.history.compare.Report`."""
    site.mkdir(parents=True, exist_ok=True)
    return _render(site / compare_page_name(report.base_sha, report.head_sha), "compare.html.j2", r=report,
                   root="")


def write_bisect_page(site: Path, report) -> Path:
    """The bisect page of a `pipeline.history.bisect.Report`, with the probe times as a plot."""
    site.mkdir(parents=True, exist_ok=True)
    subjects = dict(report.commits)
    order = [sha for sha, _ in report.commits]
    probes = sorted(report.outcome.probes, key=lambda p: order.index(p.sha) if p.sha in order else -1)
    timed = [p for p in probes if p.median_s]
    plot = None
    if timed:
        fig = go.Figure(go.Scatter(
            x=[p.sha[:8] for p in timed], y=[p.median_s * 1e3 for p in timed], mode="markers",
            marker={"size": 11, "color": ["#b3261e" if p.verdict == "bad" else "#137333" for p in timed]},
            customdata=[[subjects.get(p.sha, ""), p.verdict] for p in timed],
            hovertemplate="%{x} %{customdata[0]}<br>%{y:.4g} ms: %{customdata[1]}<extra></extra>"))
        fig.update_layout(xaxis={"type": "category", "title": "probe (first-parent order)"},
                          yaxis={"title": "median run time (ms)"}, margin={"t": 20, "l": 60, "r": 20, "b": 50})
        plot = figures.embed(fig, "probes", height=320)
    page = bisect_page_name(report.variant, report.commits[-1][0])
    return _render(site / page, "bisect.html.j2", r=report, o=report.outcome, probes=probes, subjects=subjects,
                   plot=plot, bound=bound(len(report.commits) - 1),
                   moved=[dataclasses.asdict(m) for m in (report.culprit.moved if report.culprit else ())])
