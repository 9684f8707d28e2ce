"""A test's own statements as the reference, where it computes the expected value inline.

Many tests compare an entry with an expression or with a module the test builds, not with a
function one could import:

    x_in = liger_mhc_pre(x1, h_pre1)                              # the entry
    x2 = x1.detach().clone().requires_grad_(True)
    x_in_ref = (x2.float() * h_pre2.unsqueeze(-1)).sum(dim=-2)    # the expected value, inline
    assert_verbose_allclose(x_in.float(), x_in_ref, rtol=tol, atol=tol)

or `ref = TorchMultiTokenAttention(C_in=C_in, ...)`, `ref.weight.copy_(weight)`, `out2 = ref(scores2)`.
The reference is then the backward slice of the compared value: the statements of the test
before the comparison that it depends on, stopping at the tensors the entry is also given
(`x2` is a copy of `x1`, the entry's first argument). `decide.sliced_reference` writes that
slice as a function of the entry's inputs into the draft (`reference.py`), so the check runs the
test's own arithmetic and the draft says where it came from.

Nothing is run while drafting; the slice is refused (None) where it would need the entry's own
output, `self`, or a loop around the comparison.
"""

from __future__ import annotations

import ast
import sys
from pathlib import PurePosixPath

from pipeline.onboarding.conventions.compared_in_tests import compared_sides, tolerance
from pipeline.onboarding.source.call_args import args_of
from pipeline.onboarding.source.py_values import dotted
from pipeline.onboarding.source.pytest_file import COMPARE, aliases_of, callee_of, is_callee, strip
from pipeline.onboarding.source.records import Compared, Comparison, Sliced
from pipeline.onboarding.source.repo import is_test

GIVES = (Compared,)
# Calls whose only effect a reference does not need.
_SKIPPED_METHODS = ("backward", "zero_", "retain_grad", "register_hook")


def matches(repo, rel: str) -> bool:
    """A test module that names one of the comparisons (`COMPARE`)."""
    return is_test(rel) and any(word in repo.text(rel) for word in COMPARE)


def read(repo, rel: str) -> list[Compared]:
    """The comparisons the file makes inside its test functions (an entry's slices are read
    from these, once the entry is known)."""
    f = repo.pytest_file(rel)
    if f.tree is None:
        return []
    out = []
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Call) and (by := dotted(node.func).split(".")[-1]) in COMPARE:
            fn = f.scope(node)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(Compared(rel, node.lineno, fn.name, by))
    return sorted(out, key=lambda c: c.line)


def from_test_file(repo, path: str, callees: list[tuple[str, ...]], same: list[tuple[str, ...]],
                   origins: dict, params: list[str], positional_of) -> list[Sliced]:
    """Every comparison of an entry call in the file whose other side the test computes itself.
    `positional_of(callee)`: the entry parameter each positional argument of that callee is
    (`Equivalent.positional`); keywords are taken by name."""
    if not repo.records(sys.modules[__name__], path):
        return []  # no comparison in a test function
    f = repo.pytest_file(path)
    if f.tree is None:
        return []
    aliases = aliases_of(f, callees)
    by_call: dict[ast.Call, dict] = {}
    for node in ast.walk(f.tree):
        if not (isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] in COMPARE):
            continue
        sides = compared_sides(node)
        if len(sides) != 2:
            continue
        fn = f.scope(node)
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for mine, theirs in ((sides[0], sides[1]), (sides[1], sides[0])):
            found = _entry_output(f, fn, mine, node.lineno, callees, aliases, origins)
            if found is None:
                continue
            call, index = found
            entry = by_call.setdefault(call, {"fn": fn, "compare": node, "sides": {}})
            entry["sides"].setdefault(index, (strip(theirs), node))
            break
    out = []
    for call, seen in by_call.items():
        sliced = _slice(f, seen["fn"], call, seen["sides"], callees, same, aliases, params, positional_of, path)
        if sliced is not None:
            out.append(sliced)
    return sorted(out, key=lambda s: s.comparison.line)


def _entry_output(f, fn, side, line, callees, aliases, origins):
    """(the entry call, the element of its result) that a compared side is, or None: `y` bound
    by `y = entry(...)` (element None), `a` of `a, b = entry(...)` (element 0)."""
    side = strip(side)
    if isinstance(side, ast.Call) and is_callee(callee_of(f, side.func, aliases), callees, f, origins):
        return side, None
    if not isinstance(side, ast.Name):
        return None
    bound = f.assigned(fn, side.id, line)
    if bound is None:
        return None
    value, index = bound
    value = strip(value)
    if isinstance(value, ast.Call) and is_callee(callee_of(f, value.func, aliases), callees, f, origins):
        return value, index
    return None


# -- the slice -------------------------------------------------------------------------------------

