"""The one jinja2 environment of the site: autoescaping on, and the formatting filters
every template shares (so a number looks the same on every page)."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from reports import axes, metric_names
from reports import format as fmt
from workers.core import status
from workers.ops import peer_label


def metrics_html(items) -> Markup:
    """`metric_names.Shown` items as "label value", the label's tooltip naming flopwatch's metric
    (the `shown` macro of _metrics.html.j2, written here because a fleet's commit page shows
    tens of thousands of them and a macro call per metric cost most of its rendering)."""
    return Markup(" ").join(Markup('<abbr title="{}">{}</abbr>&nbsp;{}').format(m.name, m.label, m.text)
                            for m in items)


ENV = Environment(loader=PackageLoader("reports", "templates"), autoescape=select_autoescape(["html", "j2"]))
ENV.filters.update({
    "short": fmt.short,
    "pct": fmt.pct,
    "shape": fmt.shape_label,
    "sig": fmt.sig,
    "seconds": fmt.seconds,
    "row_rate": fmt.format_rate,
    "rate": lambda value, unit: fmt.throughput(value, unit),
    "side": lambda side: "—" if side is None else (fmt.throughput(side.rate, "FLOP/s" if side.flops else "B/s")
                                                  + (" (launch-bound)" if side.launch_bound else "")
                                                  if side.rate is not None else side.status),
    "sci": lambda v: "" if v is None else (f"{v:.2e}" if isinstance(v, (int, float)) else str(v)),
    "date": lambda text: (text or "")[:10],
    "device": lambda d: (d or "").split(":", 1)[-1],
    "metric_label": lambda name, vendor="": metric_names.flat(name, 0.0, vendor),
    "metrics_html": metrics_html,
    "peer_label": peer_label,
    "mem": fmt.mem_bytes,
    # a stored regression's two sides: throughputs, or peak memory for a memory step
    "step_value": lambda value, r, unit: fmt.mem_bytes(value) if r.metric == "memory" else fmt.throughput(value, unit),
})
ENV.globals.update({"kernels_of": metric_names.kernels, "counters_of": metric_names.counters,
                    "vendor_of": metric_names.vendor_of, "anchor": fmt.anchor, "legend_of": metric_names.legend,
                    "point_label": axes.point_label,
                    "status_class": fmt.status_class,
                    # statuses that carry a timing (ok, unchecked): `status.MEASURED`
                    "measured": status.MEASURED})


def render(path: Path, template: str, **ctx) -> Path:
    path.write_text(ENV.get_template(template).render(**ctx))
    return path
