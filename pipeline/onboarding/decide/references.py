"""The reference an entry is checked against, found where the repository keeps it, in this order
(the first found is taken; each says how it was found):

0. the repository's own, where it keeps one for the entry (by name, 2., or a test comparing the
   entry with a callable it writes, 3.: `repository_reference`), ahead of a built-in op the
   entry's name says — which may then be timed as its peer (`decide.peer`);
1. a built-in op (`workers/ops`, `decide.ops.builtin`): the entry's name is one of the op's
   ENTRY_NAMES (or, where an op has none, the op's own name once the repository's prefix is
   taken off: `liger_rms_norm` → rms_norm), and its parameters give the op's inputs;
2. the repository's own reference by name (`conventions.ref_names`) in the entry's module, its
   package or its tests; a class `Torch<X>` / `Naive<X>` is noted, not taken;
3. the repository's tests: a test comparing the entry's result (or that of the function the
   entry only forwards to) with another callable's (`conventions.compared_in_tests`);
4. the test's own statements, where it computes the compared value itself
   (`conventions.sliced_from_tests`, written by `decide.sliced_reference`);
5. none: the entry is measured unchecked (its output kept per commit, so a change shows).

Each entry picks from what the readers read once: the tests are asked only where they name it.
Decisions over records; nothing is imported or run."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import PurePosixPath

from pipeline.onboarding.conventions import compared_in_tests, module_entries, ref_names, sliced_from_tests
from pipeline.onboarding.conventions.ref_names import (
    class_names_for,
    mentions_class,
    names_for,
    squash,
    stems,
)
from pipeline.onboarding.decide.inputs import equivalent_for, from_calls, guessed_inputs, inputs_of, lines_up
from pipeline.onboarding.decide.sliced_reference import REFERENCE_FILE, reference_source
from pipeline.onboarding.source.records import (
    Calls,
    Comparison,
    Entry,
    Equivalent,
    Forwarder,
    Inputs,
    Reference,
    Sliced,
    Where,
)
from pipeline.onboarding.source.repo import is_test


def choose(repo, entry: Entry, where: Where, prefix: str, package: str,
           same_as: list[Equivalent]) -> tuple[Reference, Inputs]:
    """The reference of an entry that is no built-in op (by name → a test's comparison → the
    test's own statements → none), and the inputs of one call: from the test comparing the
    entry (it called it as the reference expects), else from any test's call of it, else its
    required parameters, guessed."""
    params = list(entry.params)
    required = entry.required
    comparisons = from_tests(repo, entry.name, prefix, same_as)
    convention = by_convention(repo, entry.name, prefix, where.rel, package)
    calls = calls_in_tests(repo, same_as)
    notes = list(convention.notes) if convention else []
    usable = []
    for c in comparisons:
        inputs = inputs_of(params, required, same_as, c.entry_call, c.entry_args, c.entry_kwargs, c.output_index)
        if inputs is not None and lines_up(inputs, c):
            usable.append((c, dataclasses.replace(inputs, where=f"{c.file}:{c.line}")))
    if convention is not None and convention.kind == "convention":
        # its inputs (and the keywords it is given): a test comparing with it, else any comparison or call
        compared = next(((c, i) for c, i in usable if c.other.split(".")[-1] == convention.name), None)
        chosen = dataclasses.replace(convention, comparison=compared[0]) if compared else convention
        source = compared[1] if compared else \
            (usable[0][1] if usable else from_calls(params, required, same_as, calls))
    elif usable:
        c, source = usable[0]
        shown = c.other if not c.other_local and c.other.startswith("torch.") else \
            ".".join(c.other.split(".")[-2:]) if c.other.endswith((".apply", ".default")) else c.other.split(".")[-1]
        chosen = Reference("test", file=c.file, name=shown, line=c.line, compared_by=c.compared_by, comparison=c)
    elif (sliced := _sliced(repo, entry, prefix, params, required, same_as)) is not None:
        chosen, source = sliced
    else:
        chosen = Reference("none", notes=tuple(notes))
        source = from_calls(params, required, same_as, calls)
    if source is None:
        source = guessed_inputs(params, required, entry.output)
    return chosen, source


def repository_reference(repo, entry: Entry, where: Where, prefix: str, package: str,
                         same_as: list[Equivalent]) -> bool:
    """Whether the repository keeps a reference of its own for the entry: a function by name
    (beside it, in its package or its tests), or a test comparing the entry with a callable the
    repository defines. It is the check, ahead of a built-in op its name says: a `scaled_silu`
    that computes 2·x·σ(x) beside its `scaled_silu_ref` is no `silu`."""
    convention = by_convention(repo, entry.name, prefix, where.rel, package)
    if convention is not None and convention.kind == "convention":
        return True
    for c in from_tests(repo, entry.name, prefix, same_as):
        if not (c.other_local or _defined_here(repo, c.other)):
            continue
        inputs = inputs_of(list(entry.params), entry.required, same_as, c.entry_call, c.entry_args, c.entry_kwargs,
                           c.output_index)
        if inputs is not None and lines_up(inputs, c):
            return True
    return False


def _defined_here(repo, dotted: str) -> bool:
    """Whether a dotted callable (`test.utils.naive_norm`) is a module of the repository's."""
    module = dotted.rpartition(".")[0].replace(".", "/")
    files = (f"{module}.py", f"{module}/__init__.py")
    return bool(module) and any(p in files or p.endswith(tuple("/" + f for f in files)) for p in repo.sources)


def _sliced(repo, entry: Entry, prefix: str, params: list[str], required: int,
            same_as: list[Equivalent]) -> tuple[Reference, Inputs] | None:
    """(the reference made of a test's own statements, the inputs of its entry call), from the
    first test comparing the entry with a value it computes whose slice can be written."""
    for s in slices(repo, entry.name, prefix, same_as, params):
        c = s.comparison
        inputs = inputs_of(params, required, same_as, c.entry_call, c.entry_args, c.entry_kwargs, None)
        if inputs is None:
            continue
        text = reference_source(s, inputs.names, entry.name)
        inputs = dataclasses.replace(inputs, where=f"{c.file}:{c.line}")
        if text is not None:
            return Reference("test", file=c.file, name=f"its own statements, in {REFERENCE_FILE}", line=c.line,
                             compared_by=c.compared_by, comparison=c, sliced=text), inputs
    return None


# -- 2. by name -----------------------------------------------------------------------------------

def by_convention(repo, name: str, prefix: str, rel: str, package: str) -> Reference | None:
    """A reference named after the entry, in its module, then its package, then the tests."""
    # `chunk_gla_fwd` beside `chunk_gla` in one module is that entry's helper (other arguments,
    # other results): a stem naming another function of the module is that function's, not this one's
    siblings = _functions_of(repo, rel) - {name}
    names = [x for x in stems(name, prefix) if x not in siblings]
    wanted_fn = {k: v for k, v in names_for(names).items() if k != name}
    wanted_cls = class_names_for(names)
    tests = sorted(p for p in repo.sources if is_test(p))
    in_package = sorted(p for p in repo.sources if package and p.startswith(package + "/") and p.endswith(".py")
                        and p != rel and p not in tests)
    notes: list[str] = []
    for path in [rel, *in_package, *tests]:
        text = repo.text(path)
        if not any(w in text for w in wanted_fn) and not mentions_class(text):
            continue
        for r in repo.records(ref_names, path):
            if r.kind == "function" and r.name in wanted_fn:
                return Reference("convention", file=path, name=r.name, line=r.line, module=repo.module_of(path),
                                 notes=tuple(notes))
            if r.kind == "class" and squash(r.name) in wanted_cls:
                # [reference] calls a function with the inputs; a module must be built first
                notes.append(f"{path}:{r.line} class {r.name} is a reference by name, but an nn.Module "
                             + ("([reference] calls functions: wrap it in one)" if r.bare
                                else "built with constructor arguments"))
    return Reference("none", notes=tuple(notes)) if notes else None


def _functions_of(repo, rel: str) -> frozenset[str]:
    tree = repo.tree(rel)
    return frozenset(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))) \
        if tree is not None else frozenset()


