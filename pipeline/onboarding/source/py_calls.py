"""What calls return to the interpreter of `pipeline.onboarding.source.py_eval`: the standard
library's paths, files and globs (`os.path.join`, `Path(...)`, `open(...).read()`, `glob`),
`range`, argparse, cupy's `RawKernel` / `RawModule`, hip-python's and cuda-python's kernel
lookups, and a script's own functions. Nothing is imported or run."""

from __future__ import annotations

import ast
import posixpath
from itertools import product

from pipeline.onboarding.source.py_values import (
    DTYPE_NAMES,
    LIMIT,
    LOOKUPS,
    MAX_TEXT,
    TENSOR_MODULES,
    Content,
    DType,
    Frame,
    Glob,
    Handle,
    KernelValue,
    ModuleName,
    ModuleValue,
    Namespace,
    PathValue,
    Seq,
    count,
    last,
    unwrap_result,
)


def call_values(interp, node: ast.Call, frame: Frame) -> list:
    """The values a call may return: the standard library's path, file, glob and argparse calls,
    cupy's and hip-python's / cuda-python's kernel lookups, the file's own functions, and an
    unknown wrapper of one value."""
    func = node.func
    name = last(func)
    args = node.args
    first = args[0] if args else None
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    if isinstance(func, ast.Attribute):
        receivers = interp.values(func.value, frame)
        method = method_values(interp, node, func.attr, receivers, frame, kw)
        if method is not None:
            return method
    qualified = interp.qualified(func, frame)
    module = qualified.split(".")[0]
    if qualified in ("os.path.join", "posixpath.join") and args:
        return join_paths(interp, args, frame)
    if qualified in ("os.path.dirname", "posixpath.dirname") and first is not None:
        return [PathValue(posixpath.dirname(p.text), p.from_file) for p in path_values(interp, first, frame)]
    if qualified in ("os.path.abspath", "os.path.realpath", "os.path.normpath", "os.fspath", "str", "repr",
                     "os.path.expanduser") and first is not None:
        return interp.values(first, frame)
    if qualified in ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "Path"):
        return join_paths(interp, args, frame) if args else [PathValue(".")]
    if qualified == "open" and first is not None:
        return [Handle(p) for p in path_values(interp, first, frame)]
    if qualified == "os.listdir":
        return [Glob(PathValue("*"))]
    if qualified in ("glob.glob", "glob.iglob") and first is not None:
        return [Glob(p) for p in path_values(interp, first, frame)]
    if qualified in ("sorted", "list", "tuple", "reversed", "set", "iter"):
        return interp.values(first, frame) if first is not None else []
    if qualified == "range":
        return range_values(interp, args, frame)
    if qualified in ("int", "abs") and first is not None:
        return [int(v) if isinstance(v, float) else v for v in interp.values(first, frame)
                if isinstance(v, (int, float))]
    if qualified in ("max", "min") and len(args) >= 2:
        options = [[v for v in interp.values(a, frame) if type(v) is int] for a in args]
        if all(options) and count(options) <= LIMIT:
            return [(max if qualified == "max" else min)(c) for c in product(*options)]
        return []
    if qualified == "getattr" and len(args) >= 2:
        out = []
        for base in interp.values(args[0], frame):
            for attr in interp.values(args[1], frame):
                if isinstance(base, ModuleName) and isinstance(attr, str):
                    dtype = DTYPE_NAMES.get(attr)
                    out.append(DType(dtype) if dtype and base.dotted in TENSOR_MODULES
                               else ModuleName(f"{base.dotted}.{attr}"))
        return out
    if qualified.endswith(".dtype") and first is not None and module in TENSOR_MODULES:
        return [DType(DTYPE_NAMES[v]) for v in interp.values(first, frame) if isinstance(v, str) and v in DTYPE_NAMES]
    if qualified.endswith(".ArgumentParser"):
        return [ModuleName("argparse.ArgumentParser")]
    if module == "cupy" and name == "RawKernel":
        code = kw.get("code", first)
        kernel = kw.get("name", args[1] if len(args) > 1 else None)
        return [KernelValue(tuple(n for n in interp.values(kernel, frame) if isinstance(n, str)), "cupy",
                            code_values(interp, code, frame))]
    if module == "cupy" and name == "RawModule":
        code = kw.get("code", first)
        if code is None and "path" in kw:
            return [ModuleValue(tuple(Content((p,)) for p in path_values(interp, kw["path"], frame)))]
        return [ModuleValue(code_values(interp, code, frame))]
    if name in LOOKUPS and len(args) >= 2:
        names = tuple(n for n in interp.values(args[1], frame) if isinstance(n, str))
        api = "hip" if name.startswith("hip") else "cuda"
        kernel = KernelValue(names, api)
        return [Seq((0, kernel)), kernel]  # hip-python and cuda-python return (err, function)
    if name in interp.functions and isinstance(func, (ast.Name, ast.Attribute)):
        returned = interp.returns_values(interp.functions[name], node, frame)
        if returned or len(args) != 1:
            return returned
    # An unknown wrapper of one value (`hip_check(hip.hipModuleGetFunction(...))`): that value.
    if len(args) == 1 and not node.keywords:
        found = interp.values(first, frame)
        return [unwrap_result(v) for v in found if isinstance(v, (KernelValue, Seq))]
    return []


