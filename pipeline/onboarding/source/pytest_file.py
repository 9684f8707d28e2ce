"""One test file as the readers of tests see it: its functions, imports, local aliases, the
first row of each `@pytest.mark.parametrize` (the row the authors list first: their usual
case) handed on to the helpers it calls, the tensors it makes, and where each of its names was
last bound on the path that row takes. The helpers every test reader shares follow: the
comparisons' names, the methods that keep a tensor's values, callee names through imports and
aliases. Nothing is imported or run."""

from __future__ import annotations

import ast

from pipeline.onboarding.source.py_tensors import tensors_made
from pipeline.onboarding.source.py_values import dotted

# What tests compare tensors with (the last part of the callee's name).
COMPARE = ("assert_close", "allclose", "assert_allclose", "assert_verbose_allclose", "assert_equal_tensors")
# Methods that leave a tensor's values as they are: `y.float()` compares y's values.
SAME_VALUES = ("float", "double", "half", "bfloat16", "detach", "cpu", "cuda", "to", "clone", "contiguous",
               "requires_grad_", "squeeze", "flatten", "view_as", "reshape_as", "type_as")


class PytestFile:
    """One test file: its functions, imports, local aliases, parametrize rows and tensors."""

    def __init__(self, path: str, tree: ast.Module | None, interp=None):
        self.path, self.tree, self.interp = path, tree, interp
        self.imports: dict[str, str] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        self.parent: dict[ast.AST, ast.AST] = {}
        if self.tree is None:
            return
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.imports[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)
        self.given = {fn.lineno: row for fn in self._functions() if (row := self._first_row(fn))}
        # the parameters whose values differ between a test's parametrize rows (sizes it varies)
        self.varies = {fn.lineno: names for fn in self._functions() if (names := self._varied(fn))}
        self._pass_on()
        self.tensors = tensors_made(interp, self.given) if interp is not None else []

    def _pass_on(self) -> None:
        """A parametrized test handing its parameters to a helper of the file
        (`_test_correctness_functional(B, T, V, scalar, dtype, atol, rtol)`): the helper's
        parameters get the same row (from the first such call)."""
        top = {n.name: n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for fn in self._functions():
            row = self.given.get(fn.lineno)
            if not row:
                continue
            for call in ast.walk(fn):
                helper = top.get(dotted(call.func)) if isinstance(call, ast.Call) else None
                if helper is None or helper.lineno in self.given:
                    continue
                params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
                passed = {p: row[a.id] for p, a in zip(params, call.args) if isinstance(a, ast.Name) and a.id in row}
                passed.update({k.arg: row[k.value.id] for k in call.keywords
                               if k.arg in params and isinstance(k.value, ast.Name) and k.value.id in row})
                if passed:
                    self.given[helper.lineno] = passed
                    varied = self.varies.get(fn.lineno, set())
                    names = {p: a.id for p, a in zip(params, call.args) if isinstance(a, ast.Name)}
                    names.update({k.arg: k.value.id for k in call.keywords if isinstance(k.value, ast.Name)})
                    if any(v in varied for v in names.values()):
                        self.varies[helper.lineno] = {p for p, v in names.items() if v in varied}

    def _functions(self) -> list[ast.FunctionDef]:
        return [n for n in ast.walk(self.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def qualified(self, dotted: str) -> str:
        """A dotted name with its first part through the file's imports."""
        head, _, rest = dotted.partition(".")
        if head in self.imports:
            return self.imports[head] + (f".{rest}" if rest else "")
        return dotted

    # -- pytest's parameters ------------------------------------------------------------------------

    def _first_row(self, fn: ast.FunctionDef) -> dict[str, ast.AST]:
        """Parameter → expression, from the first row of each `@pytest.mark.parametrize` of `fn`
        (a `pytest.param(...)` row gives its values)."""
        out: dict[str, ast.AST] = {}
        for names, rows in self._parametrized(fn):
            if rows.elts:
                out.update(zip(names, _row_values(rows.elts[0], names)))
        return out

    def _parametrized(self, fn: ast.FunctionDef):
        """(parameter names, rows node) of each `@pytest.mark.parametrize` of `fn` whose rows
        are a literal list or tuple (or a name bound to one)."""
        for d in fn.decorator_list:
            if not (isinstance(d, ast.Call) and dotted(d.func).endswith("parametrize") and len(d.args) >= 2):
                continue
            names_node, rows = d.args[0], self._rows(d.args[1])
            if isinstance(names_node, ast.Constant) and isinstance(names_node.value, str):
                names = [n.strip() for n in names_node.value.split(",") if n.strip()]
            elif isinstance(names_node, (ast.Tuple, ast.List)):
                names = [e.value for e in names_node.elts if isinstance(e, ast.Constant)]
            else:
                continue
            if isinstance(rows, (ast.List, ast.Tuple)):
                yield names, rows

    def _varied(self, fn: ast.FunctionDef) -> set[str]:
        """The parameters of `fn`'s `@pytest.mark.parametrize` rows that take two or more
        different integers across the rows."""
        out: set[str] = set()
        if self.interp is None:
            return out
        for names, rows in self._parametrized(fn):
            seen: dict[str, set] = {}
            for row in rows.elts:
                for n, v in zip(names, _row_values(row, names)):
                    found = self.interp.module_values(v)
                    if len(found) == 1 and type(found[0]) is int:
                        seen.setdefault(n, set()).add(found[0])
            out |= {n for n, vs in seen.items() if len(vs) > 1}
        return out

    def varied_of(self, fn: ast.AST) -> set[str]:
        """The sizes the parametrize rows of `fn` (and the functions around it) vary."""
        out: set[str] = set()
        while fn is not None:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out |= self.varies.get(fn.lineno, set())
            fn = self.parent.get(fn)
        return out

    def _rows(self, rows: ast.AST, depth: int = 0) -> ast.AST:
        """A parametrize row list as written: a literal, a module constant (`MHC_SHAPES = [...]`),
        or a sum of such (`MHC_DTYPE_TOLS + [(torch.float32, ...)]`)."""
        if depth > 4:
            return rows
        if isinstance(rows, ast.Name):
            bound = next((n.value for n in self.tree.body if isinstance(n, ast.Assign)
                          and any(isinstance(t, ast.Name) and t.id == rows.id for t in n.targets)), None)
            return self._rows(bound, depth + 1) if bound is not None else rows
        if isinstance(rows, ast.ListComp) and len(rows.generators) == 1 \
                and isinstance(rows.generators[0].target, ast.Name):
            # `[pytest.param(*test, id=...) for test in [(1, 63, 1, 64), ...]]`: each element is a row
            target, elt = rows.generators[0].target.id, rows.elt
            if isinstance(elt, ast.Call) and dotted(elt.func).endswith("param") and len(elt.args) == 1 \
                    and isinstance(elt.args[0], ast.Starred):
                elt = elt.args[0].value
            if isinstance(elt, ast.Name) and elt.id == target:
                return self._rows(rows.generators[0].iter, depth + 1)
            return rows
        if isinstance(rows, ast.BinOp) and isinstance(rows.op, ast.Add):
            left, right = self._rows(rows.left, depth + 1), self._rows(rows.right, depth + 1)
            if isinstance(left, (ast.List, ast.Tuple)) and isinstance(right, (ast.List, ast.Tuple)):
                return ast.List(elts=[*left.elts, *right.elts], ctx=ast.Load())
        return rows

    def row_value(self, fn: ast.AST, name: str):
        """The constant pytest passes `fn`'s parameter `name` (None when not one)."""
        expr = self.given_expr(fn, name)
        if expr is None:
            return None
        found = self.interp.module_values(expr)
        return found[0] if len(found) == 1 else None

    def given_expr(self, fn: ast.AST, name: str) -> ast.AST | None:
        """The expression the first parametrize row gives `name` in `fn` or a function around it."""
        while fn is not None:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in self.given.get(fn.lineno, {}):
                return self.given[fn.lineno][name]
            fn = self.parent.get(fn)
        return None

    def sizes_of(self, fn: ast.AST) -> dict[str, int]:
        """The integers the first parametrize rows give `fn`'s (and its enclosing functions') parameters."""
        out = {}
        while fn is not None:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for name in self.given.get(fn.lineno, {}):
                    value = self.row_value(fn, name)
                    if type(value) is int:
                        out.setdefault(name, value)
            fn = self.parent.get(fn)
        return out

    def helper(self, fn: ast.AST, call: ast.Call) -> ast.FunctionDef | None:
        """The test file's function a call calls: `self.sample_inputs(...)` is the method of the
        caller's class (two test classes each have their own), `make_tensor(3)` the function
        nested in the caller or at the top."""
        name = dotted(call.func)
        head, _, last = name.rpartition(".")
        scopes = []
        current = fn
        while current is not None:
            scopes.append(current)
            current = self.parent.get(current)
        for scope in scopes:
            if head in ("self", "cls") and not isinstance(scope, ast.ClassDef):
                continue
            if head and head not in ("self", "cls"):
                break
            for node in getattr(scope, "body", []):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == last:
                    return node
        return None

    # -- names inside a test -------------------------------------------------------------------------

    def scope(self, node: ast.AST) -> ast.AST:
        """The function `node` lies in (the module at the top)."""
        current = self.parent.get(node)
        while current is not None and not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
            current = self.parent.get(current)
        return current or self.tree

    def truth(self, fn: ast.AST, test: ast.AST) -> bool | None:
        """An `if` test on a parametrize flag (`if bias:`, `if not bias:`) for the first row;
        None where the test is something else."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.truth(fn, test.operand)
            return None if inner is None else not inner
        if isinstance(test, ast.Name):
            value = self.row_value(fn, test.id)
            return bool(value) if isinstance(value, (bool, int)) else None
        return None

    def taken(self, fn: ast.AST, node: ast.AST) -> bool:
        """Whether `node` lies on the path the first parametrize row takes through `fn`'s `if`s
        (`bias1 = bias.clone()` under `if bias:`, not the `bias1 = None` of its `else`)."""
        child, current = node, self.parent.get(node)
        while current is not None and current is not fn:
            if isinstance(current, ast.If) and child is not current.test:
                truth = self.truth(fn, current.test)
                if truth is not None and (child in current.body) != truth:
                    return False
            child, current = current, self.parent.get(current)
        return True

    def assigned(self, fn: ast.AST, name: str, before: int) -> tuple[ast.AST, int | None] | None:
        """The expression `name` was last bound to in `fn` before line `before` (and its index
        when bound by unpacking a tuple), or, for a loop variable, ("iter", the iterable)."""
        best = None
        for node in ast.walk(fn):
            line = getattr(node, "lineno", None)
            if line is None or line >= before or not self.taken(fn, node):
                continue
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id == name:
                        best = max(best or (0, None, None), (line, node.value, None), key=lambda b: b[0])
                    elif isinstance(target, ast.Tuple):
                        for i, e in enumerate(target.elts):
                            if isinstance(e, ast.Name) and e.id == name:
                                best = max(best or (0, None, None), (line, node.value, i), key=lambda b: b[0])
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Name) and node.target.id == name:
                best = max(best or (0, None, None), (line, ast.Starred(value=node.iter), None), key=lambda b: b[0])
        return (best[1], best[2]) if best else None


def strip(node: ast.AST) -> ast.AST:
    """`y.float().detach()` → `y`: methods that keep the values compared; `w.clone() if affine
    else None` → `w.clone()`: the tensor the test passes when it passes one."""
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SAME_VALUES:
            node = node.func.value
        elif isinstance(node, ast.IfExp) and isinstance(node.orelse, ast.Constant) and node.orelse.value is None:
            node = node.body
        else:
            return node


# -- finding the comparisons -------------------------------------------------------------------------


def is_class(f: PytestFile, name: str) -> bool:
    """A class of the test file, or an imported CamelCase name (`TorchLMHeadJSD`, `nn.LayerNorm`)."""
    last = name.split(".")[-1]
    if any(isinstance(n, ast.ClassDef) and n.name == last for n in f.tree.body):
        return True
    return last[:1].isupper() and not last.isupper()


def is_callee(name: str, callees, f: PytestFile | None = None, origins: dict | None = None) -> bool:
    """Whether `name` (as the test writes it) is one of `callees`; where a callee's origin is
    known (the module its first name is imported from where the entry calls it), the test's
    import must lead there too: Liger has two `LigerFusedLinearJSDFunction`s."""
    for c in callees:
        if not name or not ends_with(name, c):
            continue
        origin = (origins or {}).get(c)
        if origin and f is not None and not same_origin(f.qualified(name), origin, len(c)):
            continue
        return True
    return False


def same_origin(qualified: str, origin: str, parts: int) -> bool:
    """`liger_kernel.ops.fused_linear_jsd.F` and `liger_kernel.ops.F` are one (a package
    re-exporting its module's class); `liger_kernel.chunked_loss.jsd_loss.F` is another."""
    words = qualified.split(".")
    head = ".".join(words[:len(words) - parts + 1])
    if head == origin:
        return True
    mine, _, last = head.rpartition(".")
    theirs, _, other = origin.rpartition(".")
    return bool(mine and theirs) and last == other and (mine.startswith(theirs + ".") or theirs.startswith(mine + "."))


def aliases_of(f: PytestFile, callees) -> dict[str, str]:
    """Local names bound to the entry (`fn = liger_dyt`, `liger_ce = liger_cross_entropy`)."""
    out = {}
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = dotted(node.value)
            if value and is_callee(value, callees):
                out[node.targets[0].id] = value
    return out


def callee_of(f: PytestFile, func: ast.AST, aliases: dict[str, str]) -> str:
    """The callee a call names, a local alias of the entry seen through."""
    name = dotted(func)
    return aliases.get(name, name)


def ends_with(name: str, callee: tuple[str, ...]) -> bool:
    """Whether the dotted `name` ends with the parts of `callee`."""
    parts = name.split(".")
    return len(parts) >= len(callee) and tuple(parts[-len(callee):]) == callee


def _row_values(row: ast.AST, names: list[str]) -> list[ast.AST]:
    """The value nodes of one parametrize row, one per name: a `pytest.param(...)`'s arguments,
    a tuple's items where there are several names, else the row itself."""
    if isinstance(row, ast.Call) and dotted(row.func).endswith("param"):
        return list(row.args)
    if len(names) > 1 and isinstance(row, (ast.Tuple, ast.List)):
        return list(row.elts)
    return [row]
