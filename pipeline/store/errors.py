"""The one error a store raises: where, what is wrong, how to recover (the CLI exits 2 with it)."""

from __future__ import annotations


class StoreError(RuntimeError):
    """A store flopwatch cannot use as it is. `str()` is one line: where, what, how to recover."""

    def __init__(self, where: str, problem: str, recovery: str = "") -> None:
        self.where, self.problem, self.recovery = where, problem, recovery
        super().__init__(f"{where}: {problem}" + (f"; {recovery}" if recovery else ""))


def move_aside(path) -> str:
    """The recovery of a store file that cannot be used: keep it, start a new one, re-measure."""
    return (f"move it aside (mv {path} {path}.broken) and run `flopwatch run --resume` to rebuild what it can "
            f"(or point --store / FLOPWATCH_STORE at another store)")
