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

from pipeline.onboarding.source.py_calls import code_values
from pipeline.onboarding.source.py_eval import Interpreter
from pipeline.onboarding.source.py_tensors import tensors_made
from pipeline.onboarding.source.py_values import (
    CDIV,
    HIP_LAUNCH,
    PROGRAMS,
    Content,
    Frame,
    KernelValue,
    Seq,
    arg_names,
    default_of,
    dotted,
    first_lines,
    last,
    may_be_int,
    own_returns,  # noqa: F401  (read by entries and tests_scan until they move)
    params_of,
    trim,
    unwrap_arg,
)
from pipeline.onboarding.source.records import PyCall, PyLaunch, TensorMade


def python_launches(path: str, text: str) -> list[PyLaunch]:
    """Every kernel launch of the script, in source order (module + functions); [] when the
    text is not Python."""
    reader = _reader(path, text)
    return reader.reading(lambda: launches(reader), []) if reader else []


def script_tensors(path: str, text: str, given: dict[int, dict[str, ast.AST]] | None = None) -> list[TensorMade]:
    """Every tensor the script makes with a torch, numpy or cupy factory, in source order
    (`source.py_tensors.tensors_made`)."""
    reader = _reader(path, text)
    return tensors_made(reader, given) if reader else []


def parsed(path: str, text: str) -> ast.Module | None:
    """The tree the readers above read (shared, not to be changed): expressions handed back to
    them (`script_tensors`' `given`, `module_values`) must be its nodes."""
    reader = _reader(path, text)
    return reader.tree if reader else None


def module_values(path: str, text: str, node: ast.AST) -> list:
    reader = _reader(path, text)
    return reader.module_values(node) if reader else []


def script_sizes(path: str, text: str) -> dict[str, list[int]]:
    """Name → the positive integers the script gives it, first seen first: assignments (tuple
    unpacking included), loop variables over literal lists or ranges not starting at 0, argparse
    options (`--M` with `type=int, default=4096` → "M"; `dest=` honoured), and the parameters of
    the script's functions (their defaults and the integers its calls pass)."""
    reader = _reader(path, text)
    return reader.reading(lambda: sizes(reader), {}) if reader else {}


def python_calls(path: str, text: str) -> list[PyCall]:
    """Every call whose callee is a dotted name (`module.function(...)`), in source order."""
    reader = _reader(path, text)
    return reader.reading(lambda: calls(reader), []) if reader else []


@functools.lru_cache(maxsize=8)  # a script is usually read for its tensors, sizes and calls in a row
def _reader(path: str, text: str) -> Interpreter | None:
    try:
        tree = ast.parse(text, filename=path)
        return Interpreter(path, tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


# -- launches ------------------------------------------------------------------------------------

def launches(interp) -> list[PyLaunch]:
    found = []
    programs = _program_sources(interp)
    calls = [node for node in ast.walk(interp.tree) if isinstance(node, ast.Call)]
    # a call may launch a cupy kernel only in a file that makes one
    cupy = any(last(node.func) in ("RawKernel", "RawModule", "get_function") for node in calls)
    for node in calls:
        frame = interp.frame_of(node)
        if last(node.func) in HIP_LAUNCH:
            launch = _module_launch(interp, node, frame, programs)
        elif cupy:
            launch = _cupy_launch(interp, node, frame)
        else:
            continue
        if launch is not None:
            found.append(launch)
    return sorted(found, key=lambda launch: launch.line)

def _program_sources(interp) -> tuple:
    """The sources every hiprtc / NVRTC program of the file compiles."""
    code = []
    for node in ast.walk(interp.tree):
        if isinstance(node, ast.Call) and last(node.func) in PROGRAMS:
            src = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "src"), None)
            code += [c for c in code_values(interp, src, interp.frame_of(node)) if c not in code]
    return tuple(code)

