"""A repository's tests read as the repository's own statement of what an entry must compute,
without running them: where a test calls an entry and compares its result with another
callable's, and the arguments it calls them with.

    y1 = liger_attn_res(V, w_query, w_norm, eps=1e-6)     # the entry (or what it wraps)
    y2 = pytorch_attn_res(V, w_query, w_norm)              # another callable
    assert_verbose_allclose(y1, y2, atol=atol, rtol=rtol)  # compared: y2's callable is a reference

The comparison is any of `COMPARE` (`torch.testing.assert_close`, `torch.allclose`, ...), its two
sides in either order, written inline or through local variables (`h, r = entry(...)` too); an
entry that writes its output (`result = args[-1]; myadd_out(*args); expected = torch.add(*args[:2])`)
is compared on the buffer it is handed. The arguments come back as expressions of the test, each
resolved as far as the test says (`source.call_args`). The tests are read once into an index of
the names they write (`TestNames`); each entry then reads closely only the tests naming it."""

from __future__ import annotations

import ast
import re
import sys

from pipeline.onboarding.source.call_args import arg_of, args_of
from pipeline.onboarding.source.py_values import dotted
from pipeline.onboarding.source.pytest_file import (
    COMPARE,
    PytestFile,
    aliases_of,
    callee_of,
    is_callee,
    is_class,
    strip,
)
from pipeline.onboarding.source.records import Calls, Comparison, TestNames
from pipeline.onboarding.source.repo import is_test

GIVES = (TestNames,)


def matches(repo, rel: str) -> bool:
    """A test module (`source.repo.is_test`)."""
    return is_test(rel)


def read(repo, rel: str) -> list[TestNames]:
    """The words the test file writes: a test calls an entry only if it names it."""
    return [TestNames(rel, frozenset(re.findall(r"\w+", repo.text(rel))))]


def naming(repo, rel: str, word: str) -> bool:
    """Whether the test file writes `word` (an identifier) as a word of its own."""
    found = repo.records(sys.modules[__name__], rel)
    return bool(found) and word in found[0].names


# -- finding the comparisons -------------------------------------------------------------------------

def comparisons(repo, path: str, callees: list[tuple[str, ...]], same: list[tuple[str, ...]] = (),
                origins: dict | None = None) -> list[Comparison]:
    """Every comparison in the test file of a call of the entry (a callee ending with one of
    `callees`' dotted parts: ("liger_dyt",), ("LigerDyTFunction", "apply")) with a call of a
    callable that is neither the entry nor one of `same` (the entry's own implementation:
    comparing with it checks nothing)."""
    f = repo.pytest_file(path)
    if f.tree is None:
        return []
    aliases = aliases_of(f, callees)
    out = []
    for node in ast.walk(f.tree):
        if not (isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] in COMPARE):
            continue
        sides = compared_sides(node)
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        for key in ("actual", "expected", "input", "other", "a", "b"):
            if key in kw and len(sides) < 2:
                sides.append(kw[key])
        if len(sides) != 2:
            continue
        fn = f.scope(node)
        found = [_producer(f, fn, s, node.lineno) for s in sides]
        for mine, theirs in ((found[0], found[1]), (found[1], found[0])):
            if mine is None or theirs is None or theirs[1] is not None:
                continue
            call, out_index = mine
            other_call = theirs[0]
            entry_name = callee_of(f, call.func, aliases)
            other_name = callee_of(f, other_call.func, aliases)
            if not is_callee(entry_name, callees, f, origins) or is_callee(other_name, callees) or is_callee(other_name, same):
                continue
            if not other_name or other_name.split(".")[-1] in COMPARE:
                continue
            head = other_name.split(".")[0]
            local = other_name in f.functions and "." not in other_name \
                and any(n is f.functions[other_name] for n in f.tree.body)
            if not local and head not in f.imports:
                continue  # a module the test built (`ref_attn(x)`), a tensor's method: no callable to name
            if local and isinstance(f.functions.get(other_name), ast.ClassDef) or is_class(f, other_name):
                continue  # a class: constructed with the test's arguments first
            q = f.qualified(other_name)
            e_args, e_kw = args_of(f, fn, call)
            o_args, o_kw = args_of(f, fn, other_call)
            out.append(Comparison(path, node.lineno, getattr(fn, "name", ""), dotted(node.func).split(".")[-1],
                                  entry_name, q, local,
                                  e_args, e_kw, o_args, o_kw, out_index, tolerance(f, fn, node)))
            break
    return sorted(out, key=lambda c: c.line)


