"""Kernels compiled at run time and launched from Python: through cupy (`cupy.RawKernel(code,
"name")`, `cupy.RawModule(code=...).get_function("name")`, then `kernel(grid, block, args,
shared_mem=n)`) or through hip-python / cuda-python (`hipModuleGetFunction(module, b"name")`,
`cuModuleGetFunction`, then `hipModuleLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream,
params, extra)` or `cuLaunchKernel` in the same order). The kernel source files compiled
(hiprtc / NVRTC programs, cupy's code) are followed through `open(path).read()`,
`Path(...).read_text()`, paths joined from a folder and a loop variable over a list of names,
`os.listdir` or a glob. Expressions of launch geometry come out in flopwatch's launch syntax over
the script's own names: `triton.cdiv(M, 64)` → `ceil(M/64)`, `math.ceil(M / 64)` → `ceil(M/64)`,
`(N + 127) // 128` → `(N+127)//128`; a name bound to a single integer becomes the number unless
the launch also passes it to the kernel (then it is a size: `M` stays `M`). Never run."""

from __future__ import annotations

import ast
import posixpath

from pipeline.onboarding.source.py_calls import code_values
from pipeline.onboarding.source.py_eval import Interpreter
from pipeline.onboarding.source.py_values import (
    CDIV,
    HIP_LAUNCH,
    PROGRAMS,
    Content,
    Frame,
    KernelValue,
    arg_names,
    dotted,
    last,
    trim,
    unwrap_arg,
)
from pipeline.onboarding.source.records import PyLaunch

GIVES = (PyLaunch,)
# Words of a script that may launch a compiled kernel.
LAUNCH_WORDS = ("LaunchKernel", "RawKernel", "RawModule")


def matches(repo, rel: str) -> bool:
    """A Python file naming a kernel launch or a cupy kernel."""
    return rel.endswith(".py") and any(word in repo.text(rel) for word in LAUNCH_WORDS)


def read(repo, rel: str) -> list[PyLaunch]:
    """The file's launches of compiled kernels, in source order."""
    interp = repo.interpreter(rel)
    return interp.reading(lambda: launches(interp), []) if interp else []


def python_launches(path: str, text: str) -> list[PyLaunch]:
    """Every kernel launch of a script given as text, in source order (module + functions); []
    when the text is not Python."""
    try:
        interp = Interpreter(path, ast.parse(text, filename=path))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return interp.reading(lambda: launches(interp), [])


def launches(interp) -> list[PyLaunch]:
    """Every launch of a compiled kernel the interpreter's file makes (module and functions)."""
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
