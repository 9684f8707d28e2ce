"""Read a repository's Python scripts without running them: where they launch compiled kernels,
which kernel source files those launches compile, the tensors the scripts create and the integer
sizes they use. Pure functions over source text (`ast`); nothing is imported or run.

Three readers, each taking the script's repository-relative path and its text:

- `python_launches(path, text) -> list[PyLaunch]`: launches of kernels compiled at run time,
  through cupy (`cupy.RawKernel(code, "name")`, `cupy.RawModule(code=...).get_function("name")`,
  then `kernel(grid, block, args, shared_mem=n)`) or through hip-python / cuda-python
  (`hipModuleGetFunction(module, b"name")`, `cuModuleGetFunction`, then
  `hipModuleLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)` or
  `cuLaunchKernel` with the same order). The kernel source files compiled (hiprtc / NVRTC
  programs, cupy's code) are followed through `open(path).read()`, `Path(...).read_text()`,
  paths joined from a folder and a loop variable over a list of names, `os.listdir` or a glob.
- `script_tensors(path, text) -> list[TensorMade]`: tensors made with torch, numpy or cupy
  (`torch.randn(M, K, dtype=torch.bfloat16)`, `.half()`, `.to(torch.float16)`, `.astype(...)`).
- `script_sizes(path, text) -> dict[str, list[int]]`: the integers given to names
  (`M, N, K = 4096, 4096, 4096`, `for size in [1024, 2048]`, argparse defaults, the script's own
  functions' defaults and call arguments).
- `python_calls(path, text) -> list[PyCall]`: every call of a module function with its
  arguments (`tk_kernel.dispatch_micro(A, B, C)`), imports resolved.

Values are followed by a small abstract interpreter: literals, names bound anywhere in the
enclosing function or the module (every binding counts: a name bound twice has two values), loop
variables (each element), function parameters (the arguments of every call of the function in
the file, and its default), the return values of the file's own functions called with known
arguments, `+ - * // / % **` of integers, strings and paths. What it cannot follow stays unknown
and is left out; nothing is guessed here.

Expressions of launch geometry come out in flopwatch's launch syntax over the script's own names
(`pipeline.onboarding.drafting` renames them into an op's sizes through the kernel's argument list):
`triton.cdiv(M, 64)` → `ceil(M/64)`, `math.ceil(M / 64)` → `ceil(M/64)`, `(N + 127) // 128` →
`(N+127)//128`; a name bound to a single integer becomes the number unless the launch also passes
it to the kernel (then it is a size: `M` stays `M`).
"""

from __future__ import annotations

import ast
import functools
import posixpath
import time
from dataclasses import dataclass, field
from itertools import product

# Dtype names as flopwatch writes them (fp32 | fp16 | bf16); torch's own name for the others.
DTYPE_NAMES = {
    "float32": "fp32", "float": "fp32", "single": "fp32", "fp32": "fp32",
    "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float64": "float64", "double": "float64",
    "int8": "int8", "uint8": "uint8", "int16": "int16", "short": "int16", "int32": "int32", "int": "int32",
    "int64": "int64", "long": "int64", "bool": "bool",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "float8_e4m3fnuz": "float8_e4m3fnuz",
}
_TENSOR_MODULES = ("torch", "numpy", "cupy")
# Factories and the dtype they make when none is given (torch's default dtype is float32;
# numpy's and cupy's random and zeros make float64).
_FACTORIES = {"randn": "fp32", "rand": "fp32", "empty": "fp32", "zeros": "fp32", "ones": "fp32", "full": "fp32",
              "randint": "int64", "normal": "fp32", "uniform": "fp32", "standard_normal": "float64",
              "random": "float64", "empty_like": "", "zeros_like": "", "ones_like": "", "randn_like": "", "rand_like": "",
              "full_like": ""}
_NUMPY_DEFAULT = "float64"
_CONVERSIONS = {"half": "fp16", "float": "fp32", "bfloat16": "bf16", "double": "float64", "int": "int32",
                "long": "int64", "bool": "bool"}
_CDIV = ("cdiv", "ceil_div", "ceildiv", "div_up", "divup", "ceil_divide", "iDivUp", "ceilDiv", "CEIL_DIV")
# Wrappers a kernel argument is written in: the argument is the value inside.
_ARG_WRAPPERS = ("c_int", "c_uint", "c_int32", "c_uint32", "c_int64", "c_uint64", "c_long", "c_size_t",
                 "c_float", "c_double", "c_void_p", "int32", "uint32", "int64", "uint64", "float32", "float16",
                 "intc", "int", "float", "c_int16", "c_short")
_POINTER_METHODS = ("data_ptr", "ptr", "__int__", "getPtr")
_HIP_LAUNCH = ("hipModuleLaunchKernel", "cuLaunchKernel", "hipExtModuleLaunchKernel")
_LOOKUPS = ("hipModuleGetFunction", "cuModuleGetFunction")
_PROGRAMS = ("hiprtcCreateProgram", "nvrtcCreateProgram")
_LIMIT = 32  # alternatives kept per value: enough for a folder of kernels, bounded for a sweep
_BUDGET = 50_000  # evaluations per script: a generated or huge file is read partly, never for long
_MAX_TEXT = 1 << 18  # characters of one string value: a kernel's source, not a string built up in a loop
_SECONDS = 5.0  # per reading of one script: past it, what is not read yet stays unknown


@dataclass(frozen=True)
class PyLaunch:
    """A launch of a compiled kernel from Python.

    kernel: the kernel's name as the script looks it up ("" when it cannot be told);
    template_args: the arguments of a name expression (`"gemm<128, 64>"` → ("128", "64"));
    grid, block: one to three expressions each, in flopwatch's launch syntax over the script's
    names, trailing 1s dropped; shared: the dynamic shared memory (LDS) in bytes, an expression
    ("0" when none); args: each kernel argument's expression with its wrapper taken off
    (`ctypes.c_int(M)` → "M", `A.data_ptr()` → "A"); sources: repository-relative glob
    patterns of the kernel source files compiled for it (a relative path is tried from the
    script's folder and from the repository root, so both forms may appear), empty when the
    source is written in the script (`inline`) or cannot be followed; api: cupy | hip | cuda;
    file, line: where the launch is.
    """

    kernel: str
    grid: tuple[str, ...]
    block: tuple[str, ...]
    shared: str
    args: tuple[str, ...]
    file: str
    line: int
    api: str
    sources: tuple[str, ...] = ()
    inline: str = ""
    template_args: tuple[str, ...] = ()
    constants: dict = field(default_factory=dict)  # launch records share this key with C++ launches


