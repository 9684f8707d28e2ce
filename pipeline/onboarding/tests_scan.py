"""Read a repository's tests without running them: where a test calls an entry and compares its
result with another callable's, and the arguments it calls them with.

A test is taken at its word as the repository's own statement of what an entry must compute:

    y1 = liger_attn_res(V, w_query, w_norm, eps=1e-6)     # the entry (or what it wraps)
    y2 = pytorch_attn_res(V, w_query, w_norm)              # another callable
    assert_verbose_allclose(y1, y2, atol=atol, rtol=rtol)  # compared: y2's callable is a reference

The comparison is any of `COMPARE` (`torch.testing.assert_close`, `torch.allclose`, ...), its two
sides in either order, written inline or through local variables (`h, r = entry(...)` too); an
entry that writes its output (`result = args[-1]; myadd_out(*args); expected = torch.add(*args[:2])`)
is compared on the buffer it is handed. The arguments come back as expressions of the test, each
resolved as far as the test says: a tensor it makes (`torch.randn(B, T, H, dtype=dtype)`, through
`.clone()` / `.requires_grad_()` and through helpers such as `make_tensor(*size)`), a constant,
or a parameter pytest fills from the first row of `@pytest.mark.parametrize` (the row the authors
list first: their usual case). Values and tensors are read by `pipeline.onboarding.python_scan`;
this module only finds the calls and follows the test's own names. Nothing is imported or run.
"""

from __future__ import annotations

import ast
import functools
import operator
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pipeline.onboarding import python_scan

# What tests compare tensors with (the last part of the callee's name).
COMPARE = ("assert_close", "allclose", "assert_allclose", "assert_verbose_allclose", "assert_equal_tensors")
# Methods that leave a tensor's values as they are: `y.float()` compares y's values.
_SAME_VALUES = ("float", "double", "half", "bfloat16", "detach", "cpu", "cuda", "to", "clone", "contiguous",
                "requires_grad_", "squeeze", "flatten", "view_as", "reshape_as", "type_as")


def is_test_file(rel: str) -> bool:
    """A test module: under a test/ or tests/ folder, or named test_*.py / *_test.py."""
    path = PurePosixPath(rel)
    return rel.endswith(".py") and (any(p in ("test", "tests", "testing") for p in path.parts[:-1])
                                    or path.name.startswith("test_") or path.stem.endswith("_test"))


@dataclass(frozen=True)
class Arg:
    """One argument of a call in a test, as far as the test tells it.

    text: the expression as written; value: a constant (number, bool, string) when it is one;
    shape: a tensor's dimensions (an int, or a size name the test binds: "B"); sizes: the size
    names' values (from the parametrize row); dtype: fp32 | fp16 | bf16 | int64 ... ("" unknown);
    tensor: whether it is a tensor the test makes."""

    text: str
    value: object = None
    shape: tuple = ()
    sizes: dict = field(default_factory=dict)
    dtype: str = ""
    tensor: bool = False

    @property
    def known(self) -> bool:
        return self.tensor or self.value is not None


@dataclass(frozen=True)
class Comparison:
    """A test comparing a call of the entry with a call of another callable.

    file, line: the comparison; test: the test function; compared_by: the comparison's name;
    entry_call: the dotted callee of the entry-side call as written; other: the other callable
    as the test names it (dotted, imports resolved: "torch.add", "test_local_fn",
    "pkg.mod.fn"); other_local: it is a function of the test file itself; entry_args / other_args:
    the calls' arguments (positional, in order; keyword arguments under their names in kwargs);
    output_index: the entry argument that is the compared output buffer (an entry writing its
    result), else None."""

    file: str
    line: int
    test: str
    compared_by: str
    entry_call: str
    other: str
    other_local: bool
    entry_args: tuple[Arg, ...]
    entry_kwargs: dict
    other_args: tuple[Arg, ...]
    other_kwargs: dict
    output_index: int | None = None
    tolerance: dict = field(default_factory=dict)  # the comparison's own rtol / atol, where constants


