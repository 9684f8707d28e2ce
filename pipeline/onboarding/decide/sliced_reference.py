"""A test's own statements as the reference, written as a module (`reference.py` in the draft):
the backward slice of the compared value (`conventions.sliced_from_tests`) as a function of the
entry's inputs `reference(<inputs>)`, in the order the job passes them. Sizes and flags pytest
fills from the first `@pytest.mark.parametrize` row are read from the inputs' shapes where they
name a dimension (`C_in = scores.shape[1]`), so a changed size stays consistent; a dtype or device
parameter is the inputs' own; names of the test module (its classes and helpers) are imported
from it. None where a name the statements read cannot be bound."""

from __future__ import annotations

import ast
import builtins

from pipeline.onboarding.conventions.sliced_from_tests import reads, stores
from pipeline.onboarding.source.records import Sliced

REFERENCE_FILE = "reference.py"
REFERENCE_FUNCTION = "reference"
_DTYPES = ("float16", "float32", "float64", "bfloat16", "half", "float", "double")


def reference_source(sliced: Sliced, names: list[str], entry: str) -> str | None:
    """The module text of `reference(<names>)`: the test's statements as a function of the
    entry's inputs `names` (in the order the job passes them). None where a name the
    statements read is neither an input, a parametrize value, nor importable."""
    return _Writer(sliced, names, entry).text()


class _Writer:
    def __init__(self, s: Sliced, names: list[str], entry: str):
        self.s, self.names, self.entry = s, names, entry
        self.imports: list[str] = []
        self.from_test: list[str] = []

    def text(self) -> str | None:
        s = self.s
        inputs = [n for n in self.names if n in s.by_param]
        if len(inputs) != len(self.names):
            return None
        # copies of an argument the job does not pass (a keyword left at the entry's default) are
        # bound as the test binds them
        self.stops = {n: p for n, p in s.stops.items() if p in self.names}
        used = set(s.needed)
        for stmt, wrappers in s.statements:
            used |= stores(stmt) | reads(stmt)
        renamed = {}
        for p in self.names:
            # an input named as one of the test's own names (`bias` the flag, `bias` the tensor)
            clash = p in used and self.stops.get(p) != p
            renamed[p] = f"{p}_in" if clash else p
        first_tensor = next((renamed[p] for p in self.names if self._is_tensor(p)), None)
        prelude = []
        for name in sorted(s.needed, key=str):
            if name in self.stops:
                if renamed[self.stops[name]] != name:
                    prelude.append(f"{name} = {renamed[self.stops[name]]}")
                continue
            line = self._bind(name, renamed, first_tensor)
            if line is None:
                return None
            if line:
                prelude.append(line)
        body = prelude + self._statements()
        returned = [ast.unparse(o) for o in s.outputs]
        body.append("return " + (returned[0] if len(returned) == 1 else "(" + ", ".join(returned) + ")"))
        c = s.comparison
        head = [f'"""The reference of {self.entry}: the statements of {c.file}\'s {c.test} that compute the value it',
                f"compares with {self.entry}'s output by {c.compared_by} (line {c.line}), as a function of the entry's",
                'inputs. Written by `flopwatch new`; edit it like any file of the variant."""', ""]
        imports = sorted(set(self.imports))
        if self.from_test:
            imports.append(f"from {s.module} import {', '.join(sorted(set(self.from_test)))}")
        signature = ", ".join(renamed[p] for p in self.names)
        lines = head + imports + ["", "", f"def {REFERENCE_FUNCTION}({signature}):"] + [f"    {b}" for b in body]
        return "\n".join(lines) + "\n"

    def _args(self) -> dict:
        """Entry parameter → the test's argument for it (`Arg`: shape, dtype)."""
        c = self.s.comparison
        out = {p: a for p, a in zip(self.s.positional, c.entry_args) if p}
        out.update({k: v for k, v in c.entry_kwargs.items() if k in self.names})
        return out

    def _is_tensor(self, p: str) -> bool:
        arg = self._args().get(p)
        return bool(arg is not None and arg.tensor)

    def _bind(self, name: str, renamed: dict, first_tensor: str | None) -> str | None:
        """How the function gets a name the statements read: "" for a builtin or an import
        (recorded), a line binding it, None where it has no source."""
        s, f = self.s, self.s.file
        if name in dir(builtins):
            return ""
        expr = f.given_expr(s.fn, name)
        if expr is not None:
            dim = self._dimension(name, renamed)
            if dim:
                return f"{name} = {dim}"
            text = ast.unparse(expr)
            if first_tensor and (text.split(".")[-1] in _DTYPES and text.startswith(("torch.", "dtype"))):
                return f"{name} = {first_tensor}.dtype  # {text} in the test's first row"
            for read in reads(expr):
                if self._bind(read, renamed, first_tensor) is None:
                    return None
            return f"{name} = {text}  # the test's first parametrize row"
        if name == "device" and first_tensor:
            return f"device = {first_tensor}.device"
        line = self._import_of(name)
        if line is not None:
            self.imports.append(line)
            return ""
        if any(_defines(node, name) for node in f.tree.body):
            self.from_test.append(name)
            return ""
        return None

    def _dimension(self, name: str, renamed: dict) -> str:
        """`C_in` → `scores.shape[1]` where an input's shape in the test names the size."""
        args = self._args()
        for p in self.names:
            a = args.get(p)
            if a is not None and a.tensor and name in a.shape:
                return f"{renamed[p]}.shape[{list(a.shape).index(name)}]"
        return ""

    def _import_of(self, name: str) -> str | None:
        for node in self.s.file.tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if (a.asname or a.name.split(".")[0]) == name:
                        return f"import {a.name}" + (f" as {a.asname}" if a.asname else "")
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if (a.asname or a.name) == name:
                        return f"from {node.module} import {a.name}" + (f" as {a.asname}" if a.asname else "")
        return None

    def _statements(self) -> list[str]:
        out, open_with, indent = [], (), ""
        for stmt, wrappers in self.s.statements:
            if wrappers != open_with:
                open_with, indent = wrappers, ""
                for w in wrappers:
                    out.append(indent + "with " + ", ".join(ast.unparse(i) for i in w.items) + ":")
                    indent += "    "
            out += [indent + line for line in ast.unparse(stmt).splitlines()]
        return out


