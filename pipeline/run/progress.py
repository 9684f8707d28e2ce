"""Progress on stderr: a rich bar on a terminal; one plain line per finished step where stderr
is a file or a CI log (a bar there shows nothing until the end: a long run looked hung) and
with `--json` (stdout is then for machines; stderr still says how far the run got)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from workers.core import untrusted


class Progress:
    def __init__(self, enabled: bool = True, plain: bool | None = None):
        """`plain`: lines instead of a bar; default: whenever stderr is not a terminal."""
        self.enabled = enabled
        self.console = Console(file=sys.stderr)
        self.plain = (not sys.stderr.isatty()) if plain is None else plain

    def note(self, text: str) -> None:
        if self.enabled:
            self.console.print(untrusted.terminal(text), highlight=False, markup=False)

    @contextmanager
    def task(self, description: str, total: int) -> Iterator[Callable[[str], None]]:
        if not self.enabled or total == 0:
            yield lambda _msg="": None
            return
        if self.plain:
            yield self._lines(description, total)
            return
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[last]}", markup=False))
        with RichProgress(*columns, console=self.console, transient=False) as bar:
            tid = bar.add_task(description, total=total, last="")

            def advance(msg: str = "") -> None:
                bar.update(tid, advance=1, last=untrusted.one_line(msg)[:60])

            yield advance

    @staticmethod
    def _lines(description: str, total: int) -> Callable[[str], None]:
        """`[n/total] what finished (seconds since the task began)`, one line each, flushed."""
        began, done = time.monotonic(), [0]

        def advance(msg: str = "") -> None:
            done[0] += 1
            what = untrusted.one_line(msg)[:160] if msg else "done"
            print(f"{description} [{done[0]}/{total}] {what} ({time.monotonic() - began:.0f} s)", file=sys.stderr,
                  flush=True)

        return advance
