"""flopwatch export OUT: the stored history as a table, one row per result (CSV or Parquet).

    flopwatch export history.parquet
    flopwatch export - --variant hip_mfma_tiled > tiled.csv

Columns: pipeline/history/frame.py. In Python, `pipeline.history.frame.results_frame()`
returns the same table as a pandas DataFrame.
"""

from __future__ import annotations

import os
import sys

from pipeline.commands.common import UsageError, add_store_options, open_store
from pipeline.history import frame

HELP = "write the stored results as CSV or Parquet (one row per result: commit, device, counters, resources)"


def add_arguments(p) -> None:
    p.add_argument("out", help="file to write (.csv or .parquet); - writes CSV to standard output")
    p.add_argument("--format", choices=("csv", "parquet"), help="default: from OUT's name")
    p.add_argument("--variant", action="append", help="only these variants (repeatable)")
    p.add_argument("--device", action="append",
                   help="only these devices, as stored: kind and model, e.g. 'cuda:NVIDIA H100 80GB HBM3' "
                        "(repeatable; a device no result has is refused with those stored)")
    p.add_argument("--samples", action="store_true", help="add every timed sample (a list per row)")
    add_store_options(p)


def main(args) -> int:
    try:
        fmt = frame.format_of(args.out, args.format)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if fmt == "parquet" and args.out == "-":
        raise UsageError("Parquet is written to a file, not to standard output: give OUT.parquet")
    with open_store(args) as store:
        try:
            table = frame.results_frame(store, variants=args.variant, devices=args.device, samples=args.samples)
        except frame.NoMatch as exc:
            raise UsageError(str(exc)) from None
        shown = store.location.shown
    if args.out == "-":
        try:
            frame.write(table, sys.stdout, "csv")
            sys.stdout.flush()
        except BrokenPipeError:  # `flopwatch export - | head`: the reader has all it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    else:
        frame.write(table, args.out, fmt)
        print(f"wrote {len(table)} results ({len(table.columns)} columns) from {shown} to {args.out}")
    return 0