@dataclass(frozen=True)
class Calls:
    """A call of the entry in a test (compared or not): its arguments, for shapes where no
    comparison names a reference."""

    file: str
    line: int
    test: str
    args: tuple[Arg, ...]
    kwargs: dict
    callee: str = ""


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def _ends_with(dotted: str, callee: tuple[str, ...]) -> bool:
    parts = dotted.split(".")
    return len(parts) >= len(callee) and tuple(parts[-len(callee):]) == callee


@functools.lru_cache(maxsize=64)  # each entry of a module reads the same test files
def _read(path: str, text: str) -> _TestFile:
    return _TestFile(path, text)


class _TestFile:
    """One test file: its functions, imports, local aliases, parametrize rows and tensors."""

    def __init__(self, path: str, text: str):
        self.path, self.text = path, text
        self.tree = python_scan.parsed(path, text)
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
        self._pass_on()
        self.tensors = python_scan.script_tensors(path, text, self.given)

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
                helper = top.get(_dotted(call.func)) if isinstance(call, ast.Call) else None
                if helper is None or helper.lineno in self.given:
                    continue
                params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
                passed = {p: row[a.id] for p, a in zip(params, call.args) if isinstance(a, ast.Name) and a.id in row}
                passed.update({k.arg: row[k.value.id] for k in call.keywords
                               if k.arg in params and isinstance(k.value, ast.Name) and k.value.id in row})
                if passed:
                    self.given[helper.lineno] = passed

    def _functions(self) -> list[ast.FunctionDef]:
        return [n for n in ast.walk(self.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def qualified(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        if head in self.imports:
            return self.imports[head] + (f".{rest}" if rest else "")
        return dotted

    # -- pytest's parameters ------------------------------------------------------------------------

    def _first_row(self, fn: ast.FunctionDef) -> dict[str, ast.AST]:
        """Parameter → expression, from the first row of each `@pytest.mark.parametrize` of `fn`
        (a `pytest.param(...)` row gives its values)."""
        out: dict[str, ast.AST] = {}
        for d in fn.decorator_list:
            if not (isinstance(d, ast.Call) and _dotted(d.func).endswith("parametrize") and len(d.args) >= 2):
                continue
            names_node, rows = d.args[0], d.args[1]
            if isinstance(names_node, ast.Constant) and isinstance(names_node.value, str):
                names = [n.strip() for n in names_node.value.split(",") if n.strip()]
            elif isinstance(names_node, (ast.Tuple, ast.List)):
                names = [e.value for e in names_node.elts if isinstance(e, ast.Constant)]
            else:
                continue
            rows = self._rows(rows)
            if not isinstance(rows, (ast.List, ast.Tuple)) or not rows.elts:
                continue
            row = rows.elts[0]
            if isinstance(row, ast.Call) and _dotted(row.func).endswith("param"):
                values = list(row.args)
            elif len(names) > 1 and isinstance(row, (ast.Tuple, ast.List)):
                values = list(row.elts)
            else:
                values = [row]
            out.update({n: v for n, v in zip(names, values)})
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
            if isinstance(elt, ast.Call) and _dotted(elt.func).endswith("param") and len(elt.args) == 1 \
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
        expr = self._given_expr(fn, name)
        if expr is None:
            return None
        found = python_scan.module_values(self.path, self.text, expr)
        return found[0] if len(found) == 1 else None

    def _given_expr(self, fn: ast.AST, name: str) -> ast.AST | None:
        while fn is not None:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in self.given.get(fn.lineno, {}):
                return self.given[fn.lineno][name]
            fn = self.parent.get(fn)
        return None

    def sizes_of(self, fn: ast.AST) -> dict[str, int]:
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
        name = _dotted(call.func)
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


def _strip(node: ast.AST) -> ast.AST:
    """`y.float().detach()` → `y`: methods that keep the values compared; `w.clone() if affine
    else None` → `w.clone()`: the tensor the test passes when it passes one."""
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SAME_VALUES:
            node = node.func.value
        elif isinstance(node, ast.IfExp) and isinstance(node.orelse, ast.Constant) and node.orelse.value is None:
            node = node.body
        else:
            return node


# -- finding the comparisons -------------------------------------------------------------------------

def comparisons(path: str, text: str, callees: list[tuple[str, ...]], same: list[tuple[str, ...]] = (),
                origins: dict | None = None) -> list[Comparison]:
    """Every comparison in the test file of a call of the entry (a callee ending with one of
    `callees`' dotted parts: ("liger_dyt",), ("LigerDyTFunction", "apply")) with a call of a
    callable that is neither the entry nor one of `same` (the entry's own implementation:
    comparing with it checks nothing)."""
    f = _read(path, text)
    if f.tree is None:
        return []
    aliases = _aliases(f, callees)
    out = []
    for node in ast.walk(f.tree):
        if not (isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] in COMPARE):
            continue
        sides = _compared(node)
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
            entry_name = _callee(f, call.func, aliases)
            other_name = _callee(f, other_call.func, aliases)
            if not _is(entry_name, callees, f, origins) or _is(other_name, callees) or _is(other_name, same):
                continue
            if not other_name or other_name.split(".")[-1] in COMPARE:
                continue
            head = other_name.split(".")[0]
            local = other_name in f.functions and "." not in other_name \
                and any(n is f.functions[other_name] for n in f.tree.body)
            if not local and head not in f.imports:
                continue  # a module the test built (`ref_attn(x)`), a tensor's method: no callable to name
            if local and isinstance(f.functions.get(other_name), ast.ClassDef) or _is_class(f, other_name):
                continue  # a class: constructed with the test's arguments first
            q = f.qualified(other_name)
            e_args, e_kw = _args(f, fn, call)
            o_args, o_kw = _args(f, fn, other_call)
            out.append(Comparison(path, node.lineno, getattr(fn, "name", ""), _dotted(node.func).split(".")[-1],
                                  entry_name, q, local,
                                  e_args, e_kw, o_args, o_kw, out_index, tolerance(f, fn, node)))
            break
    return sorted(out, key=lambda c: c.line)


def _compared(compare: ast.Call) -> list[ast.AST]:
    """The two compared sides of a comparison call: its first two arguments, after a leading
    label (`assert_close('o', ref, tri, 0.005)`, flash-linear-attention's helper)."""
    args = list(compare.args)
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        args = args[1:]
    return args[:2]


def tolerance(f: _TestFile, fn: ast.AST, compare: ast.Call) -> dict:
    """rtol / atol a comparison passes, as numbers (`rtol=rtol` read from the parametrize row)."""
    out = {}
    for k in compare.keywords:
        if k.arg in ("rtol", "atol"):
            value = _arg(f, fn, k.value, compare.lineno).value
            if type(value) in (int, float):
                out[k.arg] = float(value)
    return out


def entry_calls(path: str, text: str, callees: list[tuple[str, ...]], origins: dict | None = None) -> list[Calls]:
    """Every call of the entry in the test file, with its arguments as far as the test tells."""
    f = _read(path, text)
    if f.tree is None:
        return []
    aliases = _aliases(f, callees)
    out = []
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Call) and _is(_callee(f, node.func, aliases), callees, f, origins):
            fn = f.scope(node)
            args, kwargs = _args(f, fn, node)
            out.append(Calls(path, node.lineno, getattr(fn, "name", ""), args, kwargs, _callee(f, node.func, aliases)))
    return sorted(out, key=lambda c: c.line)


def _is_class(f: _TestFile, name: str) -> bool:
    """A class of the test file, or an imported CamelCase name (`TorchLMHeadJSD`, `nn.LayerNorm`)."""
    last = name.split(".")[-1]
    if any(isinstance(n, ast.ClassDef) and n.name == last for n in f.tree.body):
        return True
    return last[:1].isupper() and not last.isupper()


def _is(name: str, callees, f: _TestFile | None = None, origins: dict | None = None) -> bool:
    """Whether `name` (as the test writes it) is one of `callees`; where a callee's origin is
    known (the module its first name is imported from where the entry calls it), the test's
    import must lead there too: Liger has two `LigerFusedLinearJSDFunction`s."""
    for c in callees:
        if not name or not _ends_with(name, c):
            continue
        origin = (origins or {}).get(c)
        if origin and f is not None and not _same_origin(f.qualified(name), origin, len(c)):
            continue
        return True
    return False


def _same_origin(qualified: str, origin: str, parts: int) -> bool:
    """`liger_kernel.ops.fused_linear_jsd.F` and `liger_kernel.ops.F` are one (a package
    re-exporting its module's class); `liger_kernel.chunked_loss.jsd_loss.F` is another."""
    words = qualified.split(".")
    head = ".".join(words[:len(words) - parts + 1])
    if head == origin:
        return True
    mine, _, last = head.rpartition(".")
    theirs, _, other = origin.rpartition(".")
    return bool(mine and theirs) and last == other and (mine.startswith(theirs + ".") or theirs.startswith(mine + "."))


def _aliases(f: _TestFile, callees) -> dict[str, str]:
    """Local names bound to the entry (`fn = liger_dyt`, `liger_ce = liger_cross_entropy`)."""
    out = {}
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _dotted(node.value)
            if value and _is(value, callees):
                out[node.targets[0].id] = value
    return out


def _callee(f: _TestFile, func: ast.AST, aliases: dict[str, str]) -> str:
    dotted = _dotted(func)
    return aliases.get(dotted, dotted)


def _producer(f: _TestFile, fn: ast.AST, side: ast.AST, line: int, depth: int = 0):
    """(the call whose result `side` is, the index of the entry argument when `side` is a
    buffer handed to a call) or None."""
    if depth > 6:
        return None
    side = _strip(side)
    if isinstance(side, ast.Subscript) and isinstance(side.value, ast.Call):  # entry(...)[0]
        side = side.value
    if isinstance(side, ast.Call):
        return side, None
    if isinstance(side, ast.Name):
        bound = f.assigned(fn, side.id, line)
        if bound is not None:
            value, _ = bound
            value = _strip(value)
            if isinstance(value, ast.Call):
                return value, None
            if isinstance(value, (ast.Name, ast.Subscript)):
                handed = _handed(f, fn, value, line)
                if handed is not None:
                    return handed
                return _producer(f, fn, value, line, depth + 1)
    return None


def _handed(f: _TestFile, fn: ast.AST, buffer: ast.AST, line: int):
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

def _args(f: _TestFile, fn: ast.AST, call: ast.Call) -> tuple[tuple[Arg, ...], dict]:
    args: list[Arg] = []
    for a in call.args:
        if isinstance(a, ast.Starred):
            rows = _spread(f, fn, a.value, call.lineno)
            if not rows:
                args.append(Arg(ast.unparse(a)))
                break
            # a loop over sample inputs: the largest row (the first is often the smallest edge case)
            read = [[_arg(f, scope, e, getattr(e, "lineno", call.lineno)) for e, scope in row] for row in rows]
            args += max(read, key=_elements)
        else:
            args.append(_arg(f, fn, a, call.lineno))
    kwargs = {}
    for k in call.keywords:
        if k.arg:
            kwargs[k.arg] = _arg(f, fn, k.value, call.lineno)
        else:  # `**cfg` with `cfg = dict(tmax=8, rms_eps=1e-6)`: its keywords, as far as they are read
            for key, value in _spread_keywords(f, fn, k.value, call.lineno):
                kwargs.setdefault(key, _arg(f, fn, value, call.lineno))
    return tuple(args), kwargs


def _spread_keywords(f: _TestFile, fn: ast.AST, node: ast.AST, line: int) -> list[tuple[str, ast.AST]]:
    """The keywords `**node` passes where the test writes them: a dict literal or `dict(...)`,
    directly or through a name bound to one."""
    if isinstance(node, ast.Name):
        bound = f.assigned(fn, node.id, line)
        if bound is None or bound[1] is not None or isinstance(bound[0], ast.Starred):
            return []
        node = bound[0]
    if isinstance(node, ast.Dict):
        return [(k.value, v) for k, v in zip(node.keys, node.values)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if isinstance(node, ast.Call) and _dotted(node.func) == "dict" and not node.args:
        return [(k.arg, k.value) for k in node.keywords if k.arg]
    return []


def _elements(row: list[Arg]) -> int:
    total = 0
    for a in row:
        n = 1
        for d in a.shape:
            n *= d if type(d) is int else a.sizes.get(d, 1)
        total += n if a.tensor else 0
    return total


def _spread(f: _TestFile, fn: ast.AST, node: ast.AST, line: int, depth: int = 0) -> list[list[tuple[ast.AST, ast.AST]]]:
    """The rows of elements `*node` may spread (each element with the function it is written
    in), where the test writes them: a list literal, a name bound to one, a loop over a list of
    such (`for args in self.sample_inputs(device)`: each row), a helper returning one, and
    slices of these (`*args[:2]`)."""
    if depth > 6:
        return []
    if isinstance(node, (ast.List, ast.Tuple)):
        return [[(e, fn) for e in node.elts]]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        s = node.slice
        bounds = [None if b is None else b.value if isinstance(b, ast.Constant) else
                  -b.operand.value if isinstance(b, ast.UnaryOp) and isinstance(b.operand, ast.Constant) else "?"
                  for b in (s.lower, s.upper)]
        if "?" in bounds:
            return []
        return [row[bounds[0]:bounds[1]] for row in _spread(f, fn, node.value, line, depth + 1)]
    if isinstance(node, ast.Name):
        bound = f.assigned(fn, node.id, line)
        if bound is None:
            return []
        value, index = bound
        if isinstance(value, ast.Starred):  # a loop variable: each element of the iterable
            out = []
            for row in _spread(f, fn, value.value, line, depth + 1):
                for element, scope in row:
                    out += _spread(f, scope, element, 10 ** 9, depth + 1)
            return out
        if index is not None:
            return []
        return _spread(f, fn, value, line, depth + 1)
    if isinstance(node, ast.Call):
        helper = f.helper(fn, node)
        if helper is not None:
            returned = [r.value for r in python_scan.own_returns(helper)]
            if len(returned) == 1:
                return _spread(f, helper, returned[0], 10 ** 9, depth + 1)
    return []



def _arg(f: _TestFile, fn: ast.AST, node: ast.AST, line: int, depth: int = 0) -> Arg:
    text = ast.unparse(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)):
        return Arg(text, value=node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return Arg(text, value=-node.operand.value)
    if depth > 6:
        return Arg(text)
    stripped = _strip(node)
    if isinstance(stripped, ast.BinOp) and isinstance(stripped.op, (ast.Mult, ast.Add)):  # torch.randn(D) * 0.02
        inner = _arg(f, fn, stripped.left, line, depth + 1)
        if inner.tensor:
            return Arg(text, shape=inner.shape, sizes=inner.sizes, dtype=inner.dtype, tensor=True)
    if isinstance(stripped, ast.BinOp) and type(stripped.op) in _ARITHMETIC:  # padding=K // 2 with K from the row
        left, right = (_arg(f, fn, side, line, depth + 1) for side in (stripped.left, stripped.right))
        if all(type(v.value) in (int, float) for v in (left, right)):
            try:
                return Arg(text, value=_ARITHMETIC[type(stripped.op)](left.value, right.value))
            except (ArithmeticError, ValueError):
                pass
    if isinstance(stripped, ast.Name):
        made = _made(f, fn, stripped.id, line)
        if made is not None:
            return _tensor_arg(f, fn, text, *made)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            value = f.row_value(fn, stripped.id)
            if value is not None and not isinstance(value, str) or isinstance(value, str) and value.isidentifier():
                return Arg(text, value=value)
        bound = f.assigned(fn, stripped.id, line)
        if bound is not None and bound[1] is None and not isinstance(bound[0], ast.Starred):
            found = _arg(f, fn, bound[0], bound[0].lineno if hasattr(bound[0], "lineno") else line, depth + 1)
            if found.known:
                return Arg(text, found.value, found.shape, found.sizes, found.dtype, found.tensor)
        value = _module_constant(f, stripped.id)
        if value is not None:
            return Arg(text, value=value)
    if isinstance(stripped, ast.Call) and _dotted(stripped.func) in ("torch.tensor", "torch.scalar_tensor") \
            and stripped.args and isinstance(stripped.args[0], ast.Constant) \
            and isinstance(stripped.args[0].value, (int, float)):  # torch.tensor(1.0): a 0-d tensor
        kw = {k.arg: k.value for k in stripped.keywords if k.arg}
        found = python_scan.module_values(f.path, f.text, kw["dtype"]) if "dtype" in kw else []
        return Arg(text, shape=(), dtype=found[0] if found else "fp32", tensor=True)
    if isinstance(stripped, ast.Call):
        made = _made_at(f, _unmoved(stripped))
        if made is not None:
            return _tensor_arg(f, fn, text, made, _moves(stripped))
        helper = f.helper(fn, stripped)
        if helper is not None:  # make_tensor(20): a helper making a tensor of its arguments' sizes
            shape = _helper_shape(f, helper, stripped)
            if shape:
                return Arg(text, shape=shape, dtype="fp32", tensor=True)
    return Arg(text)


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
               ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def _module_constant(f: _TestFile, name: str):
    for node in f.tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = python_scan.module_values(f.path, f.text, node.value)
            return found[0] if len(found) == 1 and isinstance(found[0], (int, float)) else None
    return None


def _made(f: _TestFile, fn: ast.AST, name: str, line: int, depth: int = 0):
    """(the tensor the test made that `name` is, the axis moves applied to it since) — through
    `x1 = _input.clone()` and `q = torch.randn(b, s, h, d).transpose(1, 2)` — or None."""
    if depth > 6:
        return None
    lo, hi = getattr(fn, "lineno", 0), getattr(fn, "end_lineno", 10 ** 9)
    bound = f.assigned(fn, name, line)
    if bound is None:
        return None
    value, index = bound
    if isinstance(value, ast.Starred) or index is not None:
        return None
    moves = _moves(value)
    stripped = _strip(_unmoved(value))
    if isinstance(stripped, ast.Name) and stripped.id != name:
        inner = _made(f, fn, stripped.id, value.lineno, depth + 1)
        return (inner[0], inner[1] + moves) if inner else None
    at = _made_at(f, stripped)
    if at is not None:
        return at, moves
    for t in reversed(f.tensors):  # the factory call is inside the assignment (`(torch.randn(...) * 2).cuda()`)
        if t.name == name and lo <= t.line <= hi and t.line <= line:
            return t, moves
    return None


def _moves(node: ast.AST) -> list[tuple[int, ...]]:
    """The axis permutations a chain of methods applies, innermost first: `.transpose(1, 2)`,
    `.permute(0, 2, 1, 3)`, `.T` (as (-1,): reversed)."""
    found = []
    while True:
        node = _strip(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("transpose", "permute") \
                and node.args and all(isinstance(a, ast.Constant) and type(a.value) is int for a in node.args):
            found.append((node.func.attr, tuple(a.value for a in node.args)))
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
            found.append((node.attr, ()))
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in \
                ("contiguous", "requires_grad_", "to", "clone", "detach", "cuda", "float", "half", "bfloat16"):
            node = node.func.value
        else:
            return list(reversed(found))


def _unmoved(node: ast.AST) -> ast.AST:
    """The expression under the chain of `_moves` and value-keeping methods."""
    while True:
        node = _strip(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("transpose", "permute"):
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
            node = node.value
        else:
            return node


def _moved(dims: list, moves: list) -> list:
    dims = list(dims)
    for kind, args in moves:
        if kind == "transpose" and len(args) == 2 and all(-len(dims) <= a < len(dims) for a in args):
            a, b = args
            dims[a], dims[b] = dims[b], dims[a]
        elif kind == "permute" and sorted(a % len(dims) for a in args) == list(range(len(dims))):
            dims = [dims[a] for a in args]
        elif kind == "T":
            dims = dims[::-1]
        elif kind == "mT" and len(dims) >= 2:
            dims[-1], dims[-2] = dims[-2], dims[-1]
    return dims


def _made_at(f: _TestFile, call: ast.AST):
    if not isinstance(call, ast.Call):
        return None
    return next((t for t in f.tensors if t.line == call.lineno and t.factory.split(".")[-1] == _dotted(call.func).split(".")[-1]),
                None)


def _tensor_arg(f: _TestFile, fn: ast.AST, text: str, made: python_scan.TensorMade, moves: list = ()) -> Arg:
    """A tensor argument: its dims as the test's size names where it writes a parameter
    (`torch.randn(B, T, H)`), with their values from the parametrize row, in the order the
    test's transposes leave them."""
    if not made.shape:
        return Arg(text)  # made, but of sizes the test does not write out
    sizes = f.sizes_of(fn)
    names = _dim_names(f, made)
    names += [""] * (len(made.shape) - len(names))
    shape = []
    used = {}
    for value, name in _moved(list(zip(made.shape, names)), list(moves)):
        if name and name in sizes:
            shape.append(name)
            used[name] = sizes[name]
        elif type(value) is int:
            shape.append(value)
        else:
            shape.append(str(value))
    return Arg(text, shape=tuple(shape), sizes=used, dtype=made.dtype, tensor=True)


def _dim_names(f: _TestFile, made: python_scan.TensorMade) -> list[str]:
    """The names written as each dimension of the factory call that made `made` ("" where a
    dimension is an expression): `torch.randn(B, T, H)` → ["B", "T", "H"]."""
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Call) and node.lineno == made.line and \
                _dotted(node.func).split(".")[-1] == made.factory.split(".")[-1]:
            args = node.args
            if made.factory.endswith("randint"):
                args = args[2:] if len(args) >= 3 else args[1:]
            if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
                args = args[0].elts
            size = next((k.value for k in node.keywords if k.arg in ("size", "shape")), None)
            if size is not None:
                args = size.elts if isinstance(size, (ast.Tuple, ast.List)) else [size]
            return [a.id if isinstance(a, ast.Name) else "" for a in args]
    return []


def _helper_shape(f: _TestFile, helper: ast.FunctionDef, call: ast.Call) -> tuple:
    """`def make_tensor(*size): return torch.randn(size, ...)` called as `make_tensor(2, 3)`: (2, 3)."""
    vararg = helper.args.vararg.arg if helper.args.vararg else None
    for r in ast.walk(helper):
        if isinstance(r, ast.Return) and isinstance(r.value, ast.Call) and \
                _dotted(r.value.func).split(".")[-1] in ("randn", "rand", "ones", "zeros", "empty", "randn_like"):
            first = r.value.args[0] if r.value.args else None
            if vararg and isinstance(first, (ast.Name, ast.Starred)) and \
                    (first.id if isinstance(first, ast.Name) else _dotted(first.value)) == vararg:
                dims = [a.value for a in call.args if isinstance(a, ast.Constant) and type(a.value) is int]
                return tuple(dims) if len(dims) == len(call.args) else ()
    return ()
