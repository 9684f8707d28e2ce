"""flopwatch store export DEST | import SOURCE: move a history between stores.

    flopwatch store import .flopwatch/results.db --store postgresql://flopwatch@db/flopwatch
    flopwatch store export backup.db                      # the configured store into a file

`export` copies the configured store (--store, FLOPWATCH_STORE or the repository's file) into
DEST; `import` copies SOURCE into it. DEST and SOURCE are paths or store URLs; DEST is created
when missing. Copying again copies only what is new (pipeline/store/transfer.py).
"""

from __future__ import annotations

from pipeline.commands.common import add_store_options, open_store
from pipeline.store import Store, transfer

HELP = "move a results history between stores (SQLite file ↔ PostgreSQL)"


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    out = sub.add_parser("export", help="copy the configured store into DEST (a path or a store URL)",
                         description="copy the configured store into DEST (created when missing)")
    out.add_argument("dest", help="a SQLite path, sqlite:///PATH or postgresql://…")
    add_store_options(out)
    into = sub.add_parser("import", help="copy SOURCE (a path or a store URL) into the configured store",
                          description="copy SOURCE into the configured store")
    into.add_argument("source", help="a SQLite path, sqlite:///PATH or postgresql://…")
    add_store_options(into)


def main(args) -> int:
    with open_store(args) as configured:
        if args.action == "export":
            with Store(args.dest) as dest:
                copied = transfer.copy_history(configured, dest)
                print(f"exported {copied.line()} from {configured.location.shown} to {dest.location.shown}")
        else:
            with Store(args.source) as source:
                copied = transfer.copy_history(source, configured)
                print(f"imported {copied.line()} from {source.location.shown} into {configured.location.shown}")
    return 0
