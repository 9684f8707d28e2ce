"""`flopwatch` command line: one module per subcommand under `pipeline/commands/`.

Exit status: 0 all ok (skipped and does_not_fit results included); 1 when a variant failed
(build_failed, incorrect, crashed, timeout, invalid), a result was lost with its Ray node, or, for compare/bisect, a significant
regression; 2 for usage or configuration errors, and when the Ray cluster's head was lost.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys

# Imported when a command line is read, not with this module: `entry` starts flopwatch's local
# Ray head before them (`pipeline.fleet.head_ahead`).
_BUILT_IN = ("run", "ls", "report", "doctor", "selftest", "new", "init", "export", "store", "plan")
_OPTIONAL = ("compare", "bisect", "detect", "nightly")


def _commands(only: str | None = None) -> dict:
    """The subcommands' modules by name, built-in ones first; only `only`'s where it names one
    that is installed (a command line imports its own command's module, not all fourteen)."""
    names = (only,) if only in _BUILT_IN + _OPTIONAL else _BUILT_IN + _OPTIONAL
    found = {}
    for name in names:
        try:
            found[name] = importlib.import_module(f"pipeline.commands.{name}")
        except ModuleNotFoundError as exc:
            if name in _BUILT_IN or exc.name != f"pipeline.commands.{name}":
                raise
    return found or _commands()


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every subcommand, or where `only` names one, that one alone
    (what `main` reads a command line with; `flopwatch -h` and a misspelt command get them all)."""
    p = argparse.ArgumentParser(prog="flopwatch", description="Benchmark every kernel variant of a commit.")
    sub = p.add_subparsers(dest="command", required=True)
    for name, module in _commands(only).items():
        sp = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sp)
        sp.set_defaults(handler=module.main)
    return p


def main(argv: list[str] | None = None) -> int:
    from pipeline.commands.common import UsageError
    from pipeline.fleet import headwatch
    from pipeline.fleet.headwatch import HeadLost
    from pipeline.fleet.ray_access import ClusterError
    from pipeline.project.checkout import CheckoutError
    from pipeline.project.config import ConfigError
    from pipeline.store import LocationError, StoreError

    argv = sys.argv[1:] if argv is None else argv
    if argv and not argv[0].startswith("-") and argv[0] not in _BUILT_IN + _OPTIONAL:
        print(unknown_command(argv[0]), file=sys.stderr)
        return 2
    args = parser(argv[0] if argv else None).parse_args(argv)
    headwatch.exit_if_stuck()
    try:
        return args.handler(args)
    except (ConfigError, CheckoutError, StoreError, LocationError, UsageError, ClusterError, HeadLost) as exc:
        for line in str(exc).splitlines() or [""]:  # several mistakes of one file: a line each
            print(f"flopwatch: error: {line}", file=sys.stderr)
        return 2


def unknown_command(name: str) -> str:
    """The error for a command flopwatch does not have: the nearest, and every command (argparse
    gives only its three lines of usage and "invalid choice")."""
    names = _BUILT_IN + _OPTIONAL
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return (f"usage: flopwatch COMMAND [options]   (flopwatch COMMAND -h for its options)\n"
            f"flopwatch: error: unknown command {name!r}{hint} (commands: {', '.join(names)})")


PROFILE_ENV = "FLOPWATCH_PROFILE"  # a file: the command's own work under cProfile, written there


def _profiled(path: str) -> int:
    """`main` under cProfile, its statistics written to `path` (read them with `pstats`): where
    a command's driver spends the time outside its jobs, on the machine that shows it."""
    import cProfile

    profile = cProfile.Profile()
    try:
        return profile.runcall(main)
    finally:
        profile.dump_stats(path)


def entry() -> None:
    """The `flopwatch` program: `main`, then the process ends at once. Everything a command
    keeps is written by then (the store commits each write, the report is on disk, the output
    is flushed below), so the interpreter's teardown (0.2-0.4 s of module and thread clean-up)
    and Ray's disconnect from a cluster that stays up (0.27 s; the connection closes with the
    process) would only keep a CI job, and the GPU, waiting. A command's own local Ray is
    still stopped by the command. Before anything else is imported, the local Ray head the
    command will attach to is started, where it will need one (`pipeline.fleet.head_ahead`)."""
    from pipeline.fleet import head_ahead

    head_ahead.start(sys.argv[1:])
    from pipeline.fleet import cluster

    cluster.leave_with_process()
    profile_to = os.environ.get(PROFILE_ENV)
    code = main() if not profile_to else _profiled(profile_to)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    entry()
