"""Result rows for people: throughput units, % of the peer, the compact end-of-run table."""

from __future__ import annotations

import json
import re

from rich.console import Console
from rich.table import Table
from rich.text import Text

# The terminal formats throughput exactly as the site does.
from reports.format import format_rate, mem_bytes, rate, seconds
from workers.core import status, untrusted
from workers.core.launch import LAUNCH_BOUND_FACTOR, row_launch_bound
from workers.core.params import mode_of
from workers.ops import BUILTIN_PEER_BACKEND

# Rows that carry no number and are nobody's mistake: listed last, dimmed, one line per variant
# and reason (a point that does not fit fails to build alike at every shape).
UNMEASURED = frozenset({status.SKIPPED, status.DOES_NOT_FIT})


def peer_key(row: dict) -> tuple:
    """What a row shares with its peer's row: op, shape, dtype, device and pass (a backward row's
    peer is the peer's backward pass)."""
    return row["op"], row["shape"], row["dtype"], row["device"], mode_of(row["variant"])


def with_peer(rows: list[dict]) -> list[dict]:
    """Add `rate` and `pct_of_peer` (vs. the peer row at the same op, shape, dtype, device and
    pass), and `launch_bound` (the median within twice its launch floor, `workers.core.launch`)."""
    peers = {peer_key(r): rate(r) for r in rows if r.get("peer") and rate(r)}
    out = []
    for r in rows:
        r = dict(r, rate=rate(r), launch_bound=row_launch_bound(r))
        peer_rate = peers.get(peer_key(r))
        r["pct_of_peer"] = 100.0 * r["rate"] / peer_rate if r["rate"] and peer_rate else None
        out.append(r)
    return out


def pct_cell(row: dict) -> str:
    """% of peer as a table shows it, with the launch-bound mark where the row sits on its floor:
    the figure then compares two call paths, not two kernels."""
    pct = f"{row['pct_of_peer']:.0f}%" if row.get("pct_of_peer") else ""
    return f"{pct} launch-bound".strip() if row.get("launch_bound") else pct


def launch_bound_line(rows: list[dict]) -> str:
    """The note under a table with launch-bound rows ("" without any)."""
    n = sum(bool(r.get("launch_bound")) for r in rows)
    if not n:
        return ""
    return (f"{n} result(s) launch-bound: the median is within {LAUNCH_BOUND_FACTOR:g}x the launch floor of its own "
            "call path (the entry at its smallest size, or an empty launch), so its throughput and % of peer "
            "measure the call, not the kernel; measure at larger sizes (docs/measurement.md)")


def sort_rows(rows: list[dict]) -> list[dict]:
    """Failures first, then measured rows, skipped (and not fitting) ones last; within each by op,
    device, shape (smallest first: n=4194304 before n=16777216) and throughput (fastest first)."""
    def rank(r: dict) -> int:
        return 0 if r["status"] in status.FAILURES | status.INCOMPLETE else (2 if r["status"] in UNMEASURED else 1)

    return sorted(rows, key=lambda r: (rank(r), r["op"] or "", r["device"] or "", _shape_order(r["shape"]),
                                       r["dtype"] or "", -(r.get("rate") or 0)))


def _shape_order(key: str | None) -> tuple:
    """Shape keys in numeric order of their dimensions, not text order."""
    parts = (key or "").split(",")
    return tuple((0, int(v), "") if v.isdigit() else (1, 0, v) for v in (p.partition("=")[2] or p for p in parts))


def _collapse_skipped(rows: list[dict]) -> list[dict]:
    """One line per skipped (or not fitting) variant and reason instead of one per shape, and one
    line per device kind the cluster lacks, with its counts, instead of one per variant (an
    NVIDIA node's table listed every HIP variant a second time): the table stays short. The rows
    themselves, and `--json`, keep every result."""
    out, seen, missing = [], {}, {}
    for r in rows:
        if r["status"] not in UNMEASURED:
            out.append(r)
            continue
        lacking = _NO_DEVICE.match(r["diagnostic"] or "") if r["status"] == status.SKIPPED else None
        if lacking:
            kind = lacking.group(1)
            if kind not in missing:
                missing[kind] = dict(r, _variants=[], _jobs=0)
                out.append(missing[kind])
            missing[kind]["_jobs"] += 1
            if r["variant"] not in missing[kind]["_variants"]:
                missing[kind]["_variants"].append(r["variant"])
            continue
        key = (r["variant"], r["status"], r["dtype"], r["device"], r["diagnostic"])
        if key in seen:
            seen[key]["shape"] = f"{seen[key]['_n'] + 1} shapes"
            seen[key]["_n"] += 1
        else:
            seen[key] = dict(r, _n=1)
            out.append(seen[key])
    for kind, line in missing.items():
        names, jobs = line["_variants"], line["_jobs"]
        if len(names) > 1:
            line.update(variant=f"{len(names)} variants", backend="", dtype="",
                        diagnostic=f"no {kind} device in the cluster to run them (their builds and static analysis "
                                   f"are stored): {', '.join(names)}")
        line["shape"] = f"{jobs} jobs" if jobs > 1 else line["shape"]
    return out


def shape_label(key: str) -> str:
    """`M=512,N=512,K=512` → `512×512×512` for tables."""
    if "=" not in (key or ""):
        return key or ""
    return "×".join(part.split("=", 1)[1] for part in key.split(","))


def cell(value: object) -> Text:
    """A table cell for the terminal: plain text (rich would read "[link=…]" in a variant name
    or a compiler message as markup) without escape sequences (`workers.core.untrusted.terminal`)."""
    return Text(untrusted.one_line(value))


