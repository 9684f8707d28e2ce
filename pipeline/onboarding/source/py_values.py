"""The values the Python interpreter of `pipeline.onboarding.source.py_eval` follows (paths,
file contents, compiled kernels and modules, dtypes, argparse namespaces, sequences, globs,
imported names, frames) and the small pure helpers over syntax trees it and its readers share.
Nothing is imported or run."""

from __future__ import annotations

import ast
import posixpath
from dataclasses import dataclass

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
TENSOR_MODULES = ("torch", "numpy", "cupy")
# Helpers that divide rounding up, as launch expressions write them.
CDIV = ("cdiv", "ceil_div", "ceildiv", "div_up", "divup", "ceil_divide", "iDivUp", "ceilDiv", "CEIL_DIV")
# Wrappers a kernel argument is written in: the argument is the value inside.
ARG_WRAPPERS = ("c_int", "c_uint", "c_int32", "c_uint32", "c_int64", "c_uint64", "c_long", "c_size_t",
                 "c_float", "c_double", "c_void_p", "int32", "uint32", "int64", "uint64", "float32", "float16",
                 "intc", "int", "float", "c_int16", "c_short")
POINTER_METHODS = ("data_ptr", "ptr", "__int__", "getPtr")
HIP_LAUNCH = ("hipModuleLaunchKernel", "cuLaunchKernel", "hipExtModuleLaunchKernel")
LOOKUPS = ("hipModuleGetFunction", "cuModuleGetFunction")
PROGRAMS = ("hiprtcCreateProgram", "nvrtcCreateProgram")
LIMIT = 32  # alternatives kept per value: enough for a folder of kernels, bounded for a sweep
BUDGET = 50_000  # evaluations per reading of a script: a generated or huge file is read partly, never for long
MAX_TEXT = 1 << 18  # characters of one string value: a kernel's source, not a string built up in a loop
SECONDS = 5.0  # per reading of one script: past it, what is not read yet stays unknown


# -- values ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PathValue:
    """A pathlib path or an os.path string: text relative to the script's folder when built
    from `__file__`, else as written (relative to where the script is run)."""

    text: str
    from_file: bool = False


@dataclass(frozen=True)
class Content:
    """The text of files read from disk: the patterns they match."""

    paths: tuple[PathValue, ...]


@dataclass(frozen=True)
class Handle:
    path: PathValue


@dataclass(frozen=True)
class KernelValue:
    names: tuple[str, ...]
    api: str
    code: tuple = ()  # Content or inline source strings


@dataclass(frozen=True)
class ModuleValue:
    """A compiled module (cupy.RawModule) whose functions are looked up by name."""

    code: tuple


@dataclass(frozen=True)
class DType:
    name: str


@dataclass(frozen=True)
class Namespace:
    """What argparse's parse_args() returns: option name → default."""

    defaults: tuple[tuple[str, object], ...]


@dataclass(frozen=True)
class Seq:
    items: tuple


@dataclass(frozen=True)
class Glob:
    """The result of a glob (paths matching `pattern`) or of os.listdir (bare names: `pattern`
    is then "*", to be joined to the folder as the script does)."""

    pattern: PathValue


@dataclass(frozen=True)
class ModuleName:
    """An imported module or one of its attributes: `torch`, `torch.float16`, `hip.hip`."""

    dotted: str


