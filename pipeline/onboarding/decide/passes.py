"""Which passes an entry's draft measures (`modes`, docs/variants.md): forward, backward and full
where its output carries an autograd graph — the entry calls the `apply` of an autograd Function
of the repository that defines a backward (every Liger loss and norm), or a test of the
repository calls `backward()` on its output — else forward alone. A training kernel's backward
is most of its cost: a draft measuring only its forward would miss the pass that matters.

Only an entry that returns its output may list the backward passes (one that writes into a
buffer the harness hands in has no graph to differentiate)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.onboarding.conventions import autograd, compared_in_tests
from pipeline.onboarding.source.records import AutogradFunction, Entry
from pipeline.onboarding.source.repo import is_test
from workers.core.params import FORWARD, MODES


@dataclass(frozen=True)
class Passes:
    """modes: the passes drafted, forward first; why: what says the output has a graph ("" for
    forward alone)."""

    modes: tuple[str, ...]
    why: str = ""

    @property
    def differentiated(self) -> bool:
        return self.modes != (FORWARD,)


FORWARD_ONLY = Passes((FORWARD,))


def passes(repo, entry: Entry, package: str, same_as: list) -> Passes:
    """The passes of `entry` (a module function of `package`, "" outside one); `same_as`: the
    calls that are calls of it (`references.Equivalent`), as the tests may write them."""
    if not entry.returns:
        return FORWARD_ONLY
    for name in entry.applies:
        f = _function(repo, entry, package, name)
        if f is not None and f.backward:
            return Passes(MODES, f"it calls {name}.apply, an autograd Function with a backward ({f.backward})")
    callees = [e.callee for e in same_as]
    origins = {e.callee: e.origin for e in same_as if e.origin}
    for path in sorted(p for p in repo.sources if is_test(p)):
        if not any(compared_in_tests.naming(repo, path, c[-1]) for c in callees):
            continue
        line = autograd.differentiated(repo, path, callees, origins)
        if line:
            return Passes(MODES, f"{path}:{line} calls backward() on its output")
    return FORWARD_ONLY


def _function(repo, entry: Entry, package: str, name: str) -> AutogradFunction | None:
    """The autograd Function `name` is in the entry's module: as the module sees it (defined or
    imported there), else — where it does neither (`ops.NormFunction.apply`) — a class of that
    name in its package (or, outside one, the repository); only files whose text defines a class
    of that name are read there."""
    if autograd.sees(repo, entry.file, name):
        return autograd.function_named(repo, entry.file, name)
    scope = [p for p in repo.scripts if p.startswith(package + "/")] if package else list(repo.scripts)
    for path in scope:
        if path != entry.file and f"class {name}" in repo.text(path):
            found = autograd.function_named(repo, path, name)
            if found is not None:
                return found
    return None