def compared_sides(compare: ast.Call) -> list[ast.AST]:
    """The two compared sides of a comparison call: its first two arguments, after a leading
    label (`assert_close('o', ref, tri, 0.005)`, flash-linear-attention's helper)."""
    args = list(compare.args)
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        args = args[1:]
    return args[:2]


def tolerance(f: PytestFile, fn: ast.AST, compare: ast.Call) -> dict:
    """rtol / atol a comparison passes, as numbers (`rtol=rtol` read from the parametrize row)."""
    out = {}
    for k in compare.keywords:
        if k.arg in ("rtol", "atol"):
            value = arg_of(f, fn, k.value, compare.lineno).value
            if type(value) in (int, float):
                out[k.arg] = float(value)
    return out


def entry_calls(repo, path: str, callees: list[tuple[str, ...]], origins: dict | None = None) -> list[Calls]:
    """Every call of the entry in the test file, with its arguments as far as the test tells."""
    f = repo.pytest_file(path)
    if f.tree is None:
        return []
    aliases = aliases_of(f, callees)
    out = []
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Call) and is_callee(callee_of(f, node.func, aliases), callees, f, origins):
            fn = f.scope(node)
            args, kwargs = args_of(f, fn, node)
            out.append(Calls(path, node.lineno, getattr(fn, "name", ""), args, kwargs, callee_of(f, node.func, aliases)))
    return sorted(out, key=lambda c: c.line)



def _producer(f: PytestFile, fn: ast.AST, side: ast.AST, line: int, depth: int = 0):
    """(the call whose result `side` is, the index of the entry argument when `side` is a
    buffer handed to a call) or None."""
    if depth > 6:
        return None
    side = strip(side)
    if isinstance(side, ast.Subscript) and isinstance(side.value, ast.Call):  # entry(...)[0]
        side = side.value
    if isinstance(side, ast.Call):
        return side, None
    if isinstance(side, ast.Name):
        bound = f.assigned(fn, side.id, line)
        if bound is not None:
            value, _ = bound
            value = strip(value)
            if isinstance(value, ast.Call):
                return value, None
            if isinstance(value, (ast.Name, ast.Subscript)):
                handed = _handed(f, fn, value, line)
                if handed is not None:
                    return handed
                return _producer(f, fn, value, line, depth + 1)
    return None


def _handed(f: PytestFile, fn: ast.AST, buffer: ast.AST, line: int):
    """The call (before `line`) that `buffer` is handed to as an argument, and its position:
    `result = args[-1]` then `myadd_out(*args)` hands it as the last argument."""
    text = ast.unparse(buffer)
    for node in sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call) and n.lineno < line),
                       key=lambda n: -n.lineno):
        if any(isinstance(a, ast.Starred) for a in node.args) and isinstance(buffer, ast.Subscript) \
                and ast.unparse(buffer.value) == ast.unparse(node.args[0].value if isinstance(node.args[0], ast.Starred)
                                                             else node.args[0]):
            index = buffer.slice
            if isinstance(index, ast.UnaryOp) and isinstance(index.operand, ast.Constant):
                return node, -index.operand.value
            if isinstance(index, ast.Constant) and type(index.value) is int:
                return node, index.value
        for i, a in enumerate(node.args):
            if ast.unparse(a) == text:
                return node, i
    return None


# -- the arguments of a call ------------------------------------------------------------------------