def _slice(f, fn, call: ast.Call, sides: dict, callees, same, aliases, params, positional_of, path) -> Sliced | None:
    targets = _targets_of(fn, call)
    if targets is None:
        return None
    if isinstance(targets, ast.Tuple):
        if set(sides) != set(range(len(targets.elts))):
            return None  # every element the entry returns is compared, or the reference returns less
        order = list(range(len(targets.elts)))
    else:
        if None not in sides:
            return None
        order = [None]
    flat = list(_flatten(f, fn, fn.body, ()))
    compare_nodes = {sides[i][1] for i in order}
    last = max(n.lineno for n in compare_nodes)
    at = next((k for k, (s, _) in enumerate(flat) if s.lineno <= last <= s.end_lineno), None)
    if at is None or not all(any(s.lineno <= n.lineno <= s.end_lineno and isinstance(s, ast.Expr) for s, _ in flat)
                             for n in compare_nodes):
        return None  # a comparison inside a loop or a branch the first row does not take
    callee = callee_of(f, call.func, aliases)
    positional = positional_of(callee)
    by_param = {}
    for a, p in zip(call.args, positional):
        if isinstance(a, ast.Starred):
            return None
        if p:
            by_param[p] = a
    for k in call.keywords:
        if k.arg in params:
            by_param[k.arg] = k.value
    copies = _copies(flat)
    entry_names = {p: strip(e).id for p, e in by_param.items() if isinstance(strip(e), ast.Name)}
    stops = {}  # a test name → the entry parameter whose tensor it is a copy of
    for p, name in entry_names.items():
        for other in copies.get(name, {name}):
            stops.setdefault(other, p)
    produced = _names_stored(targets)
    outputs = [sides[i][0] for i in order]
    needed = set().union(*(reads(o) for o in outputs))
    kept = []
    for stmt, wrappers in reversed(flat[:at]):
        if needed & produced or "self" in needed:
            return None
        live = needed - set(stops)
        stored = stores(stmt)
        if stored & live or (_is_effect(stmt) and _touched(f, stmt) & live):
            if _calls_any(f, stmt, callees, aliases) or _calls_any(f, stmt, same, aliases):
                return None  # the entry (or its own implementation) on the expected side: checks nothing
            kept.append((stmt, wrappers))
            needed = (needed - stored) | reads(stmt) | {n for w in wrappers for n in reads_items(w)}
    if needed & produced or "self" in needed:
        return None
    kept.reverse()
    comparison = Comparison(path, min(n.lineno for n in compare_nodes), fn.name,
                                       dotted(next(iter(compare_nodes)).func).split(".")[-1],
                                       callee, "the test's own statements", True,
                                       *args_of(f, fn, call), (), {}, None,
                                       tolerance(f, fn, next(iter(compare_nodes))))
    module = ".".join(PurePosixPath(path).with_suffix("").parts)
    return Sliced(comparison, by_param, tuple(outputs), tuple(kept), frozenset(needed), module, stops,
                  tuple(p for _, p in zip(call.args, positional)), f, fn)


def _targets_of(fn, call):
    """What the entry's result is bound to (a Name or a Tuple of Names), the call itself when it
    is compared inline, None where it is something else."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and node.value is call and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name) or isinstance(t, ast.Tuple) and all(isinstance(e, ast.Name) for e in t.elts):
                return t
            return None
    return ast.Name(id="<inline>")


def _flatten(f, fn, body, wrappers):
    """The test's statements in order, each with the `with` blocks around it; an `if` on a
    parametrize flag (`if bias:`) is read for the first row, as the inputs are."""
    for stmt in body:
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from _flatten(f, fn, stmt.body, wrappers + (stmt,))
        elif isinstance(stmt, ast.If) and (truth := f.truth(fn, stmt.test)) is not None:
            yield from _flatten(f, fn, stmt.body if truth else stmt.orelse, wrappers)
        else:
            yield stmt, wrappers


def _copies(flat) -> dict[str, set[str]]:
    """Names bound once to a copy of another's values (`x2 = x1.detach().clone()`), grouped:
    each name → every name holding the same tensor."""
    bound: dict[str, int] = {}
    pairs = []
    for stmt, _ in flat:
        for name in stores(stmt):
            bound[name] = bound.get(name, 0) + 1
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            source = strip(stmt.value)
            if isinstance(source, ast.Name):
                pairs.append((stmt.targets[0].id, source.id))
    groups: dict[str, set[str]] = {}
    for a, b in pairs:
        if bound.get(a, 0) != 1:
            continue
        group = groups.get(a, {a}) | groups.get(b, {b})
        for name in group:
            groups[name] = group
    return groups


def stores(stmt) -> set[str]:
    """The names a statement binds."""
    out = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
    return out


def _names_stored(target) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)} - {"<inline>"}


def reads(node) -> set[str]:
    """The names an expression or statement reads."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def reads_items(with_stmt) -> set[str]:
    """The names a `with` statement's items read."""
    return set().union(*(reads(item.context_expr) for item in with_stmt.items)) if with_stmt.items else set()


def _is_effect(stmt) -> bool:
    """A call kept for what it does to its arguments (`ref.weight.copy_(w)`,
    `torch.nn.init.zeros_(b)`), not a backward pass, a print or a comparison."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    name = dotted(stmt.value.func).split(".")[-1]
    return name not in _SKIPPED_METHODS and name not in COMPARE and name != "print"


def _touched(f, stmt) -> set[str]:
    """What a call statement may change: its arguments and the object whose method it is
    (`ref.weight` of `ref.weight.copy_(w)`), not a module it is reached through (`torch.nn.init`)."""
    call = stmt.value
    out = set().union(*(reads(a) for a in call.args), *(reads(k.value) for k in call.keywords))
    root = call.func
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and root.id not in f.imports:
        out.add(root.id)
    return out


def _calls_any(f, stmt, callees, aliases) -> bool:
    return any(isinstance(n, ast.Call) and is_callee(callee_of(f, n.func, aliases), callees)
               for n in ast.walk(stmt))