def _module_launch(interp, node: ast.Call, frame: Frame, programs: tuple) -> PyLaunch | None:
    args = _expand(interp, node.args, frame)
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    names = ("f", "gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ", "sharedMemBytes",
             "stream", "kernelParams", "extra")
    slots: dict[str, tuple[ast.AST, Frame]] = {}
    for i, (arg, where) in enumerate(args[:len(names)]):
        slots[names[i]] = (arg, where)
    for key, value in kw.items():
        key = {"hStream": "stream", "kernel": "f", "func": "f"}.get(key, key)
        slots.setdefault(key, (value, frame))
    if "f" not in slots:
        return None
    kernels = [v for v in interp.values(slots["f"][0], slots["f"][1]) if isinstance(v, KernelValue)]
    params = _kernel_args(interp, slots.get("extra"), slots.get("kernelParams"))
    keep = arg_names(params)
    grid = tuple(render(interp, *slots[k], keep) if k in slots else "1" for k in ("gridDimX", "gridDimY", "gridDimZ"))
    block = tuple(render(interp, *slots[k], keep) if k in slots else "1"
                  for k in ("blockDimX", "blockDimY", "blockDimZ"))
    shared = render(interp, *slots["sharedMemBytes"], keep) if "sharedMemBytes" in slots else "0"
    api = "hip" if last(node.func).startswith("hip") else "cuda"
    kernel = kernels[0] if kernels else KernelValue((), api)
    return _launch(interp, node, kernel, grid, block, shared, params, programs)

def _cupy_launch(interp, node: ast.Call, frame: Frame) -> PyLaunch | None:
    if len(node.args) < 2 or isinstance(node.func, ast.Attribute) and node.func.attr in HIP_LAUNCH:
        return None
    if not isinstance(node.func, (ast.Name, ast.Attribute, ast.Call)):
        return None
    if isinstance(node.func, ast.Name) and node.func.id in interp.functions:
        return None
    kernels = [v for v in interp.values(node.func, frame) if isinstance(v, KernelValue) and v.api == "cupy"]
    if not kernels:
        return None
    args_node = node.args[2] if len(node.args) > 2 else next((k.value for k in node.keywords
                                                              if k.arg == "args"), None)
    params = _kernel_args(interp, (args_node, frame), None)
    keep = arg_names(params)
    grid = _dims(interp, node.args[0], frame, keep)
    block = _dims(interp, node.args[1], frame, keep)
    shared_node = next((k.value for k in node.keywords if k.arg == "shared_mem"), None)
    shared = render(interp, shared_node, frame, keep) if shared_node is not None else "0"
    return _launch(interp, node, kernels[0], grid, block, shared, params, ())

def _launch(interp, node: ast.Call, kernel: KernelValue, grid: tuple, block: tuple, shared: str,
            params: list[tuple[ast.AST, Frame]], programs: tuple) -> PyLaunch:
    name = kernel.names[0] if kernel.names else ""
    targs: tuple[str, ...] = ()
    if "<" in name and name.endswith(">"):
        name, _, inner = name.partition("<")
        targs = tuple(a.strip() for a in inner[:-1].split(",") if a.strip())
    code = kernel.code or programs
    sources, inline = [], ""
    for c in code:
        if isinstance(c, Content):
            sources += [s for s in _patterns(interp, c) if s not in sources]
        elif isinstance(c, str) and not inline:
            inline = c
    return PyLaunch(kernel=name.strip(), grid=trim(grid), block=trim(block), shared=shared,
                    args=tuple(render(interp, a, f, set(), literal=True) for a, f in params),
                    file=interp.path, line=node.lineno, api=kernel.api, sources=tuple(sources),
                    inline=inline if not sources else "", template_args=targs)

def _patterns(interp, content: Content) -> list[str]:
    """Repository-relative patterns of the files read: from the script's folder, and (for a
    path not built from `__file__`) from the repository root too."""
    out = []
    for p in content.paths:
        if p.text.startswith("/"):
            continue
        here = posixpath.normpath(posixpath.join(interp.folder, p.text)) if interp.folder else posixpath.normpath(p.text)
        out.append(here)
        if not p.from_file and interp.folder:
            out.append(posixpath.normpath(p.text))
    return [o for o in dict.fromkeys(out) if not o.startswith("..")]

def _expand(interp, args: list[ast.AST], frame: Frame) -> list[tuple[ast.AST, Frame]]:
    """Positional arguments with `*grid` spread when `grid` is a tuple written in the file."""
    out = []
    for a in args:
        if isinstance(a, ast.Starred):
            elements = interp.elements(a.value, frame)
            if elements is None:
                return out
            out += elements
        else:
            out.append((a, frame))
    return out

def _dims(interp, node: ast.AST, frame: Frame, keep: set[str]) -> tuple[str, ...]:
    elements = interp.elements(node, frame)
    if elements is None:
        return (render(interp, node, frame, keep),)
    return tuple(render(interp, e, f, keep) for e, f in elements)

