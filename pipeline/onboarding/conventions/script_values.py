"""What a Python script says about the tensors and sizes it runs a kernel or an entry at: the
tensors it makes (`torch.randn(M, K, dtype=torch.bfloat16)`, `.half()`, `.to(...)`,
`source.py_tensors`), the integers it gives names (`M, N, K = 4096, 4096, 4096`, `for size in
[1024, 2048]`, argparse defaults, its functions' defaults and call arguments), and every call of a
module's function with its arguments (`tk_kernel.dispatch_micro(A, B, C)`, imports resolved).
Each reading of a file once; nothing is imported or run."""

from __future__ import annotations

import ast

from pipeline.onboarding.source.py_eval import Interpreter
from pipeline.onboarding.source.py_tensors import tensors_made
from pipeline.onboarding.source.py_values import (
    Frame,
    Seq,
    default_of,
    dotted,
    first_lines,
    last,
    may_be_int,
    params_of,
)
from pipeline.onboarding.source.records import PyCall, ScriptSizes, TensorMade

GIVES = (TensorMade, ScriptSizes, PyCall)


def matches(repo, rel: str) -> bool:
    """Any Python file: a script, a test or a module may make the tensors an entry is called with."""
    return rel.endswith(".py")


def read(repo, rel: str) -> list:
    """The file's tensors, its sizes and its calls."""
    return [*tensors(repo, rel), ScriptSizes(rel, sizes(repo, rel)), *calls(repo, rel)]


def tensors(repo, rel: str) -> list[TensorMade]:
    """Every tensor the file makes with a torch, numpy or cupy factory, in source order."""
    return repo.reading("tensors", rel, lambda: tensors_made(i) if (i := repo.interpreter(rel)) else [])


def sizes(repo, rel: str) -> dict[str, list[int]]:
    """Name → the positive integers the script gives it, first seen first: assignments (tuple
    unpacking included), loop variables over literal lists or ranges not starting at 0, argparse
    options (`--M` with `type=int, default=4096` → "M"; `dest=` honoured), and the parameters of
    the script's functions (their defaults and the integers its calls pass)."""
    return repo.reading("sizes", rel, lambda: i.reading(lambda: _sizes(i), {}) if (i := repo.interpreter(rel)) else {})


def calls(repo, rel: str) -> list[PyCall]:
    """Every call whose callee is a dotted name (`module.function(...)`), in source order."""
    return repo.reading("calls", rel, lambda: i.reading(lambda: _calls(i), []) if (i := repo.interpreter(rel)) else [])


def _of_text(path: str, text: str) -> Interpreter | None:
    try:
        return Interpreter(path, ast.parse(text, filename=path))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def script_tensors(path: str, text: str) -> list[TensorMade]:
    """`tensors` of a script given as text."""
    interp = _of_text(path, text)
    return tensors_made(interp) if interp else []


def script_sizes(path: str, text: str) -> dict[str, list[int]]:
    """`sizes` of a script given as text."""
    interp = _of_text(path, text)
    return interp.reading(lambda: _sizes(interp), {}) if interp else {}


def python_calls(path: str, text: str) -> list[PyCall]:
    """`calls` of a script given as text."""
    interp = _of_text(path, text)
    return interp.reading(lambda: _calls(interp), []) if interp else []


def _sizes(interp) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}

    def add(name: str, values: list) -> None:
        for v in values:
            if type(v) is int and v > 0:
                out.setdefault(name, [])
                if v not in out[name]:
                    out[name].append(v)

    for dest, value in interp.argparse_defaults():
        add(dest, [value] if type(value) is int else list(value.items) if isinstance(value, Seq) else [])
    # Only what may be an integer is followed: a size is a literal, arithmetic, a loop over
    # literals, never what a library call returns (and reading those is most of the cost).
    for scope, table in interp.bindings.items():
        frame = Frame(scope)
        for name, bound in table.items():
            for how in bound:
                if (how[0] == "iter" and _counter(interp, how[1])) or not may_be_int(how[1]):
                    continue
                add(name, interp.binding(how, frame))
    for function in interp.functions.values():
        for i, name in enumerate(params_of(function)):
            for call, scope in interp.calls_of.get(function.name, []):
                at = interp.argument(call, function, name, i)
                if at is not None and may_be_int(at):
                    add(name, interp.values(at, Frame(scope)))
            default = default_of(function, name)
            if default is not None and may_be_int(default):
                add(name, interp.values(default, Frame(interp.tree)))
    first = first_lines(interp.tree)
    return {k: v for k, v in sorted(out.items(), key=lambda kv: first.get(kv[0], 10 ** 9))}

def _counter(interp, node: ast.AST) -> bool:
    """`range(n)` and `range(0, ...)`: a counter, not a size."""
    if not (isinstance(node, ast.Call) and last(node.func) == "range"):
        return False
    return len(node.args) == 1 or (isinstance(node.args[0], ast.Constant) and node.args[0].value == 0)

def _calls(interp) -> list[PyCall]:
    out = []
    for node in ast.walk(interp.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and dotted(node.func):
            callee = interp.qualified(node.func, interp.frame_of(node))
            out.append(PyCall(callee=callee, args=tuple(ast.unparse(a) for a in node.args),
                              kwargs={k.arg: ast.unparse(k.value) for k in node.keywords if k.arg},
                              line=node.lineno))
    return sorted(out, key=lambda c: c.line)