def references_beside(repo, rel: str, names: list[str], prefix: str, package: str) -> dict[str, str]:
    """Reference → the entry it is the reference of, for the module's functions that are another
    function's reference by name (`selective_scan_ref`): that entry's check, not an entry."""
    refs: dict[str, str] = {}
    for name in names:
        ref = by_convention(repo, name, prefix, rel, package)
        if ref is not None and ref.kind == "convention" and ref.file == rel and ref.name != name:
            refs.setdefault(ref.name, name)
    return refs


# -- 3. and 4. from the tests ------------------------------------------------------------------------

def equivalents(repo, entry: Entry, package: str, imports: dict[str, str] | None = None,
                module: str = "") -> list[Equivalent]:
    """The callees whose call is a call of the entry. `imports`: name → dotted origin in the
    entry's module (`LigerDyTFunction` → "liger_kernel.ops.LigerDyTFunction"), and `module` the
    entry's own dotted module, so that a test's call of a namesake (Liger's chunked_loss has its
    own `liger_fused_linear_jsd`) is not taken for the entry's."""
    params = list(entry.params)
    kw = list(entry.keywords)
    out = [Equivalent((entry.name,), tuple(params), {p: p for p in params + kw},
                      f"{module}.{entry.name}" if module else "")]
    forward = entry.forwards
    if forward is None:
        return out
    out.append(Equivalent(forward.callee, forward.params, {}, (imports or {}).get(forward.callee[0], "")))
    for other in _forwarders(repo, package):
        if other.forwarded.callee != forward.callee or other.name == entry.name \
                or len(other.forwarded.params) != len(forward.params):
            continue
        mapping = dict(zip(other.forwarded.params, forward.params))  # the sibling's parameter → the entry's
        out.append(Equivalent((other.name,), tuple(mapping.get(p, "") for p in other.params), mapping))
    return out