def method_values(interp, node: ast.Call, attr: str, receivers: list, frame: Frame, kw: dict) -> list | None:
    """The values a method call on known receivers returns (a file handle's read, a path's glob,
    a module's `get_function`, argparse's `parse_args`); None where the caller reads it."""
    args = node.args
    first = args[0] if args else None
    if not receivers:
        return None
    out = []
    for r in receivers:
        if isinstance(r, Handle) and attr in ("read", "readlines"):
            out.append(Content((r.path,)))
        elif isinstance(r, PathValue) and attr in ("read_text", "read_bytes"):
            out.append(Content((r,)))
        elif isinstance(r, PathValue) and attr in ("glob", "rglob", "iterdir"):
            patterns = [p for p in interp.values(first, frame) if isinstance(p, str)] if first is not None else ["*"]
            sep = "/**/" if attr == "rglob" else "/"
            out += [Glob(PathValue(r.text + sep + p, r.from_file)) for p in patterns]
        elif isinstance(r, PathValue) and attr in ("resolve", "absolute", "expanduser", "with_suffix", "joinpath"):
            out += join_paths(interp, [*args], frame, r) if attr == "joinpath" else [r]
        elif isinstance(r, PathValue) and attr == "open":
            out.append(Handle(r))
        elif isinstance(r, (str, Content)) and attr in ("encode", "decode", "strip", "format"):
            out.append(r)
        elif isinstance(r, str) and attr == "join" and first is not None:
            out += [r.join(str(i) for i in s.items) for s in interp.values(first, frame)
                    if isinstance(s, Seq) and all(isinstance(i, (str, int)) for i in s.items)
                    and sum(len(str(i)) for i in s.items) <= MAX_TEXT]
        elif isinstance(r, ModuleValue) and attr == "get_function" and first is not None:
            names = tuple(n for n in interp.values(first, frame) if isinstance(n, str))
            out.append(KernelValue(names, "cupy", r.code))
        elif isinstance(r, ModuleName) and attr in ("parse_args", "parse_known_args"):
            namespace = Namespace(tuple(interp.argparse_defaults()))
            out.append(namespace if attr == "parse_args" else Seq((namespace, Seq(()))))
        elif isinstance(r, ModuleName):
            return None  # a module's function: read by the caller
    return out or None


# -- paths, ranges and code -------------------------------------------------------------------------

def join_paths(interp, parts: list[ast.AST], frame: Frame, base: PathValue | None = None) -> list:
    """`os.path.join` / `Path(a, b)` / `p.joinpath(...)` of the parts' values."""
    options = [[base]] if base is not None else []
    for p in parts:
        found = path_values(interp, p, frame)
        if not found:
            return []
        options.append(found)
    if count(options) > LIMIT:
        return []
    out = []
    for combo in product(*options):
        text, from_file = "", False
        for piece in combo:
            text = piece.text if piece.text.startswith("/") else posixpath.join(text, piece.text) if text \
                else piece.text
            from_file = from_file or piece.from_file
        out.append(PathValue(text, from_file))
    return out

def path_values(interp, node: ast.AST, frame: Frame) -> list[PathValue]:
    """The paths an expression may be (strings, paths, glob patterns)."""
    out = []
    for v in interp.values(node, frame):
        if isinstance(v, PathValue):
            out.append(v)
        elif isinstance(v, str):
            out.append(PathValue(v))
        elif isinstance(v, Glob):
            out.append(v.pattern)
    return out

def range_values(interp, args: list[ast.AST], frame: Frame) -> list:
    """`range(...)` of known integers, when short enough to follow."""
    bounds = [interp.one_int(a, frame) for a in args]
    if not bounds or None in bounds or len(bounds) > 3:
        return []
    r = range(*bounds)
    return [Seq(tuple(r))] if len(r) <= 64 else []

def code_values(interp, node: ast.AST | None, frame: Frame) -> tuple:
    """The kernel source an expression gives: inline text or files read."""
    code = []
    for v in interp.values(node, frame):
        if isinstance(v, (Content, str)):
            code.append(v)
    return tuple(code)
