"""flopwatch selftest: the smallest kernel through every path this node supports.

What a user runs on a new node (and what `doctor` points to): each binding (`c`, `raw`,
`pybind11`, `python`, `triton`) built, checked for correctness and timed on every device here,
device identity, and one profiler pass with its counters parsed and formulas evaluated.
Exit 1 when a path that should work here fails; paths this node cannot offer are `n/a`.
"""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.table import Table

HELP = "run the smallest kernel through every build, binding, device and profiler path of this node"


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--save", metavar="FILE", help="also write the rows as JSON to FILE")
    p.add_argument("--budget", type=float, default=0.2, help="timing budget per run in seconds (default 0.2)")


def _time(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.1f} s"


def variants() -> list:
    """The tiny variants shipped in `workers/selftest/kernels/`, validated like any suite's."""
    from pipeline.project.config import ProjectConfig
    from pipeline.project.manifest import load_variant
    from workers.selftest.paths import KERNELS

    return [load_variant(KERNELS.parent, m, ProjectConfig()) for m in sorted(KERNELS.glob("*/variant.toml"))]


def main(args) -> int:
    from workers.selftest import paths

    err = Console(stderr=True)
    rows = paths.run(variants(), args.budget, progress=lambda msg: err.print(f"[dim]selftest: {msg}[/dim]"))
    if args.save:
        from pathlib import Path

        Path(args.save).write_text(json.dumps([r.to_dict() for r in rows], indent=1))
    if args.json:
        print(json.dumps([r.to_dict() for r in rows]))
        return 1 if paths.failed(rows) else 0
    table = Table(title="flopwatch selftest")
    for col in ("path", "result", "time", "detail / error", "what to check"):
        table.add_column(col, overflow="fold")
    style = {paths.OK: "green", paths.FAIL: "bold red", paths.NA: "dim"}
    for r in rows:
        table.add_row(r.path, f"[{style[r.result]}]{r.result}[/]", _time(r.seconds), r.detail, r.check)
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    bad = [r.path for r in rows if r.result == paths.FAIL]
    n_ok = sum(r.result == paths.OK for r in rows)
    n_na = sum(r.result == paths.NA for r in rows)
    print(f"{n_ok} ok, {len(bad)} failed, {n_na} n/a" + (f"; failed: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0
