"""Benchmark scripts: a script under a `benchmark*/` or `bench*/` folder, or named `bench*.py`
(tests aside), read without running it.

- `BenchScript`: the words the script writes and the packages it imports (which entries it may
  reach: one of its package's names — the entry's, what the entry passes its parameters on to, a
  class or function of the package that calls either), and whether it runs as a script (a
  `__main__` block, or calls at its top level);
- `Sweep` (how = "read"): each call passing tensors whose sizes the script's text gives through
  the script-value interpreter (`conventions.script_values`: literals, assignments, loops over
  literals, argparse defaults, its functions' defaults and call arguments) — the sizes named in
  the tensors' dimensions, every combination of their values a point:

      for n in [4096, 8192]:
          x = torch.randn(n, 4096)
          bench(lambda: scaled_silu(x))        # → points {n: 4096}, {n: 8192}; x is [n, 4096]

  A call whose tensors' sizes come from what the script computes as it runs (a model table, a
  memory probe: Liger-Kernel's scripts) gives none: such a script is run under the recorder
  (`pipeline.onboarding.bench_runs`), when the node can run the entry;
- `Definition`: for a package module's top-level classes and functions, the words each writes
  (a script calling `LigerRMSNorm` reaches `LigerRMSNormFunction` through it)."""

from __future__ import annotations

import ast
import itertools
import re
import sys
from pathlib import PurePosixPath

from pipeline.onboarding.conventions import script_values
from pipeline.onboarding.source.call_args import args_of
from pipeline.onboarding.source.py_values import dotted
from pipeline.onboarding.source.records import Arg, BenchScript, Definition, Sweep, sizes_of
from pipeline.onboarding.source.repo import is_test
from workers.core.formula import ExpressionError, evaluate, names

GIVES = (BenchScript, Sweep, Definition)
# Points read from one call: every combination of its sizes' values, bounded.
MAX_POINTS = 256
# Callees whose calls make or time tensors (the harness around the measured call).
HARNESS = ("torch", "triton", "numpy", "np", "math", "time", "print", "len", "range", "float", "int", "str",
           "argparse", "json", "os", "sys", "itertools", "functools", "statistics", "random", "cupy", "pd",
           "pandas")
_BENCH_FOLDER = re.compile(r"^bench", re.IGNORECASE)


def is_bench(rel: str) -> bool:
    """A benchmark script by its place: under a folder named bench*/benchmark*, or a file
    named bench*.py; never a test, never a package's `__init__.py`."""
    path = PurePosixPath(rel)
    if not rel.endswith(".py") or is_test(rel) or path.name == "__init__.py":
        return False
    return path.name.lower().startswith("bench") or any(_BENCH_FOLDER.match(p) for p in path.parts[:-1])


def matches(repo, rel: str) -> bool:
    """A benchmark script, or a module of a package (for its definitions)."""
    return rel.endswith(".py") and not is_test(rel) and (is_bench(rel) or bool(repo.import_root(rel)[0]))


def read(repo, rel: str) -> list:
    """A benchmark script's `BenchScript` and the sweeps its text gives; a package module's
    `Definition`s."""
    tree = repo.tree(rel)
    if tree is None:
        return []
    if not is_bench(rel):
        return definitions(rel, tree)
    words = frozenset(re.findall(r"\w+", repo.text(rel)))
    imports = frozenset(n.module.split(".")[0] if isinstance(n, ast.ImportFrom) else a.name.split(".")[0]
                        for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                        and not getattr(n, "level", 0) and (not isinstance(n, ast.ImportFrom) or n.module)
                        for a in n.names)
    return [BenchScript(rel, words, runnable(tree), imports), *static_sweeps(repo, rel)]


def runnable(tree: ast.Module) -> bool:
    """Whether the file does something when run: a `__main__` block, or a call at its top level
    (a helper module of the scripts, such as Liger's utils.py, only defines)."""
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            return True
        if isinstance(node, (ast.For, ast.While, ast.With)):
            return True
    return False


def definitions(rel: str, tree: ast.Module) -> list[Definition]:
    """Each top-level class and function of a module with the words its body writes."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            words = frozenset(n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
                              if isinstance(n, (ast.Name, ast.Attribute)))
            out.append(Definition(rel, node.name, words))
    return out


def static_sweeps(repo, rel: str) -> list[Sweep]:
    """Each call passing tensors whose every dimension the script's text sizes."""
    tree, interp = repo.tree(rel), repo.interpreter(rel)
    if interp is None:
        return []
    f = repo.pytest_file(rel)
    values = script_values.sizes(repo, rel)
    out = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        callee = dotted(call.func)
        if not callee or callee.split(".")[0] in HARNESS:
            continue
        args, kwargs = args_of(f, f.scope(call), call)
        tensors = [a for a in (*args, *kwargs.values()) if a.tensor and a.shape]
        if not tensors:
            continue
        points = _points(tensors, values)
        if not points:
            continue
        sizes = sizes_of(points)
        out.append(Sweep(rel, call.lineno, f.qualified(callee), sizes, tensors[0].dtype, "bench_script",
                         tuple(points), args, kwargs))
    return out


def _points(tensors: list[Arg], values: dict[str, list[int]]) -> list[dict]:
    """Every combination of the values of the sizes the tensors' dimensions name (an argparse
    option `args.m` by its dest `m`); [] where a dimension names a size the text does not give."""
    wanted: list[str] = []
    for t in tensors:
        for d in t.shape:
            if type(d) is int:
                continue
            try:
                found = names(str(d))
            except ExpressionError:
                return []
            wanted += [n for n in found if n not in wanted]
    options = []
    for n in wanted:
        found = values.get(n) or values.get(n.rsplit(".", 1)[-1]) or \
            ([t.sizes[n]] if any(n in t.sizes for t in tensors) else [])
        if not found:
            return []
        options.append([(n, v) for v in found])
    points = []
    for combo in itertools.product(*options):
        point = dict(combo)
        if all(dims_at(t, point) is not None for t in tensors):
            points.append(point)
        if len(points) >= MAX_POINTS:
            break
    return points


def dims_at(arg: Arg, point: dict) -> tuple[int, ...] | None:
    """A tensor argument's dimensions at one of a sweep's points, None where one does not
    evaluate to a positive integer."""
    out = []
    for d in arg.shape:
        if type(d) is int:
            out.append(d)
            continue
        try:
            v = evaluate(str(d), {**arg.sizes, **point})
        except ExpressionError:
            return None
        if v != int(v) or v <= 0:
            return None
        out.append(int(v))
    return tuple(out)


def records(repo, rel: str) -> list:
    """What the reader reads in `rel`, once."""
    return repo.records(sys.modules[__name__], rel)