def lines_cell(value: object) -> Text:
    """`cell`, but keeping the text's lines: a manifest's mistakes, one a line."""
    return Text(untrusted.terminal(value))


def print_table(rows: list[dict], console: Console, title: str) -> None:
    table = Table(title=cell(title), title_justify="left")
    for col in ("variant", "shape", "dtype", "device", "status", "throughput", "% peer", "median", "peak mem",
                "error / diagnostic"):
        table.add_column(col, overflow="fold")
    shown = _collapse_skipped(sort_rows(with_peer(rows)))
    for r in shown:
        pct = pct_cell(r)
        err = r.get("correctness", {}).get("rel_fro_err")
        digest = (r.get("correctness") or {}).get("output") or {}
        floor = r.get("launch_floor_s")
        detail = r["diagnostic"][:160] if not status.measured(r["status"]) else \
            "; ".join(filter(None, (f"rel err {err:.1e}" if err is not None else "",
                                    _gradient_text(r),
                                    f"floor {seconds(floor)}" if floor and r.get("launch_bound") else "",
                                    f"no reference; output sha256 {digest['sha256'][:12]}" if digest else "",
                                    check_points_text(r), r.get("diagnostic") or "")))
        style = "red" if r["status"] in status.FAILURES | status.INCOMPLETE else \
            ("dim" if r["status"] in UNMEASURED else "yellow" if r["status"] == status.UNCHECKED else None)
        name = r["variant"] + (" (built-in peer)" if r.get("backend") == BUILTIN_PEER_BACKEND else "")
        measured = status.measured(r["status"])
        table.add_row(cell(name), cell(shape_label(r["shape"])), cell(r["dtype"]),
                      cell((r["device"] or "").split(":")[0]), r["status"], format_rate(r), pct,
                      seconds(r.get("median_s")) if measured else "",
                      mem_bytes(r.get("peak_mem_bytes")) if measured and r.get("peak_mem_bytes") is not None else "",
                      # An invalid manifest's every mistake, each on its line (no one is cut off).
                      lines_cell(r["diagnostic"]) if r["status"] == status.INVALID else cell(detail), style=style)
    console.print(table)
    note = launch_bound_line(shown)
    if note:
        console.print(note, style="yellow", highlight=False, markup=False)


def _gradient_text(row: dict) -> str:
    """The backward check's worst gradient error of a backward or full row ("" for a forward one)."""
    checks = (row.get("correctness") or {}).get("checks") or []
    grads = [g["rel_fro_err"] for c in checks if c.get("pass") == "backward" for g in c["gradients"].values()]
    return f"grad err {max(grads):.1e}" if grads else ""


def check_points_text(row: dict) -> str:
    """`checked at 3 more shapes: 31, 64, 127`: the shapes a measured row's variant was only
    checked at (its check points, `workers.job.check_points`), or ""."""
    found = (row.get("correctness") or {}).get("check_points") or {}
    points = found.get("points") or []
    if not points:
        return ""
    shapes = ", ".join(shape_label(p["shape"]) for p in points[:4]) + (", …" if len(points) > 4 else "")
    return f"checked at {len(points)} more shape(s): {shapes}"


def exit_code(rows: list[dict]) -> int:
    """1 when a variant failed or a result is missing (a lost node), else 0."""
    return 1 if any(r["status"] in status.FAILURES | status.INCOMPLETE for r in rows) else 0


_NO_DEVICE = re.compile(r"no (\w+) device in the cluster")
# Back ends whose code may well run on the CPU if the manifest allowed it (Python, a torch
# extension): the fix there can be `devices`; CUDA, HIP and Triton code needs the device.
_MAY_RUN_ON_CPU = ("python", "torch")
_DEVICE_WORDS = {"cuda": "an NVIDIA GPU", "rocm": "an AMD GPU", "cpu": "a CPU slot"}


def all_skipped_line(rows: list[dict], variants: dict) -> str:
    """One line when every row of a run is `skipped` (nothing was measured, yet the run exits
    0: a CPU CI runner builds and analyses GPU variants on purpose): why, and what runs them —
    `devices` for code that may run on the CPU, else a node with the device. "" otherwise."""
    if not rows or any(r["status"] != status.SKIPPED for r in rows):
        return ""
    missing = {r["variant"]: m.group(1) for r in rows if (m := _NO_DEVICE.match(r.get("diagnostic") or ""))}
    if not missing:
        reasons = sorted({r.get("diagnostic") or "" for r in rows})
        return (f"every result was skipped: {reasons[0]}"
                + (f" (and {len(reasons) - 1} other reason(s) in the table)" if len(reasons) > 1 else "")
                + "; nothing was measured")
    kinds = sorted(set(missing.values()))
    v = [variants[n] for n in sorted(missing) if n in variants]
    declared = sorted({d for x in v for d in x.devices}) or kinds
    line = (f"every result was skipped: nothing here can run these variants (devices = {json.dumps(declared)} on a "
            f"machine without {' or '.join(_DEVICE_WORDS.get(k, k) for k in kinds)})")
    movable = [x for x in v if x.backend in _MAY_RUN_ON_CPU and "cpu" not in x.devices]
    if movable:
        where = f"{movable[0].folder}/variant.toml" + (f" (and {len(movable) - 1} more)" if len(movable) > 1 else "")
        line += f"; set devices = {json.dumps(['cpu', *declared])} in {where} where the code runs on the CPU, or"
    else:
        line += ";"
    return line + (f" run on a node with {' or '.join(_DEVICE_WORDS.get(k, k) for k in kinds)} (--ray-address "
                   f"HOST:PORT joins a cluster that has one)")
