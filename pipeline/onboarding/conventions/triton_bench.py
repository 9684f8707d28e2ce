"""Triton's declared benchmark sweeps, read without running them:

    @triton.testing.perf_report(triton.testing.Benchmark(
        x_names=["N"], x_vals=[128 * i for i in range(2, 100)],   # one point per x value
        line_arg="provider", line_vals=["triton", "torch"],         # who runs: not a size
        args={"M": 4096}))                                          # held at every point
    def benchmark(M, N, provider):
        x = torch.randn(M, N, device=DEVICE, dtype=torch.float32)
        ms = triton.testing.do_bench(lambda: softmax(x))

Each x value is a point (a tuple sets each of `x_names` in turn, a single value all of them),
`args`' integers are held at every point: x_vals × args are the points. Every call in the
decorated function that passes a tensor the function makes gives a `Sweep`: the call's
arguments, a tensor's dimensions in the function's parameter names (`["M", "N"]`), and the
points. A `Benchmark` may be passed directly, through a name, or as a list of them (each its own
points). Values are followed as far as literals, module constants, `range`, comprehensions and
arithmetic go; a sweep whose points cannot be read is left out."""

from __future__ import annotations

import ast
import operator

from pipeline.onboarding.source.call_args import args_of
from pipeline.onboarding.source.py_values import Frame, Seq, dotted
from pipeline.onboarding.source.records import Sweep, sizes_of

GIVES = (Sweep,)
# Points read from one Benchmark: a sweep of 16 doublings is common; more is a generated grid.
MAX_POINTS = 4096
# Callees that time or make tensors: their calls are the harness, not the measured function.
HARNESS = ("torch", "triton", "numpy", "np", "math", "print", "len", "range", "float", "int")


def matches(repo, rel: str) -> bool:
    """A Python file declaring a Triton benchmark (`triton.testing.Benchmark`, `perf_report`)."""
    if not rel.endswith(".py"):
        return False
    text = repo.text(rel)
    return "Benchmark" in text and "perf_report" in text


def read(repo, rel: str) -> list[Sweep]:
    """One `Sweep` per call of a tensor-taking function inside each `perf_report` function."""
    tree, interp = repo.tree(rel), repo.interpreter(rel)
    if tree is None or interp is None:
        return []
    f = repo.pytest_file(rel)
    out: list[Sweep] = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        benchmarks = [b for d in fn.decorator_list for b in _benchmarks(d, interp)]
        points: list[dict] = []
        for b in benchmarks:
            points += [p for p in _points(b, interp) if p not in points]
        if not points:
            continue
        sizes = sizes_of(points)
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            callee = dotted(call.func)
            if not callee or callee.split(".")[0] in HARNESS:
                continue
            args, kwargs = args_of(f, fn, call)
            tensors = [a for a in (*args, *kwargs.values()) if a.tensor and a.shape]
            if not tensors:
                continue
            out.append(Sweep(rel, call.lineno, f.qualified(callee), sizes, tensors[0].dtype, "triton_bench",
                             tuple(points), args, kwargs))
    return out


def _benchmarks(decorator: ast.AST, interp) -> list[ast.Call]:
    """The `Benchmark(...)` calls a `perf_report(...)` decorator is given."""
    if not (isinstance(decorator, ast.Call) and dotted(decorator.func).split(".")[-1] == "perf_report"
            and decorator.args):
        return []
    return _calls_of(decorator.args[0], interp, 0)


def _calls_of(node: ast.AST, interp, depth: int) -> list[ast.Call]:
    if depth > 4:
        return []
    if isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] == "Benchmark":
        return [node]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [c for e in node.elts for c in _calls_of(e, interp, depth + 1)]
    if isinstance(node, ast.ListComp):
        return _calls_of(node.elt, interp, depth + 1)
    if isinstance(node, ast.Name):
        bound = interp.bindings.get(interp.tree, {}).get(node.id, [])
        return [c for kind, value, _ in bound if kind == "expr" for c in _calls_of(value, interp, depth + 1)]
    return []


def _points(benchmark: ast.Call, interp) -> list[dict]:
    """The points of one Benchmark: each x value over `x_names`, with `args`' integers."""
    kw = {k.arg: k.value for k in benchmark.keywords if k.arg}
    names = _value(kw.get("x_names"), interp)
    values = _value(kw.get("x_vals"), interp)
    held = _value(kw.get("args"), interp) if "args" in kw else {}
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)
            and isinstance(values, list) and isinstance(held, dict)):
        return []
    fixed = {k: v for k, v in held.items() if type(v) is int and v > 0}
    out = []
    for v in values[:MAX_POINTS]:
        row = list(v) if isinstance(v, list) else [v] * len(names)
        if len(row) != len(names) or not all(type(x) is int and x > 0 for x in row):
            continue
        point = {**fixed, **dict(zip(names, row))}
        if point not in out:
            out.append(point)
    return out


class _Unknown(Exception):
    pass


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift}


def _value(node: ast.AST | None, interp, env: dict | None = None):
    """The Python value of a literal expression (lists, tuples, dicts, range, comprehensions,
    arithmetic, module constants); None where it cannot be read."""
    try:
        return _eval(node, interp, env or {}, [0])
    except (_Unknown, ArithmeticError, ValueError, TypeError, RecursionError):
        return None


def _eval(node, interp, env: dict, steps: list):
    steps[0] += 1
    if node is None or steps[0] > 200_000:
        raise _Unknown
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        found = interp.reading(lambda: interp.values(node, Frame(interp.tree)), [])
        if len(found) == 1:
            return _plain(found[0])
        raise _Unknown
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, interp, env, steps) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise _Unknown
            try:
                out[_eval(k, interp, env, steps)] = _eval(v, interp, env, steps)
            except _Unknown:
                continue  # `"dtype": torch.float16`: not a size, the others still are
        return out
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left, interp, env, steps), _eval(node.right, interp, env, steps))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, interp, env, steps)
    if isinstance(node, ast.Call) and dotted(node.func) == "range" and not node.keywords:
        bounds = [_eval(a, interp, env, steps) for a in node.args]
        r = range(*bounds)
        if len(r) > MAX_POINTS:
            raise _Unknown
        return list(r)
    if isinstance(node, ast.Call) and dotted(node.func) in ("list", "tuple") and len(node.args) == 1:
        return list(_eval(node.args[0], interp, env, steps))
    if isinstance(node, ast.Call) and dotted(node.func) == "dict" and not node.args:
        return {k.arg: _eval(k.value, interp, env, steps) for k in node.keywords if k.arg}
    if isinstance(node, ast.ListComp):
        return _comprehension(node, 0, interp, env, steps)
    raise _Unknown


def _comprehension(node: ast.ListComp, index: int, interp, env: dict, steps: list) -> list:
    if index == len(node.generators):
        return [_eval(node.elt, interp, env, steps)]
    gen = node.generators[index]
    if gen.ifs or not isinstance(gen.target, ast.Name):
        raise _Unknown
    out = []
    for item in _eval(gen.iter, interp, env, steps):
        out += _comprehension(node, index + 1, interp, {**env, gen.target.id: item}, steps)
        if len(out) > MAX_POINTS:
            raise _Unknown
    return out


def _plain(value):
    if isinstance(value, Seq):
        return [_plain(v) for v in value.items]
    if isinstance(value, (int, float, str)):
        return value
    raise _Unknown