def _kernel_args(interp, extra, params) -> list[tuple[ast.AST, Frame]]:
    """The kernel's arguments: hip-python's `extra=(a, b, ...)`, cuda-python's
    `kernelParams=((a, b, ...), (types...))`, or cupy's args tuple."""
    for slot in (extra, params):
        if slot is None or slot[0] is None:
            continue
        node, frame = slot
        if isinstance(node, ast.Constant) and node.value in (None, 0):
            continue
        elements = interp.elements(node, frame)
        if elements is None:
            continue
        if len(elements) == 2 and all(isinstance(e, (ast.Tuple, ast.List)) for e, _ in elements):
            elements = [(e, elements[0][1]) for e in elements[0][0].elts]  # (values, types)
        return elements
    return []

# -- rendering expressions ---------------------------------------------------------------------------

def render(interp, node: ast.AST, frame: Frame, keep: set[str], literal: bool = False) -> str:
    """`node` as text in flopwatch's launch syntax; names bound to one integer become the
    number unless in `keep` (or `literal`: argument lists keep names as written)."""
    rewritten = _rewrite(interp, unwrap_arg(node), frame, keep, literal, 0)
    return ast.unparse(rewritten).replace(" ", "")

def _rewrite(interp, node: ast.AST, frame: Frame, keep: set[str], literal: bool, depth: int) -> ast.AST:
    """`node` with local expressions written out, constants substituted, and ceil-division
    helpers as `ceil(a/b)`; ast.unparse then parenthesises by precedence."""
    if depth > 12:
        return node

    def r(n: ast.AST) -> ast.AST:
        return _rewrite(interp, unwrap_arg(n), frame, keep, literal, depth + 1)

    def call(name: str, *args: ast.AST) -> ast.Call:
        return ast.Call(func=ast.Name(id=name), args=list(args), keywords=[])

    if isinstance(node, ast.Name):
        if literal or node.id in keep:
            return node
        single = interp.single_expr(node.id, frame)
        if single is not None:  # a local expression: written out, so that its sizes stay names
            return _rewrite(interp, unwrap_arg(single[0]), single[1], keep, literal, depth + 1)
        value = interp.one_int(node, frame)
        return ast.Constant(value) if value is not None else node
    if isinstance(node, ast.Attribute):
        if not literal and dotted(node) not in keep:
            value = interp.one_int(node, frame)
            if value is not None:
                return ast.Constant(value)
        return node
    if isinstance(node, ast.Subscript) and last(node.value) == "shape":
        return node
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv)):
            value = interp.one_int(node, frame)
            return ast.Constant(value) if value is not None else node
        return ast.BinOp(left=r(node.left), op=node.op, right=r(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return ast.UnaryOp(op=node.op, operand=r(node.operand))
    if isinstance(node, ast.Call):
        name = last(node.func)
        args = node.args
        if len(args) == 2 and name in CDIV:
            return call("ceil", ast.BinOp(left=r(args[0]), op=ast.Div(), right=r(args[1])))
        if len(args) == 1 and name in ("ceil", "floor"):
            return call(name, r(args[0]))
        if len(args) == 1 and name == "int":
            inner = unwrap_arg(args[0])
            # int(a / b) is a floor; int(math.ceil(...)) and int(N) change nothing
            if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Div):
                return call("floor", r(inner))
            return r(inner)
        if name in ("max", "min") and len(args) >= 2:
            return call(name, *(r(a) for a in args))
        if name == "size" and isinstance(node.func, ast.Attribute) and len(args) == 1:
            index = interp.one_int(args[0], frame)
            if index is not None:  # x.size(0) is x.shape[0]
                return ast.Subscript(value=ast.Attribute(value=node.func.value, attr="shape"),
                                     slice=ast.Constant(index))
    if not literal:
        value = interp.one_int(node, frame)
        if value is not None:
            return ast.Constant(value)
    return node


# -- sizes and calls ---------------------------------------------------------------------------

def sizes(interp) -> dict[str, list[int]]:
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

def calls(interp) -> list[PyCall]:
    out = []
    for node in ast.walk(interp.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and dotted(node.func):
            callee = interp.qualified(node.func, interp.frame_of(node))
            out.append(PyCall(callee=callee, args=tuple(ast.unparse(a) for a in node.args),
                              kwargs={k.arg: ast.unparse(k.value) for k in node.keywords if k.arg},
                              line=node.lineno))
    return sorted(out, key=lambda c: c.line)