def _defines(node, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return name in stores(node)
    return False


# -- a reference by name, taken out of its test module ----------------------------------------------

# Packages only a test run installs, by the top of the module a test imports (torch's own test
# utilities import expecttest). A reference that lives in a module importing one of them is
# taken without that import where it does not need it itself. pytest is not among them: nearly
# every test module imports it, and where a repository's tests run, it is installed.
TEST_ONLY = {"expecttest": "expecttest", "hypothesis": "hypothesis", "parameterized": "parameterized",
             "torch.testing._internal": "expecttest"}


def test_only_package(module: str) -> str:
    """The test-only package importing `module` needs ("" for none)."""
    return next((pkg for prefix, pkg in TEST_ONLY.items() if module == prefix or module.startswith(prefix + ".")), "")


def function_alone(tree: ast.Module, name: str, path: str) -> tuple[str, str]:
    """(module text, "") of function `name` of a test module with only what it needs of that
    module — the imports, functions, classes and assignments its body reads, followed through
    what those read — where the module imports a test-only package (`TEST_ONLY`) it does not
    need; ("", the package) where it needs one itself; ("", "") where the module imports none
    (the test file is taken as it is) or the function cannot be found."""
    top = {}
    for node in tree.body:
        for n in _bound_names(node):
            top.setdefault(n, node)
    if not isinstance(top.get(name), (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "", ""
    imported = [test_only_package(m) for node in tree.body for m in _imported_modules(node)]
    if not any(imported):
        return "", ""
    kept: list[ast.AST] = []
    queue = [top[name]]
    while queue:
        node = queue.pop()
        if any(node is k for k in kept):
            continue
        kept.append(node)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for word in _free_names(node):
            if word in top and not any(top[word] is k for k in kept):
                queue.append(top[word])
    imports: list[tuple[int, str]] = []
    for node in kept:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            needed = [a for a in node.names if (a.asname or a.name.split(".")[0]) in _read_by(kept)]
            for m in _imported_modules(node, needed):
                if test_only_package(m):
                    return "", test_only_package(m)
            if needed:
                imports.append((node.lineno, ast.unparse(type(node)(**{**{f: getattr(node, f) for f in node._fields},
                                                                        "names": needed}))))
    body = sorted((k for k in kept if not isinstance(k, (ast.Import, ast.ImportFrom))), key=lambda n: n.lineno)
    head = f'"""{name} of {path}, taken alone: that module imports a test-only package it does not need."""'
    parts = [head, "\n".join(t for _, t in sorted(imports))] if imports else [head]
    return "\n\n".join(parts + ["\n" + ast.unparse(n) for n in body]) + "\n", ""


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return sorted(stores(node))
    if isinstance(node, ast.Import):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [a.asname or a.name for a in node.names]
    return []


def _imported_modules(node: ast.AST, names=None) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in (names if names is not None else node.names)]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module]
    return []


def _free_names(node: ast.AST) -> set[str]:
    """The names a top-level statement reads (its decorators, defaults and body)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} \
        - set(dir(builtins))


def _read_by(nodes: list[ast.AST]) -> set[str]:
    return {w for n in nodes if not isinstance(n, (ast.Import, ast.ImportFrom)) for w in _free_names(n)}
