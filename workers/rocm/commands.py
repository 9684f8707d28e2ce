"""Exact rocprofv3 command lines (pure builders, tested as strings).

Single pass: ``rocprofv3 --pmc A B C --kernel-trace -f csv -d DIR -o NAME
--kernel-include-regex REGEX -- CMD...``. Several passes: an input text file with one
``pmc: ...`` line per pass, given with ``-i``; rocprofv3 re-runs the application once per line
and writes each pass under ``DIR/pmc_N/``. ``--kernel-include-regex`` limits which dispatches
get counters; traces still list every dispatch.
"""
from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RocprofInvocation:
    """argv to run, plus the input file to write first (None for a single pass)."""

    argv: tuple[str, ...]
    input_file: str | None = None
    input_text: str | None = None

    def shell(self) -> str:
        """The command as one shell-quoted string (for logs and reproduction)."""
        return shlex.join(self.argv)


def pmc_input_text(passes: Sequence[Sequence[str]]) -> str:
    """Contents of a rocprofv3 text input file: one ``pmc:`` line per pass."""
    if not passes or any(not p for p in passes):
        raise ValueError("every pass needs at least one counter")
    return "".join("pmc: " + " ".join(p) + "\n" for p in passes)


def _common(output_dir: str, output_name: str, kernel_regex: str | None,
            kernel_trace: bool, rocprofv3: str) -> list[str]:
    argv = [rocprofv3]
    if kernel_trace:
        argv.append("--kernel-trace")
    argv += ["-f", "csv", "-d", output_dir, "-o", output_name]
    if kernel_regex:
        argv += ["--kernel-include-regex", kernel_regex]
    return argv


def rocprofv3_command(passes: Sequence[Sequence[str]], command: Sequence[str], output_dir: str,
                      output_name: str, kernel_regex: str | None = None,
                      kernel_trace: bool = True, input_file: str | None = None,
                      rocprofv3: str = "rocprofv3") -> RocprofInvocation:
    """Command line for collecting ``passes`` of counters while running ``command``.

    One pass goes on the command line with ``--pmc``; more need ``input_file`` (the path the
    caller will write ``input_text`` to) and use ``-i``.
    """
    if not command:
        raise ValueError("the profiled command is empty")
    argv = _common(output_dir, output_name, kernel_regex, kernel_trace, rocprofv3)
    if len(passes) == 1:
        argv[1:1] = ["--pmc", *passes[0]]
        return RocprofInvocation(tuple([*argv, "--", *command]))
    if input_file is None:
        raise ValueError("several passes need an input_file path")
    argv[1:1] = ["-i", input_file]
    return RocprofInvocation(tuple([*argv, "--", *command]), input_file,
                             pmc_input_text(passes))


def kernel_trace_command(command: Sequence[str], output_dir: str, output_name: str,
                         rocprofv3: str = "rocprofv3") -> RocprofInvocation:
    """Command line for a kernel trace only (names, ids and durations of every dispatch)."""
    argv = _common(output_dir, output_name, None, True, rocprofv3)
    return RocprofInvocation(tuple([*argv, "--", *command]))
