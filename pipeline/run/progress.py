"""Progress bars on stderr (rich), or nothing when output is for machines."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from workers.core import untrusted


class Progress:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.console = Console(file=sys.stderr)

    def note(self, text: str) -> None:
        if self.enabled:
            self.console.print(untrusted.terminal(text), highlight=False, markup=False)

    @contextmanager
    def task(self, description: str, total: int) -> Iterator[Callable[[str], None]]:
        if not self.enabled or total == 0:
            yield lambda _msg="": None
            return
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[last]}", markup=False))
        with RichProgress(*columns, console=self.console, transient=False) as bar:
            tid = bar.add_task(description, total=total, last="")

            def advance(msg: str = "") -> None:
                bar.update(tid, advance=1, last=untrusted.one_line(msg)[:60])

            yield advance
