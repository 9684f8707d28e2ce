"""A small abstract interpreter over one Python file's syntax tree, never run: literals, names
bound anywhere in the enclosing function or the module (every binding counts: a name bound
twice has two values), loop variables (each element), function parameters (the arguments of
every call of the function in the file, and its default), the return values of the file's own
functions called with known arguments, `+ - * // / % **` of integers, strings and paths, and the
calls `pipeline.onboarding.source.py_calls` knows. What it cannot follow stays unknown and is
left out; nothing is guessed here."""

from __future__ import annotations

import ast
import posixpath
import time
from itertools import product

from pipeline.onboarding.source.py_calls import call_values
from pipeline.onboarding.source.py_values import (
    BUDGET,
    DTYPE_NAMES,
    LIMIT,
    MAX_TEXT,
    SECONDS,
    TENSOR_MODULES,
    DType,
    Frame,
    Glob,
    ModuleName,
    Namespace,
    PathValue,
    Seq,
    apply_op,
    count,
    default_of,
    dotted,
    last,
    option_dest,
    own_returns,
    params_of,
)


class Interpreter:
    """One Python file's syntax tree with the names each scope binds, its imports, its functions
    and their calls, read as values (`values`) on demand. One per file (`RepoFiles.interpreter`),
    whatever number of readings ask; each reading has its own budget (`reading`)."""

    def __init__(self, path: str, tree: ast.Module):
        self.path, self.tree = path, tree
        self.folder = posixpath.dirname(path)
        self.functions: dict[str, ast.FunctionDef] = {}
        self.parent: dict[ast.AST, ast.AST] = {}
        self.imports: dict[str, str] = {}
        self.bindings: dict[ast.AST, dict[str, list]] = {}  # scope node → name → bindings
        self.calls_of: dict[str, list[tuple[ast.Call, ast.AST]]] = {}
        self.busy: set = set()
        self.memo: dict = {}
        self.returns_of: dict[ast.AST, list[ast.Return]] = {}
        self.steps = 0
        self.deadline = float("inf")
        self.given: dict[ast.AST, dict] = {}  # function → parameter → values (`script_tensors`' given)
        self._index()

    # -- index -------------------------------------------------------------------------------------

    def _index(self) -> None:
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    self.imports[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname \
                        else alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(self.tree):
            scope = self.scope_of(node)
            table = self.bindings.setdefault(scope, {})
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    self._bind(table, target, ("expr", node.value))
            elif isinstance(node, ast.AugAssign):
                self._bind(table, node.target, ("aug", node))
            elif isinstance(node, (ast.For, ast.comprehension)):
                self._bind(self.bindings.setdefault(self.scope_of(node.iter), {}), node.target, ("iter", node.iter))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                self._bind(table, node.optional_vars, ("expr", node.context_expr))
            elif isinstance(node, ast.NamedExpr):
                self._bind(table, node.target, ("expr", node.value))
            elif isinstance(node, ast.Call):
                name = dotted(node.func)
                if name in self.functions or name.split(".")[-1] in self.functions:
                    self.calls_of.setdefault(name.split(".")[-1], []).append((node, scope))

    def _bind(self, table: dict, target: ast.AST, how: tuple, path: tuple = ()) -> None:
        if isinstance(target, ast.Name):
            table.setdefault(target.id, []).append((*how, path))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, element in enumerate(target.elts):
                self._bind(table, element, how, (*path, i))

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The function (or module) whose names `node` reads."""
        current = self.parent.get(node)
        while current is not None:
            if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return current
            current = self.parent.get(current)
        return self.tree

    def frame_of(self, node: ast.AST) -> Frame:
        """The frame `node` is read in: its function, with the parameters a reading binds."""
        scope = self.scope_of(node)
        return Frame(scope, self.given.get(scope))

    # -- evaluation ---------------------------------------------------------------------------------

    def values(self, node: ast.AST | None, frame: Frame) -> list:
        """The values `node` may have (none when it cannot be followed)."""
        if node is None:
            return []
        memo = (id(node), id(frame.node)) if not frame.env else None
        if memo in self.memo:
            return self.memo[memo]
        key = (id(node), id(frame.node), id(frame.env))
        if key in self.busy or len(self.busy) > 200 or self._exhausted():
            return []
        self.steps += 1
        self.busy.add(key)
        try:
            out = self._values(node, frame)
        finally:
            self.busy.discard(key)
        unique = []
        for v in out:
            if v is not None and v not in unique:
                unique.append(v)
        if memo is not None:
            self.memo[memo] = unique[:LIMIT]
        return unique[:LIMIT]

    def _exhausted(self) -> bool:
        """The step budget spent, or the time (checked every 256 steps; then spent for good)."""
        if self.steps > BUDGET:
            return True
        if self.steps % 256 == 0 and time.monotonic() > self.deadline:
            self.steps = BUDGET + 1
            return True
        return False

    def one_int(self, node: ast.AST, frame: Frame) -> int | None:
        """The integer `node` is, where it has exactly one value."""
        found = self.values(node, frame)
        return found[0] if len(found) == 1 and type(found[0]) is int else None

    def _values(self, node: ast.AST, frame: Frame) -> list:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bytes):
                return [node.value.decode(errors="replace")]
            return [node.value] if isinstance(node.value, (int, float, str)) else []
        if isinstance(node, ast.Name):
            return self._name(node.id, frame, node)
        if isinstance(node, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return []
            options = [self.values(e, frame) or [None] for e in node.elts]
            if count(options) > LIMIT:
                return []
            return [Seq(tuple(combo)) for combo in product(*options)]
        if isinstance(node, ast.JoinedStr):
            return self._fstring(node, frame)
        if isinstance(node, ast.BinOp):
            return self._binop(node, frame)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return [-v for v in self.values(node.operand, frame) if type(v) is int]
        if isinstance(node, ast.IfExp):
            return self.values(node.body, frame) + self.values(node.orelse, frame)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, frame)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, frame)
        if isinstance(node, ast.Call):
            return call_values(self, node, frame)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1:
            return [Seq(tuple(self.values(node.elt, self.frame_of(node.elt))))]
        return []

    def _name(self, name: str, frame: Frame, at: ast.AST) -> list:
        if name in frame.env:
            return frame.env[name]
        if name == "__file__":
            return [PathValue(posixpath.basename(self.path), from_file=True)]
        scopes = [frame.node] if frame.node is self.tree else [frame.node, self.tree]
        for scope in scopes:
            bound = self.bindings.get(scope, {}).get(name)
            sub = frame if scope is frame.node else Frame(self.tree)
            out = []
            params = params_of(scope) if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
            if name in params:  # `path = os.path.abspath(path)` reads the parameter
                out += self._param(scope, name, params.index(name))
            for how in bound or ():
                out += self.binding(how, sub)
            if bound or name in params:
                return out
        if name in self.imports:
            return [ModuleName(self.imports[name])]
        if name in self.functions:
            return []
        return []

    def binding(self, how: tuple, frame: Frame) -> list:
        """The values one binding of a name gives it (an assignment, a loop variable's elements)."""
        kind, node, path = how
        if kind == "aug":
            return []  # `x += ...`: a value that changes as the script runs
        if kind == "iter":
            found = []
            for seq in self.values(node, frame):
                if isinstance(seq, Seq):
                    found += list(seq.items)
                elif isinstance(seq, Glob):
                    found.append(seq.pattern)
                elif isinstance(seq, str) and len(seq) <= LIMIT and not path:
                    found += list(seq)
            values = found
        else:
            values = self.values(node, frame)
        for index in path:
            values = [v.items[index] for v in values if isinstance(v, Seq) and index < len(v.items)]
        return values

    def _param(self, function: ast.AST, name: str, index: int) -> list:
        """A parameter's values: what every call of the function in the file passes, else its
        default."""
        out = []
        for call, scope in self.calls_of.get(function.name, []):
            at = self.argument(call, function, name, index)
            if at is not None:
                out += self.values(at, Frame(scope))
        if not out:
            default = default_of(function, name)
            if default is not None:
                out = self.values(default, Frame(self.tree))
        return out

    @staticmethod
    def argument(call: ast.Call, function: ast.AST, name: str, index: int) -> ast.AST | None:
        offset = 1 if isinstance(call.func, ast.Attribute) and params_of(function)[:1] == ["self"] else 0
        for kw in call.keywords:
            if kw.arg == name:
                return kw.value
        position = index - offset
        if 0 <= position < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
            return call.args[position]
        return None

    def _fstring(self, node: ast.JoinedStr, frame: Frame) -> list:
        parts: list[list[str]] = []
        from_file = False
        for piece in node.values:
            if isinstance(piece, ast.Constant):
                parts.append([str(piece.value)])
                continue
            found = []
            for v in self.values(piece.value, frame):
                if isinstance(v, (str, int)) and type(v) is not bool:
                    found.append(str(v))
                elif isinstance(v, PathValue):
                    found.append(v.text)
                    from_file = from_file or v.from_file
            parts.append(found or ["*"])
        if count(parts) > LIMIT or sum(max(map(len, p)) for p in parts) > MAX_TEXT:
            return []
        texts = ["".join(p) for p in product(*parts)]
        return [PathValue(t, True) for t in texts] if from_file else texts

    def _binop(self, node: ast.BinOp, frame: Frame) -> list:
        left, right = self.values(node.left, frame), self.values(node.right, frame)
        out = []
        for a, b in product(left, right):
            value = apply_op(node.op, a, b)
            if value is not None:
                out.append(value)
                if len(out) >= LIMIT:
                    break
        return out

    def _attribute(self, node: ast.Attribute, frame: Frame) -> list:
        out = []
        for base in self.values(node.value, frame):
            if isinstance(base, ModuleName):
                dotted = f"{base.dotted}.{node.attr}"
                name = DTYPE_NAMES.get(node.attr)
                if base.dotted.split(".")[0] in TENSOR_MODULES and name and node.attr not in ("int", "float", "bool"):
                    out.append(DType(name))
                else:
                    out.append(ModuleName(dotted))
            elif isinstance(base, Namespace):
                out += [v for k, v in base.defaults if k == node.attr]
            elif isinstance(base, PathValue) and node.attr in ("parent", "absolute"):
                out.append(PathValue(posixpath.dirname(base.text) if node.attr == "parent" else base.text,
                                 base.from_file))
        return out

    def _subscript(self, node: ast.Subscript, frame: Frame) -> list:
        out = []
        for base in self.values(node.value, frame):
            if isinstance(base, Seq):
                for index in self.values(node.slice, frame):
                    if type(index) is int and -len(base.items) <= index < len(base.items):
                        out.append(base.items[index])
        return out

    def returns_values(self, function: ast.AST, call: ast.Call, frame: Frame) -> list:
        """The values a call of the file's own function returns, its parameters bound to the
        call's arguments."""
        params = params_of(function)
        env = {}
        for i, name in enumerate(params):
            at = self.argument(call, function, name, i)
            if at is not None:
                env[name] = self.values(at, frame)
        inner = Frame(function, env)
        out = []
        if function not in self.returns_of:
            self.returns_of[function] = own_returns(function)
        for ret in self.returns_of[function]:
            out += self.values(ret.value, inner)
        return out

    def qualified(self, func: ast.AST, frame: Frame) -> str:
        """`np.random.randn` → "numpy.random.randn" through the file's imports."""
        name = dotted(func)
        if not name:
            return ""
        head, _, rest = name.partition(".")
        if head in self.imports and not self.locally_bound(head, frame):
            return self.imports[head] + (f".{rest}" if rest else "")
        return name

    def locally_bound(self, name: str, frame: Frame) -> bool:
        """Whether the frame binds `name` itself (shadowing an import)."""
        return name in frame.env or name in self.bindings.get(frame.node, {})

    def argparse_defaults(self) -> list[tuple[str, object]]:
        """(option, default) of every `add_argument` of the file."""
        found = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and last(node.func) == "add_argument":
                dest = option_dest(node)
                default = next((k.value for k in node.keywords if k.arg == "default"), None)
                if dest and default is not None:
                    for v in self.values(default, Frame(self.tree)):
                        found.append((dest, v))
        return found


    def elements(self, node: ast.AST, frame: Frame) -> list[tuple[ast.AST, Frame]] | None:
        """The elements of a tuple, a list or a `dim3(...)` as written, through a name bound once."""
        if isinstance(node, (ast.Tuple, ast.List)):
            return [(e, frame) for e in node.elts]
        if isinstance(node, ast.Name):
            bound = self.bindings.get(frame.node, {}).get(node.id) or self.bindings.get(self.tree, {}).get(node.id)
            if bound and len(bound) == 1 and bound[0][0] == "expr" and not bound[0][2]:
                scope = frame if node.id in self.bindings.get(frame.node, {}) else Frame(self.tree)
                return self.elements(bound[0][1], scope)
        if isinstance(node, ast.Call) and last(node.func) in ("dim3", "Dim3") and node.args:
            return [(e, frame) for e in node.args]
        return None

    def single_expr(self, name: str, frame: Frame) -> tuple[ast.AST, Frame] | None:
        """The one expression `name` is bound to (in the function, else the module), if it is
        bound exactly once, not by unpacking, and is no parameter."""
        for scope in ([frame.node, self.tree] if frame.node is not self.tree else [self.tree]):
            params = params_of(scope) if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
            bound = self.bindings.get(scope, {}).get(name)
            if name in params or name in frame.env:
                return None
            if bound:
                if len(bound) == 1 and bound[0][0] == "expr" and not bound[0][2]:
                    return bound[0][1], (frame if scope is frame.node else Frame(self.tree))
                return None
        return None

    # -- readings -------------------------------------------------------------------------------------

    def reading(self, read, empty):
        """`read()` with a budget of its own: a script nested deeper than the interpreter's stack
        reads as nothing, not as an error; one that takes longer than `SECONDS` or `BUDGET`
        evaluations to follow is read as far as it got."""
        self.deadline = time.monotonic() + SECONDS
        self.steps = 0
        try:
            return read()
        except RecursionError:
            return empty

    def module_values(self, node: ast.AST) -> list:
        """The values an expression of this file's tree may have, read in the module's scope:
        ints, floats, strings; a dtype comes back as its flopwatch name ("bf16", "int64")."""
        found = self.reading(lambda: self.values(node, Frame(self.tree)), [])
        return [v.name if isinstance(v, DType) else v for v in found if isinstance(v, (DType, int, float, str))]