@dataclass(frozen=True)
class TensorMade:
    """A tensor a script creates: `A = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")`.

    name: the variable it is assigned to ("" when none; `self.w` for an attribute); shape: one
    entry per dimension, an int where the expression has one value, else its text ("M",
    "args.m"); dtype: fp32 | fp16 | bf16, torch's name for another (int64, float64, int8), "" when
    it cannot be told; explicit: the script names the dtype (an argument or a conversion such as
    `.half()`), rather than getting the library's default; factory: the call that makes it
    (`torch.randn`, `numpy.random.randn`); line. A dtype given through a variable with several
    values (a loop over dtypes) gives one record per value.
    """

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    explicit: bool
    factory: str
    line: int


@dataclass(frozen=True)
class PyCall:
    """A call of a module's function: `tk_kernel.dispatch_micro(A, B, C)` → callee
    "tk_kernel.dispatch_micro" (imports resolved: `import tk_kernel as tk` still gives
    tk_kernel), args ("A", "B", "C") as source text, kwargs name → text, line."""

    callee: str
    args: tuple[str, ...]
    kwargs: dict
    line: int


def python_launches(path: str, text: str) -> list[PyLaunch]:
    """Every kernel launch of the script, in source order (module + functions); [] when the
    text is not Python."""
    reader = _reader(path, text)
    return _guarded(reader.launches, []) if reader else []


