"""flopwatch ls: the variants of the repository and whether this machine can build and run them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pipeline.project.checkout import open_repo
from pipeline.project.config import load_config
from pipeline.project.discovery import discover
from pipeline.run.peers import builtin_peers
from pipeline.run.summary import cell, lines_cell
from workers.backends.build import toolchains
from workers.measure import device

HELP = "list variants and whether this machine can build and run them"


def add_arguments(p) -> None:
    p.add_argument("--repo", default=".")
    p.add_argument("--kernels", action="append")
    p.add_argument("--json", action="store_true")


def main(args) -> int:
    repo = open_repo(Path(args.repo).resolve())
    root = Path(repo.working_tree_dir)
    config = load_config(root)
    variants, invalid = discover(root, config, tuple(args.kernels) if args.kernels else None)
    tcs = toolchains()
    kinds = device.kinds_here()
    rows = []
    for v in [*variants, *builtin_peers(variants)]:  # the peers a run adds where the repository has none
        can_build = bool(tcs.get(v.backend, {}).get("ident"))
        runnable = [k for k in v.devices if k in kinds]
        rows.append({"name": v.name, "op": v.op, "backend": v.backend, "folder": v.folder,
                     "shapes": len(v.shapes) if v.shapes else "peer", "dtypes": list(v.dtypes),
                     "build": can_build, "run": runnable, "status": "ok",
                     **({"family": v.family, "params": v.params} if v.params else {})})
    for bad in invalid:
        rows.append({"name": bad.name, "folder": bad.folder, "status": "invalid", "error": bad.error})
    if args.json:
        print(json.dumps(rows))
        return 1 if invalid else 0
    table = Table()
    for col in ("variant", "op", "backend", "shapes", "dtypes", "build here", "run here"):
        table.add_column(col)
    for r in rows:
        if r["status"] == "invalid":
            table.add_row(cell(r["name"]), "", "", "", "", "[red]invalid[/red]", lines_cell(r["error"]))
            continue
        name = r["name"] + (" (built-in peer)" if r["backend"] == "builtin" else "")
        table.add_row(cell(name), r["op"], r["backend"], str(r["shapes"]), ",".join(r["dtypes"]),
                      "yes" if r["build"] else "no (toolchain missing)",
                      ",".join(r["run"]) if r["run"] else "no (no device)")
    Console(width=None if sys.stdout.isatty() else 140).print(table)
    return 1 if invalid else 0
