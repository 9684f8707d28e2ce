"""Where a repository differentiates what it computes: its autograd Functions (a class deriving
from `torch.autograd.Function`, directly or through classes of its own, that has a `backward`:
Liger's `LigerRMSNormFunction` behind `liger_rms_norm`), and the tests that call `backward()` on
an entry's output

    y = liger_rms_norm(x, w, eps)
    y.backward(dy)                      # or (y * dy).sum().backward(), torch.autograd.grad(y, x, dy)

Either says the entry's output carries an autograd graph: its backward pass is part of what the
repository ships (`decide.passes`). A class is found as the entry's module sees it: defined
there, or imported, followed through the modules that import it on (Liger's functional module
imports `liger_kernel.ops`, whose `__init__.py` imports it from `liger_kernel.ops.rms_norm`), so
that a same-named copy elsewhere (a backend's) is not taken for it. Nothing is imported or run."""

from __future__ import annotations

import ast
import sys
from pathlib import PurePosixPath

from pipeline.onboarding.source.py_values import dotted
from pipeline.onboarding.source.pytest_file import aliases_of, callee_of, is_callee
from pipeline.onboarding.source.records import AutogradFunction, PyClass
from pipeline.onboarding.source.repo import is_test

GIVES = (PyClass,)
# The base an autograd Function derives from, as its module imports it.
FUNCTION_BASES = ("torch.autograd.Function", "torch.autograd.function.Function")
# The calls that differentiate their first argument (or `outputs=`).
GRAD_CALLS = ("autograd.grad", "autograd.backward")
# How many modules an import is followed through (a package's __init__ re-exporting, a base
# class in another module, its own base ...).
MAX_HOPS = 6


def matches(repo, rel: str) -> bool:
    """A Python module, not a test, that defines a class."""
    return rel.endswith(".py") and not is_test(rel) and "class " in repo.text(rel)


def read(repo, rel: str) -> list[PyClass]:
    """The module's top-level classes, their bases as its imports name them."""
    tree = repo.tree(rel)
    if tree is None:
        return []
    imports = {name: f"{module}.{original}" if module else original
               for name, (module, original) in _imported(tree, rel).items()}
    out = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = tuple(_full(dotted(b), imports) for b in node.bases if dotted(b))
            backward = next((m.lineno for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "backward"), 0)
            out.append(PyClass(rel, node.name, node.lineno, bases, backward))
    return out


def function_named(repo, rel: str, name: str, hops: int = MAX_HOPS) -> AutogradFunction | None:
    """Class `name` as module `rel` sees it (defined there, or imported from a module of the
    repository), where it is an autograd Function; None where it is none, or is not found."""
    if hops <= 0:
        return None
    defined = next((c for c in repo.records(sys.modules[__name__], rel) if c.name == name), None)
    if defined is None:
        source = _source_of(repo, rel, name)
        return function_named(repo, source[0], source[1], hops - 1) if source else None
    if any(b in FUNCTION_BASES for b in defined.bases):
        return AutogradFunction(rel, name, defined.line, f"{rel}:{defined.backward}" if defined.backward else "")
    for base in defined.bases:  # one of the repository's own classes, as this module names it
        parent = function_named(repo, rel, base.rpartition(".")[2], hops - 1)
        if parent is not None:
            return AutogradFunction(rel, name, defined.line,
                                    f"{rel}:{defined.backward}" if defined.backward else parent.backward)
    return None


def sees(repo, rel: str, name: str) -> bool:
    """Whether module `rel` defines class `name` or imports it from a file of the repository."""
    return any(c.name == name for c in repo.records(sys.modules[__name__], rel)) or \
        _source_of(repo, rel, name) is not None


def _full(name: str, imports: dict[str, str]) -> str:
    """`Function` imported from torch.autograd → torch.autograd.Function; `ag.Function` with
    `import torch.autograd as ag` likewise; a name the module does not import, as written."""
    head, _, rest = name.partition(".")
    return f"{imports[head]}.{rest}".rstrip(".") if head in imports else name


def _imported(tree: ast.Module, rel: str) -> dict[str, tuple[str, str]]:
    """Name → (the dotted module it comes from, its name there) of the module's imports; a
    relative import's module made absolute from the file's place (`from .x import A` in
    pkg/ops/__init__.py → pkg.ops.x); `import a.b as c` → c: ("", "a.b")."""
    out: dict[str, tuple[str, str]] = {}
    package = list(PurePosixPath(rel).parent.parts)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            else:
                module = node.module or ""
            for a in node.names:
                out[a.asname or a.name] = (module, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = ("", a.name)
    return out


def _source_of(repo, rel: str, name: str) -> tuple[str, str] | None:
    """(the repository's file the module imports `name` from, its name there), or None where
    it does not import it, or from no file of the repository (torch, a package not here)."""
    tree = repo.tree(rel)
    found = _imported(tree, rel).get(name) if tree is not None else None
    if not found or not found[0]:
        return None
    tail = found[0].replace(".", "/")
    wanted = (f"{tail}.py", f"{tail}/__init__.py")
    files = [p for p in repo.scripts if p in wanted or p.endswith(tuple("/" + w for w in wanted))]
    # a relative import names the file exactly; an absolute one may sit under src/ or another root
    return (min(files, key=len), found[1]) if files else None


def differentiated(repo, path: str, callees: list[tuple[str, ...]], origins: dict | None = None) -> int:
    """The line where a test of the file differentiates the output of a call of the entry (a
    callee ending with one of `callees`' dotted parts): `y.backward(...)` on a value computed
    from a name the call's result is bound to in the same function, or on the call itself, or
    `torch.autograd.grad(y, ...)`; 0 where none does."""
    f = repo.pytest_file(path)
    if f.tree is None:
        return 0
    aliases = aliases_of(f, callees)

    def calls_entry(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Call) and is_callee(callee_of(f, n.func, aliases), callees, f, origins)
                   for n in ast.walk(node))

    for fn in (n for n in ast.walk(f.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        outputs = set()
        for node in ast.walk(fn):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and calls_entry(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                outputs |= {name for t in targets for name in _bound(t)}
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
                of = node.func.value
            elif dotted(node.func).endswith(GRAD_CALLS):
                of = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "outputs"), None)
            else:
                continue
            if of is not None and (calls_entry(of) or any(isinstance(n, ast.Name) and n.id in outputs
                                                          for n in ast.walk(of))):
                return node.lineno
    return 0


def _bound(target: ast.AST) -> list[str]:
    """The names an assignment target binds (`y`, `h, r`), not an attribute's or item's owner."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _bound(elt)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return []
