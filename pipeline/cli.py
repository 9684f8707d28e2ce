"""`flopwatch` command line: one module per subcommand under `pipeline/commands/`.

Exit status: 0 all ok; 1 when a variant failed (build_failed, incorrect, crashed, timeout,
invalid) or, for compare/bisect, a significant regression; 2 for usage or configuration errors.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.checkout import CheckoutError
from pipeline.commands import doctor, export, init, ls, new, report, run, selftest, store
from pipeline.commands.common import UsageError
from pipeline.config import ConfigError
from pipeline.ray_access import ClusterError
from pipeline.store import LocationError, StoreError

COMMANDS = {"run": run, "ls": ls, "report": report, "doctor": doctor, "selftest": selftest, "new": new,
            "init": init, "export": export, "store": store}
_OPTIONAL = ("compare", "bisect", "detect", "nightly")


def _commands() -> dict:
    import importlib

    found = dict(COMMANDS)
    for name in _OPTIONAL:
        try:
            found[name] = importlib.import_module(f"pipeline.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"pipeline.commands.{name}":
                raise
    return found


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="flopwatch", description="Benchmark every kernel variant of a commit.")
    sub = p.add_subparsers(dest="command", required=True)
    for name, module in _commands().items():
        sp = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sp)
        sp.set_defaults(handler=module.main)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.handler(args)
    except (ConfigError, CheckoutError, StoreError, LocationError, UsageError, ClusterError) as exc:
        print(f"flopwatch: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