def script_tensors(path: str, text: str, given: dict[int, dict[str, ast.AST]] | None = None) -> list[TensorMade]:
    """Every tensor the script makes with a torch, numpy or cupy factory, in source order.

    given: for a function (keyed by the line of its `def`), its parameters bound to expressions
    of the module read in the module's scope — what pytest passes a test from the first row of
    its `@pytest.mark.parametrize` — so that `torch.randn(B, T, H, dtype=dtype)` in the test
    gets its sizes and dtype. The expressions must come from `parsed(path, text)`."""
    reader = _reader(path, text)
    if not reader:
        return []
    if not given:
        return _guarded(reader.tensors, [])
    module = _Frame(reader.tree)
    reader.given = {node: {name: reader.values(expr, module) for name, expr in params.items()}
                    for node in ast.walk(reader.tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and (params := given.get(node.lineno))}
    try:
        return _guarded(reader.tensors, [])
    finally:
        reader.given = {}


def parsed(path: str, text: str) -> ast.Module | None:
    """The tree the readers above read (shared, not to be changed): expressions handed back to
    them (`script_tensors`' `given`, `module_values`) must be its nodes."""
    reader = _reader(path, text)
    return reader.tree if reader else None


def module_values(path: str, text: str, node: ast.AST) -> list:
    """The values an expression of `parsed(path, text)` may have, read in the module's scope:
    ints, floats, strings; a dtype comes back as its flopwatch name ("bf16", "int64")."""
    reader = _reader(path, text)
    if not reader:
        return []
    reader.deadline = time.monotonic() + _SECONDS
    try:
        found = reader.values(node, _Frame(reader.tree))
    except RecursionError:
        found = []
    return [v.name if isinstance(v, _DType) else v for v in found if isinstance(v, (_DType, int, float, str))]


def script_sizes(path: str, text: str) -> dict[str, list[int]]:
    """Name → the positive integers the script gives it, first seen first: assignments (tuple
    unpacking included), loop variables over literal lists or ranges not starting at 0, argparse
    options (`--M` with `type=int, default=4096` → "M"; `dest=` honoured), and the parameters of
    the script's functions (their defaults and the integers its calls pass)."""
    reader = _reader(path, text)
    return _guarded(reader.sizes, {}) if reader else {}


def python_calls(path: str, text: str) -> list[PyCall]:
    """Every call whose callee is a dotted name (`module.function(...)`), in source order."""
    reader = _reader(path, text)
    return _guarded(reader.calls, []) if reader else []


@functools.lru_cache(maxsize=8)  # a script is usually read for its tensors, sizes and calls in a row
def _reader(path: str, text: str) -> _Reader | None:
    try:
        tree = ast.parse(text, filename=path)
        return _Reader(path, tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _guarded(read, empty):
    """A script nested deeper than the interpreter's stack reads as nothing, not as an error;
    one that takes longer than `_SECONDS` to follow is read as far as it got."""
    read.__self__.deadline = time.monotonic() + _SECONDS
    try:
        return read()
    except RecursionError:
        return empty


# -- values ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Path:
    """A pathlib path or an os.path string: text relative to the script's folder when built
    from `__file__`, else as written (relative to where the script is run)."""

    text: str
    from_file: bool = False


@dataclass(frozen=True)
class _Content:
    """The text of files read from disk: the patterns they match."""

    paths: tuple[_Path, ...]


@dataclass(frozen=True)
class _Handle:
    path: _Path


@dataclass(frozen=True)
class _Kernel:
    names: tuple[str, ...]
    api: str
    code: tuple = ()  # _Content or inline source strings


@dataclass(frozen=True)
class _Module:
    """A compiled module (cupy.RawModule) whose functions are looked up by name."""

    code: tuple


@dataclass(frozen=True)
class _DType:
    name: str


@dataclass(frozen=True)
class _Namespace:
    """What argparse's parse_args() returns: option name → default."""

    defaults: tuple[tuple[str, object], ...]


@dataclass(frozen=True)
class _Seq:
    items: tuple


@dataclass(frozen=True)
class _Glob:
    """The result of a glob (paths matching `pattern`) or of os.listdir (bare names: `pattern`
    is then "*", to be joined to the folder as the script does)."""

    pattern: _Path


@dataclass(frozen=True)
class _Module_name:
    """An imported module or one of its attributes: `torch`, `torch.float16`, `hip.hip`."""

    dotted: str


class _Frame:
    """A function being read: its node and, when it is read for one call, its parameters'
    values at that call."""

    def __init__(self, node: ast.AST, env: dict | None = None):
        self.node, self.env = node, env or {}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def _last(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


class _Reader:
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
                name = _dotted(node.func)
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

    def frame_of(self, node: ast.AST) -> _Frame:
        scope = self.scope_of(node)
        return _Frame(scope, self.given.get(scope))

    # -- evaluation ---------------------------------------------------------------------------------

    def values(self, node: ast.AST | None, frame: _Frame) -> list:
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
            self.memo[memo] = unique[:_LIMIT]
        return unique[:_LIMIT]

    def _exhausted(self) -> bool:
        """The step budget spent, or the time (checked every 256 steps; then spent for good)."""
        if self.steps > _BUDGET:
            return True
        if self.steps % 256 == 0 and time.monotonic() > self.deadline:
            self.steps = _BUDGET + 1
            return True
        return False

    def one_int(self, node: ast.AST, frame: _Frame) -> int | None:
        found = self.values(node, frame)
        return found[0] if len(found) == 1 and type(found[0]) is int else None

    def _values(self, node: ast.AST, frame: _Frame) -> list:
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
            if _count(options) > _LIMIT:
                return []
            return [_Seq(tuple(combo)) for combo in product(*options)]
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
            return self._call(node, frame)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1:
            return [_Seq(tuple(self.values(node.elt, self.frame_of(node.elt))))]
        return []

    def _name(self, name: str, frame: _Frame, at: ast.AST) -> list:
        if name in frame.env:
            return frame.env[name]
        if name == "__file__":
            return [_Path(posixpath.basename(self.path), from_file=True)]
        scopes = [frame.node] if frame.node is self.tree else [frame.node, self.tree]
        for scope in scopes:
            bound = self.bindings.get(scope, {}).get(name)
            sub = frame if scope is frame.node else _Frame(self.tree)
            out = []
            params = _params(scope) if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
            if name in params:  # `path = os.path.abspath(path)` reads the parameter
                out += self._param(scope, name, params.index(name))
            for how in bound or ():
                out += self._binding(how, sub)
            if bound or name in params:
                return out
        if name in self.imports:
            return [_Module_name(self.imports[name])]
        if name in self.functions:
            return []
        return []

    def _binding(self, how: tuple, frame: _Frame) -> list:
        kind, node, path = how
        if kind == "aug":
            return []  # `x += ...`: a value that changes as the script runs
        if kind == "iter":
            found = []
            for seq in self.values(node, frame):
                if isinstance(seq, _Seq):
                    found += list(seq.items)
                elif isinstance(seq, _Glob):
                    found.append(seq.pattern)
                elif isinstance(seq, str) and len(seq) <= _LIMIT and not path:
                    found += list(seq)
            values = found
        else:
            values = self.values(node, frame)
        for index in path:
            values = [v.items[index] for v in values if isinstance(v, _Seq) and index < len(v.items)]
        return values

    def _param(self, function: ast.AST, name: str, index: int) -> list:
        """A parameter's values: what every call of the function in the file passes, else its
        default."""
        out = []
        for call, scope in self.calls_of.get(function.name, []):
            at = self._argument(call, function, name, index)
            if at is not None:
                out += self.values(at, _Frame(scope))
        if not out:
            default = _default(function, name)
            if default is not None:
                out = self.values(default, _Frame(self.tree))
        return out

    @staticmethod
    def _argument(call: ast.Call, function: ast.AST, name: str, index: int) -> ast.AST | None:
        offset = 1 if isinstance(call.func, ast.Attribute) and _params(function)[:1] == ["self"] else 0
        for kw in call.keywords:
            if kw.arg == name:
                return kw.value
        position = index - offset
        if 0 <= position < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
            return call.args[position]
        return None

    def _fstring(self, node: ast.JoinedStr, frame: _Frame) -> list:
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
                elif isinstance(v, _Path):
                    found.append(v.text)
                    from_file = from_file or v.from_file
            parts.append(found or ["*"])
        if _count(parts) > _LIMIT or sum(max(map(len, p)) for p in parts) > _MAX_TEXT:
            return []
        texts = ["".join(p) for p in product(*parts)]
        return [_Path(t, True) for t in texts] if from_file else texts

    def _binop(self, node: ast.BinOp, frame: _Frame) -> list:
        left, right = self.values(node.left, frame), self.values(node.right, frame)
        out = []
        for a, b in product(left, right):
            value = _apply(node.op, a, b)
            if value is not None:
                out.append(value)
                if len(out) >= _LIMIT:
                    break
        return out

    def _attribute(self, node: ast.Attribute, frame: _Frame) -> list:
        out = []
        for base in self.values(node.value, frame):
            if isinstance(base, _Module_name):
                dotted = f"{base.dotted}.{node.attr}"
                name = DTYPE_NAMES.get(node.attr)
                if base.dotted.split(".")[0] in _TENSOR_MODULES and name and node.attr not in ("int", "float", "bool"):
                    out.append(_DType(name))
                else:
                    out.append(_Module_name(dotted))
            elif isinstance(base, _Namespace):
                out += [v for k, v in base.defaults if k == node.attr]
            elif isinstance(base, _Path) and node.attr in ("parent", "absolute"):
                out.append(_Path(posixpath.dirname(base.text) if node.attr == "parent" else base.text,
                                 base.from_file))
        return out

    def _subscript(self, node: ast.Subscript, frame: _Frame) -> list:
        out = []
        for base in self.values(node.value, frame):
            if isinstance(base, _Seq):
                for index in self.values(node.slice, frame):
                    if type(index) is int and -len(base.items) <= index < len(base.items):
                        out.append(base.items[index])
        return out

    def _call(self, node: ast.Call, frame: _Frame) -> list:
        func = node.func
        name = _last(func)
        args = node.args
        first = args[0] if args else None
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if isinstance(func, ast.Attribute):
            receivers = self.values(func.value, frame)
            method = self._method(node, func.attr, receivers, frame, kw)
            if method is not None:
                return method
        qualified = self.qualified(func, frame)
        module = qualified.split(".")[0]
        if qualified in ("os.path.join", "posixpath.join") and args:
            return self._join(args, frame)
        if qualified in ("os.path.dirname", "posixpath.dirname") and first is not None:
            return [_Path(posixpath.dirname(p.text), p.from_file) for p in self._paths(first, frame)]
        if qualified in ("os.path.abspath", "os.path.realpath", "os.path.normpath", "os.fspath", "str", "repr",
                         "os.path.expanduser") and first is not None:
            return self.values(first, frame)
        if qualified in ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "Path"):
            return self._join(args, frame) if args else [_Path(".")]
        if qualified == "open" and first is not None:
            return [_Handle(p) for p in self._paths(first, frame)]
        if qualified == "os.listdir":
            return [_Glob(_Path("*"))]
        if qualified in ("glob.glob", "glob.iglob") and first is not None:
            return [_Glob(p) for p in self._paths(first, frame)]
        if qualified in ("sorted", "list", "tuple", "reversed", "set", "iter"):
            return self.values(first, frame) if first is not None else []
        if qualified == "range":
            return self._range(args, frame)
        if qualified in ("int", "abs") and first is not None:
            return [int(v) if isinstance(v, float) else v for v in self.values(first, frame)
                    if isinstance(v, (int, float))]
        if qualified in ("max", "min") and len(args) >= 2:
            options = [[v for v in self.values(a, frame) if type(v) is int] for a in args]
            if all(options) and _count(options) <= _LIMIT:
                return [(max if qualified == "max" else min)(c) for c in product(*options)]
            return []
        if qualified == "getattr" and len(args) >= 2:
            out = []
            for base in self.values(args[0], frame):
                for attr in self.values(args[1], frame):
                    if isinstance(base, _Module_name) and isinstance(attr, str):
                        dtype = DTYPE_NAMES.get(attr)
                        out.append(_DType(dtype) if dtype and base.dotted in _TENSOR_MODULES
                                   else _Module_name(f"{base.dotted}.{attr}"))
            return out
        if qualified.endswith(".dtype") and first is not None and module in _TENSOR_MODULES:
            return [_DType(DTYPE_NAMES[v]) for v in self.values(first, frame) if isinstance(v, str) and v in DTYPE_NAMES]
        if qualified.endswith(".ArgumentParser"):
            return [_Module_name("argparse.ArgumentParser")]
        if module == "cupy" and name == "RawKernel":
            code = kw.get("code", first)
            kernel = kw.get("name", args[1] if len(args) > 1 else None)
            return [_Kernel(tuple(n for n in self.values(kernel, frame) if isinstance(n, str)), "cupy",
                            self._code(code, frame))]
        if module == "cupy" and name == "RawModule":
            code = kw.get("code", first)
            if code is None and "path" in kw:
                return [_Module(tuple(_Content((p,)) for p in self._paths(kw["path"], frame)))]
            return [_Module(self._code(code, frame))]
        if name in _LOOKUPS and len(args) >= 2:
            names = tuple(n for n in self.values(args[1], frame) if isinstance(n, str))
            api = "hip" if name.startswith("hip") else "cuda"
            kernel = _Kernel(names, api)
            return [_Seq((0, kernel)), kernel]  # hip-python and cuda-python return (err, function)
        if name in self.functions and isinstance(func, (ast.Name, ast.Attribute)):
            returned = self._returns(self.functions[name], node, frame)
            if returned or len(args) != 1:
                return returned
        # An unknown wrapper of one value (`hip_check(hip.hipModuleGetFunction(...))`): that value.
        if len(args) == 1 and not node.keywords:
            found = self.values(first, frame)
            return [_unwrap_result(v) for v in found if isinstance(v, (_Kernel, _Seq))]
        return []

    def _method(self, node: ast.Call, attr: str, receivers: list, frame: _Frame, kw: dict) -> list | None:
        args = node.args
        first = args[0] if args else None
        if not receivers:
            return None
        out = []
        for r in receivers:
            if isinstance(r, _Handle) and attr in ("read", "readlines"):
                out.append(_Content((r.path,)))
            elif isinstance(r, _Path) and attr in ("read_text", "read_bytes"):
                out.append(_Content((r,)))
            elif isinstance(r, _Path) and attr in ("glob", "rglob", "iterdir"):
                patterns = [p for p in self.values(first, frame) if isinstance(p, str)] if first is not None else ["*"]
                sep = "/**/" if attr == "rglob" else "/"
                out += [_Glob(_Path(r.text + sep + p, r.from_file)) for p in patterns]
            elif isinstance(r, _Path) and attr in ("resolve", "absolute", "expanduser", "with_suffix", "joinpath"):
                out += self._join([*args], frame, r) if attr == "joinpath" else [r]
            elif isinstance(r, _Path) and attr == "open":
                out.append(_Handle(r))
            elif isinstance(r, (str, _Content)) and attr in ("encode", "decode", "strip", "format"):
                out.append(r)
            elif isinstance(r, str) and attr == "join" and first is not None:
                out += [r.join(str(i) for i in s.items) for s in self.values(first, frame)
                        if isinstance(s, _Seq) and all(isinstance(i, (str, int)) for i in s.items)
                        and sum(len(str(i)) for i in s.items) <= _MAX_TEXT]
            elif isinstance(r, _Module) and attr == "get_function" and first is not None:
                names = tuple(n for n in self.values(first, frame) if isinstance(n, str))
                out.append(_Kernel(names, "cupy", r.code))
            elif isinstance(r, _Module_name) and attr in ("parse_args", "parse_known_args"):
                namespace = _Namespace(tuple(self._argparse_defaults()))
                out.append(namespace if attr == "parse_args" else _Seq((namespace, _Seq(()))))
            elif isinstance(r, _Module_name):
                return None  # a module's function: read by the caller
        return out or None

    def _returns(self, function: ast.AST, call: ast.Call, frame: _Frame) -> list:
        """The values a call of the file's own function returns, its parameters bound to the
        call's arguments."""
        params = _params(function)
        env = {}
        for i, name in enumerate(params):
            at = self._argument(call, function, name, i)
            if at is not None:
                env[name] = self.values(at, frame)
        inner = _Frame(function, env)
        out = []
        if function not in self.returns_of:
            self.returns_of[function] = own_returns(function)
        for ret in self.returns_of[function]:
            out += self.values(ret.value, inner)
        return out

    def _join(self, parts: list[ast.AST], frame: _Frame, base: _Path | None = None) -> list:
        options = [[base]] if base is not None else []
        for p in parts:
            found = self._paths(p, frame)
            if not found:
                return []
            options.append(found)
        if _count(options) > _LIMIT:
            return []
        out = []
        for combo in product(*options):
            text, from_file = "", False
            for piece in combo:
                text = piece.text if piece.text.startswith("/") else posixpath.join(text, piece.text) if text \
                    else piece.text
                from_file = from_file or piece.from_file
            out.append(_Path(text, from_file))
        return out

    def _paths(self, node: ast.AST, frame: _Frame) -> list[_Path]:
        out = []
        for v in self.values(node, frame):
            if isinstance(v, _Path):
                out.append(v)
            elif isinstance(v, str):
                out.append(_Path(v))
            elif isinstance(v, _Glob):
                out.append(v.pattern)
        return out

    def _range(self, args: list[ast.AST], frame: _Frame) -> list:
        bounds = [self.one_int(a, frame) for a in args]
        if not bounds or None in bounds or len(bounds) > 3:
            return []
        r = range(*bounds)
        return [_Seq(tuple(r))] if len(r) <= 64 else []

    def _code(self, node: ast.AST | None, frame: _Frame) -> tuple:
        code = []
        for v in self.values(node, frame):
            if isinstance(v, (_Content, str)):
                code.append(v)
        return tuple(code)

    def qualified(self, func: ast.AST, frame: _Frame) -> str:
        """`np.random.randn` → "numpy.random.randn" through the file's imports."""
        dotted = _dotted(func)
        if not dotted:
            return ""
        head, _, rest = dotted.partition(".")
        if head in self.imports and not self._locally_bound(head, frame):
            return self.imports[head] + (f".{rest}" if rest else "")
        return dotted

    def _locally_bound(self, name: str, frame: _Frame) -> bool:
        return name in frame.env or name in self.bindings.get(frame.node, {})

    def _argparse_defaults(self) -> list[tuple[str, object]]:
        found = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and _last(node.func) == "add_argument":
                dest = _option_dest(node)
                default = next((k.value for k in node.keywords if k.arg == "default"), None)
                if dest and default is not None:
                    for v in self.values(default, _Frame(self.tree)):
                        found.append((dest, v))
        return found

    # -- launches ------------------------------------------------------------------------------------

    def launches(self) -> list[PyLaunch]:
        found = []
        programs = self._program_sources()
        calls = [node for node in ast.walk(self.tree) if isinstance(node, ast.Call)]
        # a call may launch a cupy kernel only in a file that makes one
        cupy = any(_last(node.func) in ("RawKernel", "RawModule", "get_function") for node in calls)
        for node in calls:
            frame = self.frame_of(node)
            if _last(node.func) in _HIP_LAUNCH:
                launch = self._module_launch(node, frame, programs)
            elif cupy:
                launch = self._cupy_launch(node, frame)
            else:
                continue
            if launch is not None:
                found.append(launch)
        return sorted(found, key=lambda launch: launch.line)

    def _program_sources(self) -> tuple:
        """The sources every hiprtc / NVRTC program of the file compiles."""
        code = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and _last(node.func) in _PROGRAMS:
                src = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "src"), None)
                code += [c for c in self._code(src, self.frame_of(node)) if c not in code]
        return tuple(code)

    def _module_launch(self, node: ast.Call, frame: _Frame, programs: tuple) -> PyLaunch | None:
        args = self._expand(node.args, frame)
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        names = ("f", "gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ", "sharedMemBytes",
                 "stream", "kernelParams", "extra")
        slots: dict[str, tuple[ast.AST, _Frame]] = {}
        for i, (arg, where) in enumerate(args[:len(names)]):
            slots[names[i]] = (arg, where)
        for key, value in kw.items():
            key = {"hStream": "stream", "kernel": "f", "func": "f"}.get(key, key)
            slots.setdefault(key, (value, frame))
        if "f" not in slots:
            return None
        kernels = [v for v in self.values(slots["f"][0], slots["f"][1]) if isinstance(v, _Kernel)]
        params = self._kernel_args(slots.get("extra"), slots.get("kernelParams"))
        keep = _arg_names(params)
        grid = tuple(self.render(*slots[k], keep) if k in slots else "1" for k in ("gridDimX", "gridDimY", "gridDimZ"))
        block = tuple(self.render(*slots[k], keep) if k in slots else "1"
                      for k in ("blockDimX", "blockDimY", "blockDimZ"))
        shared = self.render(*slots["sharedMemBytes"], keep) if "sharedMemBytes" in slots else "0"
        api = "hip" if _last(node.func).startswith("hip") else "cuda"
        kernel = kernels[0] if kernels else _Kernel((), api)
        return self._launch(node, kernel, grid, block, shared, params, programs)

    def _cupy_launch(self, node: ast.Call, frame: _Frame) -> PyLaunch | None:
        if len(node.args) < 2 or isinstance(node.func, ast.Attribute) and node.func.attr in _HIP_LAUNCH:
            return None
        if not isinstance(node.func, (ast.Name, ast.Attribute, ast.Call)):
            return None
        if isinstance(node.func, ast.Name) and node.func.id in self.functions:
            return None
        kernels = [v for v in self.values(node.func, frame) if isinstance(v, _Kernel) and v.api == "cupy"]
        if not kernels:
            return None
        args_node = node.args[2] if len(node.args) > 2 else next((k.value for k in node.keywords
                                                                  if k.arg == "args"), None)
        params = self._kernel_args((args_node, frame), None)
        keep = _arg_names(params)
        grid = self._dims(node.args[0], frame, keep)
        block = self._dims(node.args[1], frame, keep)
        shared_node = next((k.value for k in node.keywords if k.arg == "shared_mem"), None)
        shared = self.render(shared_node, frame, keep) if shared_node is not None else "0"
        return self._launch(node, kernels[0], grid, block, shared, params, ())

    def _launch(self, node: ast.Call, kernel: _Kernel, grid: tuple, block: tuple, shared: str,
                params: list[tuple[ast.AST, _Frame]], programs: tuple) -> PyLaunch:
        name = kernel.names[0] if kernel.names else ""
        targs: tuple[str, ...] = ()
        if "<" in name and name.endswith(">"):
            name, _, inner = name.partition("<")
            targs = tuple(a.strip() for a in inner[:-1].split(",") if a.strip())
        code = kernel.code or programs
        sources, inline = [], ""
        for c in code:
            if isinstance(c, _Content):
                sources += [s for s in self._patterns(c) if s not in sources]
            elif isinstance(c, str) and not inline:
                inline = c
        return PyLaunch(kernel=name.strip(), grid=_trim(grid), block=_trim(block), shared=shared,
                        args=tuple(self.render(a, f, set(), literal=True) for a, f in params),
                        file=self.path, line=node.lineno, api=kernel.api, sources=tuple(sources),
                        inline=inline if not sources else "", template_args=targs)

    def _patterns(self, content: _Content) -> list[str]:
        """Repository-relative patterns of the files read: from the script's folder, and (for a
        path not built from `__file__`) from the repository root too."""
        out = []
        for p in content.paths:
            if p.text.startswith("/"):
                continue
            here = posixpath.normpath(posixpath.join(self.folder, p.text)) if self.folder else posixpath.normpath(p.text)
            out.append(here)
            if not p.from_file and self.folder:
                out.append(posixpath.normpath(p.text))
        return [o for o in dict.fromkeys(out) if not o.startswith("..")]

    def _expand(self, args: list[ast.AST], frame: _Frame) -> list[tuple[ast.AST, _Frame]]:
        """Positional arguments with `*grid` spread when `grid` is a tuple written in the file."""
        out = []
        for a in args:
            if isinstance(a, ast.Starred):
                elements = self._elements(a.value, frame)
                if elements is None:
                    return out
                out += elements
            else:
                out.append((a, frame))
        return out

    def _elements(self, node: ast.AST, frame: _Frame) -> list[tuple[ast.AST, _Frame]] | None:
        if isinstance(node, (ast.Tuple, ast.List)):
            return [(e, frame) for e in node.elts]
        if isinstance(node, ast.Name):
            bound = self.bindings.get(frame.node, {}).get(node.id) or self.bindings.get(self.tree, {}).get(node.id)
            if bound and len(bound) == 1 and bound[0][0] == "expr" and not bound[0][2]:
                scope = frame if node.id in self.bindings.get(frame.node, {}) else _Frame(self.tree)
                return self._elements(bound[0][1], scope)
        if isinstance(node, ast.Call) and _last(node.func) in ("dim3", "Dim3") and node.args:
            return [(e, frame) for e in node.args]
        return None

    def _dims(self, node: ast.AST, frame: _Frame, keep: set[str]) -> tuple[str, ...]:
        elements = self._elements(node, frame)
        if elements is None:
            return (self.render(node, frame, keep),)
        return tuple(self.render(e, f, keep) for e, f in elements)

    def _kernel_args(self, extra, params) -> list[tuple[ast.AST, _Frame]]:
        """The kernel's arguments: hip-python's `extra=(a, b, ...)`, cuda-python's
        `kernelParams=((a, b, ...), (types...))`, or cupy's args tuple."""
        for slot in (extra, params):
            if slot is None or slot[0] is None:
                continue
            node, frame = slot
            if isinstance(node, ast.Constant) and node.value in (None, 0):
                continue
            elements = self._elements(node, frame)
            if elements is None:
                continue
            if len(elements) == 2 and all(isinstance(e, (ast.Tuple, ast.List)) for e, _ in elements):
                elements = [(e, elements[0][1]) for e in elements[0][0].elts]  # (values, types)
            return elements
        return []

    # -- rendering expressions -----------------------------------------------------------------------

    def render(self, node: ast.AST, frame: _Frame, keep: set[str], literal: bool = False) -> str:
        """`node` as text in flopwatch's launch syntax; names bound to one integer become the
        number unless in `keep` (or `literal`: argument lists keep names as written)."""
        rewritten = self._rewrite(_unwrap_arg(node), frame, keep, literal, 0)
        return ast.unparse(rewritten).replace(" ", "")

    def _rewrite(self, node: ast.AST, frame: _Frame, keep: set[str], literal: bool, depth: int) -> ast.AST:
        """`node` with local expressions written out, constants substituted, and ceil-division
        helpers as `ceil(a/b)`; ast.unparse then parenthesises by precedence."""
        if depth > 12:
            return node

        def r(n: ast.AST) -> ast.AST:
            return self._rewrite(_unwrap_arg(n), frame, keep, literal, depth + 1)

        def call(name: str, *args: ast.AST) -> ast.Call:
            return ast.Call(func=ast.Name(id=name), args=list(args), keywords=[])

        if isinstance(node, ast.Name):
            if literal or node.id in keep:
                return node
            single = self._single_expr(node.id, frame)
            if single is not None:  # a local expression: written out, so that its sizes stay names
                return self._rewrite(_unwrap_arg(single[0]), single[1], keep, literal, depth + 1)
            value = self.one_int(node, frame)
            return ast.Constant(value) if value is not None else node
        if isinstance(node, ast.Attribute):
            if not literal and _dotted(node) not in keep:
                value = self.one_int(node, frame)
                if value is not None:
                    return ast.Constant(value)
            return node
        if isinstance(node, ast.Subscript) and _last(node.value) == "shape":
            return node
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)):
                value = self.one_int(node, frame)
                return ast.Constant(value) if value is not None else node
            return ast.BinOp(left=r(node.left), op=node.op, right=r(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return ast.UnaryOp(op=node.op, operand=r(node.operand))
        if isinstance(node, ast.Call):
            name = _last(node.func)
            args = node.args
            if len(args) == 2 and name in _CDIV:
                return call("ceil", ast.BinOp(left=r(args[0]), op=ast.Div(), right=r(args[1])))
            if len(args) == 1 and name in ("ceil", "floor"):
                return call(name, r(args[0]))
            if len(args) == 1 and name == "int":
                inner = _unwrap_arg(args[0])
                # int(a / b) is a floor; int(math.ceil(...)) and int(N) change nothing
                if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Div):
                    return call("floor", r(inner))
                return r(inner)
            if name in ("max", "min") and len(args) >= 2:
                return call(name, *(r(a) for a in args))
            if name == "size" and isinstance(node.func, ast.Attribute) and len(args) == 1:
                index = self.one_int(args[0], frame)
                if index is not None:  # x.size(0) is x.shape[0]
                    return ast.Subscript(value=ast.Attribute(value=node.func.value, attr="shape"),
                                         slice=ast.Constant(index))
        if not literal:
            value = self.one_int(node, frame)
            if value is not None:
                return ast.Constant(value)
        return node

    def _single_expr(self, name: str, frame: _Frame) -> tuple[ast.AST, _Frame] | None:
        """The one expression `name` is bound to (in the function, else the module), if it is
        bound exactly once, not by unpacking, and is no parameter."""
        for scope in ([frame.node, self.tree] if frame.node is not self.tree else [self.tree]):
            params = _params(scope) if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
            bound = self.bindings.get(scope, {}).get(name)
            if name in params or name in frame.env:
                return None
            if bound:
                if len(bound) == 1 and bound[0][0] == "expr" and not bound[0][2]:
                    return bound[0][1], (frame if scope is frame.node else _Frame(self.tree))
                return None
        return None

    # -- tensors and sizes ---------------------------------------------------------------------------

    def tensors(self) -> list[TensorMade]:
        made: list[TensorMade] = []
        by_name: dict[str, TensorMade] = {}
        for node in sorted((n for n in ast.walk(self.tree) if isinstance(n, ast.Call)),
                           key=lambda n: (n.lineno, n.col_offset)):
            frame = self.frame_of(node)
            qualified = self.qualified(node.func, frame)
            module, _, rest = qualified.partition(".")
            factory = rest.split(".")[-1]
            if module not in _TENSOR_MODULES or factory not in _FACTORIES or not rest:
                continue
            shape, dtypes, explicit = self._factory(node, frame, module, factory, by_name)
            top, dtypes, explicit = self._conversions(node, frame, dtypes, explicit)
            name = self._target(top)
            for dtype in dtypes or [""]:
                record = TensorMade(name=name, shape=shape, dtype=dtype, explicit=explicit, factory=qualified,
                                    line=node.lineno)
                made.append(record)
                if name:
                    by_name[name] = record
        return made

    def _factory(self, node: ast.Call, frame: _Frame, module: str, factory: str,
                 made: dict[str, TensorMade]) -> tuple[tuple, list[str], bool]:
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        dtypes = self._dtypes(kw.get("dtype"), frame)
        explicit = bool(dtypes)
        if factory.endswith("_like"):
            source = made.get(_dotted(node.args[0])) if node.args else None
            shape = source.shape if source else ()
            if not dtypes and source:
                dtypes, explicit = [source.dtype], source.explicit
            return shape, dtypes, explicit
        dims: list[ast.AST] = []
        size = kw.get("size", kw.get("shape"))
        args = node.args
        if factory in ("randint",):
            args = args[2:] if len(args) >= 3 else args[1:] if len(args) == 2 and isinstance(args[1], ast.Tuple) else []
        if factory in ("full",):
            args = args[:1]
        if factory in ("normal", "uniform") and module != "torch":
            size = size or (args[2] if len(args) > 2 else None)
            args = []
        if size is not None:
            dims = list(size.elts) if isinstance(size, (ast.Tuple, ast.List)) else [size]
        elif len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
            dims = list(args[0].elts)
        elif len(args) == 1 and isinstance(args[0], (ast.Name, ast.Starred)):  # randn(shape), randn(*shape)
            inner = args[0].value if isinstance(args[0], ast.Starred) else args[0]
            elements = self._elements(inner, frame)
            dims = [e for e, _ in elements] if elements is not None else [args[0]]
            if elements is None:  # a tuple the name holds (a test's parametrized `shape`): its sizes
                held = [v for v in self.values(inner, frame) if isinstance(v, _Seq)]
                if len(held) == 1 and all(type(i) is int for i in held[0].items):
                    dims = [ast.Constant(i) for i in held[0].items]
        else:
            dims = list(args)
        shape = tuple(self._dim(d, frame) for d in dims if not isinstance(d, ast.Starred))
        if not dtypes:
            default = _FACTORIES[factory] if module == "torch" else _NUMPY_DEFAULT
            if module != "torch" and factory == "randint":
                default = "int64"
            dtypes = [default] if default else []
        return shape, dtypes, explicit

    def _dim(self, node: ast.AST, frame: _Frame) -> int | str:
        value = self.one_int(node, frame)
        return value if value is not None else ast.unparse(node)

    def _dtypes(self, node: ast.AST | None, frame: _Frame) -> list[str]:
        if node is None:
            return []
        out = []
        for v in self.values(node, frame):
            name = v.name if isinstance(v, _DType) else DTYPE_NAMES.get(v) if isinstance(v, str) else None
            if name and name not in out:
                out.append(name)
        return out

    def _conversions(self, node: ast.AST, frame: _Frame, dtypes: list[str], explicit: bool):
        """Walk up `.half()`, `.to(torch.bfloat16)`, `.astype(np.float16)`, `.cuda()`: the outermost
        call of the chain, and the dtype it ends with."""
        current = node
        while True:
            attribute = self.parent.get(current)
            call = self.parent.get(attribute) if isinstance(attribute, ast.Attribute) else None
            if not (isinstance(call, ast.Call) and call.func is attribute):
                # torch.randn(...) / 10 and torch.randn(K, N).T are the same tensor, as made
                if isinstance(attribute, ast.BinOp) or isinstance(attribute, ast.Attribute) \
                        and attribute.attr in ("T", "mT", "data"):
                    current = attribute
                    continue
                return current, dtypes, explicit
            method = attribute.attr
            if method in _CONVERSIONS and not call.args:
                dtypes, explicit = [_CONVERSIONS[method]], True
            elif method in ("to", "astype", "type", "view"):
                kw = {k.arg: k.value for k in call.keywords if k.arg}
                candidates = [kw.get("dtype"), *call.args]
                for c in candidates:
                    found = self._dtypes(c, frame)
                    if found:
                        dtypes, explicit = found, True
                        break
            current = call

    def _target(self, node: ast.AST) -> str:
        parent = self.parent.get(node)
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            return _dotted(targets[0])
        if isinstance(parent, ast.Tuple):
            assign = self.parent.get(parent)
            if isinstance(assign, ast.Assign) and isinstance(assign.targets[0], ast.Tuple) \
                    and len(assign.targets[0].elts) == len(parent.elts):
                return _dotted(assign.targets[0].elts[parent.elts.index(node)])
        if isinstance(parent, ast.NamedExpr):
            return parent.target.id
        return ""

    def sizes(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}

        def add(name: str, values: list) -> None:
            for v in values:
                if type(v) is int and v > 0:
                    out.setdefault(name, [])
                    if v not in out[name]:
                        out[name].append(v)

        for dest, value in self._argparse_defaults():
            add(dest, [value] if type(value) is int else list(value.items) if isinstance(value, _Seq) else [])
        # Only what may be an integer is followed: a size is a literal, arithmetic, a loop over
        # literals, never what a library call returns (and reading those is most of the cost).
        for scope, table in self.bindings.items():
            frame = _Frame(scope)
            for name, bound in table.items():
                for how in bound:
                    if (how[0] == "iter" and self._counter(how[1])) or not _may_be_int(how[1]):
                        continue
                    add(name, self._binding(how, frame))
        for function in self.functions.values():
            for i, name in enumerate(_params(function)):
                for call, scope in self.calls_of.get(function.name, []):
                    at = self._argument(call, function, name, i)
                    if at is not None and _may_be_int(at):
                        add(name, self.values(at, _Frame(scope)))
                default = _default(function, name)
                if default is not None and _may_be_int(default):
                    add(name, self.values(default, _Frame(self.tree)))
        first = _first_lines(self.tree)
        return {k: v for k, v in sorted(out.items(), key=lambda kv: first.get(kv[0], 10 ** 9))}

    def _counter(self, node: ast.AST) -> bool:
        """`range(n)` and `range(0, ...)`: a counter, not a size."""
        if not (isinstance(node, ast.Call) and _last(node.func) == "range"):
            return False
        return len(node.args) == 1 or (isinstance(node.args[0], ast.Constant) and node.args[0].value == 0)

    # -- calls -----------------------------------------------------------------------------------------

    def calls(self) -> list[PyCall]:
        out = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _dotted(node.func):
                callee = self.qualified(node.func, self.frame_of(node))
                out.append(PyCall(callee=callee, args=tuple(ast.unparse(a) for a in node.args),
                                  kwargs={k.arg: ast.unparse(k.value) for k in node.keywords if k.arg},
                                  line=node.lineno))
        return sorted(out, key=lambda c: c.line)


# -- small helpers ---------------------------------------------------------------------------------

_INT_CALLS = ("int", "max", "min", "range", "sorted", "list", "tuple", "reversed", "abs")


def _may_be_int(node: ast.AST) -> bool:
    """Whether `node` may evaluate to integers (or lists of them) worth following for sizes."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.ListComp)):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(_may_be_int(e) for e in node.elts)
    if isinstance(node, ast.Call):
        return _last(node.func) in _INT_CALLS
    return False


def _params(function: ast.AST) -> list[str]:
    a = function.args
    return [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]


def _default(function: ast.AST, name: str) -> ast.AST | None:
    a = function.args
    positional = [*a.posonlyargs, *a.args]
    for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults):
        if p.arg == name:
            return d
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        if p.arg == name:
            return d
    return None


def own_returns(function: ast.AST) -> list[ast.Return]:
    """The function's return statements with a value, not those of functions nested in it."""
    found, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack += list(ast.iter_child_nodes(node))
    return found


def _option_dest(call: ast.Call) -> str:
    dest = next((k.value.value for k in call.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)), None)
    if dest:
        return dest
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    long = [n for n in names if n.startswith("--")]
    pick = long[0] if long else names[0] if names else ""
    return pick.lstrip("-").replace("-", "_")


