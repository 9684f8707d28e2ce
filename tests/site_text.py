"""Read a generated site as a reader sees it: the text of every page, and the strings and
numbers its figures can show (trace names, texts, hover templates, tick texts, annotations,
the plotted values a default hover would print, the shared commit table)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from reports.figures import unpack

# A decimal number as text: 50.432081, 1.5e+07, 0.0213. Integers are not floats.
_FLOAT = re.compile(r"(?<![\w.])[-+]?(\d+\.\d+|\d+\.|\.\d+)([eE][-+]?\d+)?(?![\w.])")
_FIGURE = re.compile(r"var f=(\{.*?\});(?:fwPlot|Plotly\.newPlot)\(", re.DOTALL)
_VISIBLE_KEYS = {"text", "name", "hovertemplate", "ticktext", "title"}
_TEMPLATE_FIELD = re.compile(r"%\{([^}:]+)(?::([^}]*))?\}")


def significant_digits(number: str) -> int:
    """Digits from the first to the last non-zero one: 50.432 → 5, 0.0213 → 3, 123500.0 → 4."""
    mantissa = re.split(r"[eE]", number.lstrip("+-"))[0].replace(".", "")
    return len(mantissa.strip("0")) or 1


def long_floats(text: str, limit: int = 4) -> list[str]:
    """Decimal numbers in `text` with more than `limit` significant digits."""
    return [m.group(0) for m in _FLOAT.finditer(text) if significant_digits(m.group(0)) > limit]


def page_text(markup: str) -> str:
    """What a browser shows of a page: no scripts, no tags, entities decoded; tooltips
    (title attributes) included, since a reader sees them too."""
    body = re.sub(r"<script.*?</script>", " ", markup, flags=re.DOTALL)
    titles = " ".join(re.findall(r'title="([^"]*)"', body))
    return html.unescape(re.sub(r"<[^>]+>", " ", body) + " " + titles)


def figures(markup: str) -> list[dict]:
    """The figure specs of a page, with shared x runs (`fwX`) and packed y values (`fwD`)
    expanded as assets/flopwatch.js does in the browser."""
    out = []
    for m in _FIGURE.finditer(markup):
        fig = json.loads(m.group(1))
        layout = fig.get("layout", {})
        shared = [first + i for first, count in layout.pop("fwX", []) for i in range(count)]
        for trace in fig.get("data", []):
            if trace.get("x") == "fwX":
                trace["x"] = shared
            if isinstance(trace.get("y"), dict) and "fwD" in trace["y"]:
                trace["y"] = unpack(trace["y"])
        out.append(fig)
    return out


def figure_problems(fig: dict, limit: int = 4) -> list[str]:
    """Every visible string with a long float, every hover field formatted with more than
    `limit` significant digits, every plotted float a default hover would print too long, and
    every trace without its own hovertemplate that is not hover-silent."""
    problems = []

    def walk(node, key=""):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key in _VISIBLE_KEYS:
            problems.extend(f"{key}: {f}" for f in long_floats(node, limit))
        elif isinstance(node, float) and key in ("x", "y", "z") and significant_digits(repr(node)) > limit:
            problems.append(f"{key} value {node!r}")

    walk(fig.get("data", []))
    walk({"layout": fig.get("layout", {})})
    for t in fig.get("data", []):
        if "hovertemplate" not in t and t.get("hoverinfo") not in ("skip", "none"):
            problems.append(f"trace {t.get('name')!r} has no hovertemplate")
        # A numeric field in the hover needs a format of at most `limit` significant digits.
        for field, spec in _TEMPLATE_FIELD.findall(t.get("hovertemplate", "")):
            values = t.get(field.split("[")[0])
            flat = values if isinstance(values, list) else []
            flat = [v for row in flat for v in (row if isinstance(row, list) else [row])]
            if any(isinstance(v, float) for v in flat) and not re.fullmatch(rf"\.[1-{limit}][gf]", spec or ""):
                problems.append(f"hover field %{{{field}}} formatted as {spec!r}")
    return problems


def site_problems(site: Path, limit: int = 4) -> dict[str, list[str]]:
    """{file: problems} over every page, its figures and the shared commit table."""
    found = {}
    for page in sorted(site.glob("*.html")):
        markup = page.read_text()
        problems = [f"text: {f}" for f in long_floats(page_text(markup), limit)]
        for fig in figures(markup):
            problems += figure_problems(fig, limit)
        if problems:
            found[page.name] = problems
    commits = site / "assets" / "commits.js"
    if commits.exists():
        table = json.loads(commits.read_text().split("=", 1)[1].rstrip().rstrip(";"))
        bad = [f for row in table for f in long_floats(" ".join(row[1:]), limit)]
        if bad:
            found["assets/commits.js"] = bad
    return found