class Frame:
    """A function being read: its node and, when it is read for one call, its parameters'
    values at that call."""

    def __init__(self, node: ast.AST, env: dict | None = None):
        self.node, self.env = node, env or {}


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def last(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


# -- small helpers ---------------------------------------------------------------------------------

_INT_CALLS = ("int", "max", "min", "range", "sorted", "list", "tuple", "reversed", "abs")


def may_be_int(node: ast.AST) -> bool:
    """Whether `node` may evaluate to integers (or lists of them) worth following for sizes."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.ListComp)):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(may_be_int(e) for e in node.elts)
    if isinstance(node, ast.Call):
        return last(node.func) in _INT_CALLS
    return False


def params_of(function: ast.AST) -> list[str]:
    a = function.args
    return [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]


def default_of(function: ast.AST, name: str) -> ast.AST | None:
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


def option_dest(call: ast.Call) -> str:
    dest = next((k.value.value for k in call.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)), None)
    if dest:
        return dest
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    long = [n for n in names if n.startswith("--")]
    pick = long[0] if long else names[0] if names else ""
    return pick.lstrip("-").replace("-", "_")


def unwrap_arg(node: ast.AST) -> ast.AST:
    """`ctypes.c_int(M)`, `np.int32(M)`, `A.data_ptr()`, `int(A.data_ptr())` → the value inside."""
    while True:
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
                and last(node.func) in ARG_WRAPPERS and last(node.func) not in ("int", "float"):
            node = node.args[0]
        elif isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute) \
                and node.func.attr in POINTER_METHODS:
            node = node.func.value
        elif isinstance(node, ast.Call) and len(node.args) == 1 and last(node.func) == "int" \
                and isinstance(node.args[0], ast.Call) and isinstance(node.args[0].func, ast.Attribute) \
                and node.args[0].func.attr in POINTER_METHODS:
            node = node.args[0]
        elif isinstance(node, ast.Attribute) and node.attr in ("value", "ptr") and isinstance(node.value, ast.Call):
            node = node.value
        else:
            return node


def unwrap_result(value):
    """hip-python's `(err, function)`: the function."""
    if isinstance(value, Seq) and len(value.items) == 2 and isinstance(value.items[1], KernelValue):
        return value.items[1]
    return value


def arg_names(params: list[tuple[ast.AST, Frame]]) -> set[str]:
    """Names passed to the kernel: they are sizes of the launch, never replaced by a value."""
    out = set()
    for node, _ in params:
        node = unwrap_arg(node)
        if isinstance(node, (ast.Name, ast.Attribute)):
            out.add(dotted(node))
    return {n for n in out if n}


def trim(dims: tuple[str, ...]) -> tuple[str, ...]:
    dims = tuple(dims)
    while len(dims) > 1 and dims[-1] == "1":
        dims = dims[:-1]
    return dims


def count(options: list[list]) -> int:
    total = 1
    for o in options:
        total *= max(1, len(o))
    return total


_INTEGER_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Div: lambda a, b: a / b,
                ast.Pow: lambda a, b: a ** b if 0 <= b <= 64 else None,
                ast.LShift: lambda a, b: a << b if 0 <= b <= 64 else None}


def apply_op(op: ast.operator, a, b):
    if type(a) is int and type(b) is int:
        compute = _INTEGER_OPS.get(type(op))
        try:
            value = compute(a, b) if compute else None
        except ZeroDivisionError:
            return None
        # sizes are machine integers: a value beyond them is a hash or a counter run away
        return value if value is None or abs(value) < 1 << 63 else None
    if isinstance(op, ast.Add) and isinstance(a, str) and isinstance(b, str):
        return a + b if len(a) + len(b) <= MAX_TEXT else None
    if isinstance(op, ast.Div) and isinstance(a, (PathValue, str)) and isinstance(b, (PathValue, str)):
        left = a if isinstance(a, PathValue) else PathValue(a)
        right = b if isinstance(b, PathValue) else PathValue(b)
        return PathValue(posixpath.join(left.text, right.text) if left.text else right.text,
                     left.from_file or right.from_file)
    if isinstance(op, ast.Add) and isinstance(a, (PathValue, str)) and isinstance(b, (PathValue, str)):
        text_a = a.text if isinstance(a, PathValue) else a
        text_b = b.text if isinstance(b, PathValue) else b
        return PathValue(text_a + text_b, getattr(a, "from_file", False) or getattr(b, "from_file", False))
    if isinstance(op, ast.Mult) and isinstance(a, Seq) and type(b) is int and 0 < b <= 8:
        return Seq(a.items * b)
    return None


def first_lines(tree: ast.Module) -> dict[str, int]:
    """Name → the line it first appears on (a name, a parameter, an argparse option)."""
    first: dict[str, int] = {}
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.arg) else \
            node.value.lstrip("-").replace("-", "_") if isinstance(node, ast.Constant) and isinstance(node.value, str) \
            else None
        if name and (name not in first or node.lineno < first[name]):
            first[name] = node.lineno
    return first