def _unwrap_arg(node: ast.AST) -> ast.AST:
    """`ctypes.c_int(M)`, `np.int32(M)`, `A.data_ptr()`, `int(A.data_ptr())` → the value inside."""
    while True:
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
                and _last(node.func) in _ARG_WRAPPERS and _last(node.func) not in ("int", "float"):
            node = node.args[0]
        elif isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _POINTER_METHODS:
            node = node.func.value
        elif isinstance(node, ast.Call) and len(node.args) == 1 and _last(node.func) == "int" \
                and isinstance(node.args[0], ast.Call) and isinstance(node.args[0].func, ast.Attribute) \
                and node.args[0].func.attr in _POINTER_METHODS:
            node = node.args[0]
        elif isinstance(node, ast.Attribute) and node.attr in ("value", "ptr") and isinstance(node.value, ast.Call):
            node = node.value
        else:
            return node


def _unwrap_result(value):
    """hip-python's `(err, function)`: the function."""
    if isinstance(value, _Seq) and len(value.items) == 2 and isinstance(value.items[1], _Kernel):
        return value.items[1]
    return value


def _arg_names(params: list[tuple[ast.AST, _Frame]]) -> set[str]:
    """Names passed to the kernel: they are sizes of the launch, never replaced by a value."""
    out = set()
    for node, _ in params:
        node = _unwrap_arg(node)
        if isinstance(node, (ast.Name, ast.Attribute)):
            out.add(_dotted(node))
    return {n for n in out if n}