def _forwarders(repo, package: str) -> list[Forwarder]:
    """The package's top-level functions that only forward to another callable."""
    out: list[Forwarder] = []
    for path in sorted(p for p in repo.sources if package and p.startswith(package + "/") and p.endswith(".py")):
        out += module_entries.forwarders(repo, path)
    return out


def from_tests(repo, name: str, prefix: str, same_as: list[Equivalent]) -> list[Comparison]:
    """The tests' comparisons of the entry (or an equivalent call) with another callable, the
    test files named after the entry first."""
    callees = [e.callee for e in same_as]
    return repo.reading("comparisons", f"{name}:{prefix}:{callees}", lambda: _from_tests(repo, name, prefix, same_as))


def _from_tests(repo, name: str, prefix: str, same_as: list[Equivalent]) -> list[Comparison]:
    callees = [e.callee for e in same_as]
    found = []
    camel = prefix.rstrip("_").lower()
    for path in _tests_calling(repo, name, prefix, callees):
        for c in compared_in_tests.comparisons(repo, path, callees, callees[1:], _origins(same_as)):
            if camel and any(w.lower().startswith(camel) for w in c.other.split(".")[-2:]) \
                    and not ref_names.shaped(c.other.split(".")[-1]):
                continue  # the repository's own implementation (its module wrapper, its Function)
            found.append(c)
    return found


def slices(repo, name: str, prefix: str, same_as: list[Equivalent], params: list[str]) -> list[Sliced]:
    """The tests' comparisons of the entry with a value they compute themselves (an expression,
    a module they build). Test files named after the entry first."""
    callees = [e.callee for e in same_as]

    def positional_of(callee: str) -> tuple[str, ...]:
        return equivalent_for(callee, same_as).positional

    found = []
    for path in _tests_calling(repo, name, prefix, callees):
        found += sliced_from_tests.from_test_file(repo, path, callees, callees[1:], _origins(same_as), params,
                                                  positional_of)
    return found


def _tests_calling(repo, name: str, prefix: str, callees: list[tuple[str, ...]]) -> list[str]:
    """The test files that name one of `callees`, those named after the entry first."""
    named = stems(name, prefix)
    tests = (p for p in repo.sources if is_test(p) and any(compared_in_tests.naming(repo, p, c[-1]) for c in callees))
    return sorted(tests, key=lambda p: (not any(PurePosixPath(p).stem in (f"test_{s}", f"{s}_test") for s in named), p))


def calls_in_tests(repo, same_as: list[Equivalent]) -> list[Calls]:
    """Every call of the entry (or an equivalent) in the tests, for its arguments."""
    callees = [e.callee for e in same_as]
    out = []
    for path in sorted(p for p in repo.sources if is_test(p)):
        if any(compared_in_tests.naming(repo, path, c[-1]) for c in callees):
            out += compared_in_tests.entry_calls(repo, path, callees, _origins(same_as))
    return out


def _origins(same_as: list[Equivalent]) -> dict:
    return {e.callee: e.origin for e in same_as if e.origin}