def _trim(dims: tuple[str, ...]) -> tuple[str, ...]:
    dims = tuple(dims)
    while len(dims) > 1 and dims[-1] == "1":
        dims = dims[:-1]
    return dims


def _count(options: list[list]) -> int:
    total = 1
    for o in options:
        total *= max(1, len(o))
    return total


_INTEGER_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Div: lambda a, b: a / b,
                ast.Pow: lambda a, b: a ** b if 0 <= b <= 64 else None,
                ast.LShift: lambda a, b: a << b if 0 <= b <= 64 else None}


def _apply(op: ast.operator, a, b):
    if type(a) is int and type(b) is int:
        compute = _INTEGER_OPS.get(type(op))
        try:
            value = compute(a, b) if compute else None
        except ZeroDivisionError:
            return None
        # sizes are machine integers: a value beyond them is a hash or a counter run away
        return value if value is None or abs(value) < 1 << 63 else None
    if isinstance(op, ast.Add) and isinstance(a, str) and isinstance(b, str):
        return a + b if len(a) + len(b) <= _MAX_TEXT else None
    if isinstance(op, ast.Div) and isinstance(a, (_Path, str)) and isinstance(b, (_Path, str)):
        left = a if isinstance(a, _Path) else _Path(a)
        right = b if isinstance(b, _Path) else _Path(b)
        return _Path(posixpath.join(left.text, right.text) if left.text else right.text,
                     left.from_file or right.from_file)
    if isinstance(op, ast.Add) and isinstance(a, (_Path, str)) and isinstance(b, (_Path, str)):
        text_a = a.text if isinstance(a, _Path) else a
        text_b = b.text if isinstance(b, _Path) else b
        return _Path(text_a + text_b, getattr(a, "from_file", False) or getattr(b, "from_file", False))
    if isinstance(op, ast.Mult) and isinstance(a, _Seq) and type(b) is int and 0 < b <= 8:
        return _Seq(a.items * b)
    return None


def _first_lines(tree: ast.Module) -> dict[str, int]:
    """Name → the line it first appears on (a name, a parameter, an argparse option)."""
    first: dict[str, int] = {}
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.arg) else \
            node.value.lstrip("-").replace("-", "_") if isinstance(node, ast.Constant) and isinstance(node.value, str) \
            else None
        if name and (name not in first or node.lineno < first[name]):
            first[name] = node.lineno
    return first
