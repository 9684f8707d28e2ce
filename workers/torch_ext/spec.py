"""How a repository builds its torch C++/CUDA extensions, read from Python source without running it.

Three kinds of call are read: `CUDAExtension(...)` / `CppExtension(...)` (a setup.py; the call
may sit anywhere in the file: in `setup(ext_modules=[...])`, in a variable, appended under an
`if`), and `torch.utils.cpp_extension.load(...)` / `load_inline(...)` in any Python file. Their
arguments are evaluated by a small interpreter over the AST that knows literals, names bound
earlier, `+` of strings and lists, f-strings, `str.join`, `os.path`, `pathlib.Path` built from
`__file__`, and globs over the repository's file list. Anything else (a call to the repository's
own function, a comprehension, the environment, a value set in a loop or under an `if`) is an
`ExtensionReadError` naming the file, the line and the argument, so the user knows what to write
in the variant instead.

Paths are taken relative to the folder of the file holding the call (where its authors run it
from), falling back to the repository root, and come out repository-relative. Pure: nothing is
opened, imported or run; the caller passes the file's text and the repository's file list.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import hashlib
import json
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from workers.core.records import Record

_CPP_EXTENSION = "torch.utils.cpp_extension"
_KINDS = {f"{_CPP_EXTENSION}.CUDAExtension": "setup", f"{_CPP_EXTENSION}.CppExtension": "setup",
          f"{_CPP_EXTENSION}.load": "load", f"{_CPP_EXTENSION}.load_inline": "load_inline"}
_SETUP_FUNCTIONS = ("setuptools.setup", "distutils.core.setup")

# Positional parameters in the order torch declares them; CUDAExtension/CppExtension pass theirs
# on to setuptools' Extension, whose order this is.
_PARAMS = {
    "setup": ("name", "sources", "include_dirs", "define_macros", "undef_macros", "library_dirs",
              "libraries", "runtime_library_dirs", "extra_objects", "extra_compile_args",
              "extra_link_args", "export_symbols", "swig_opts", "depends", "language", "optional"),
    "load": ("name", "sources", "extra_cflags", "extra_cuda_cflags", "extra_ldflags",
             "extra_include_paths", "build_directory", "verbose", "with_cuda", "is_python_module",
             "is_standalone", "keep_intermediates"),
    "load_inline": ("name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags",
                    "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags", "extra_include_paths",
                    "build_directory", "verbose", "with_cuda", "is_python_module",
                    "with_pytorch_error_handling", "keep_intermediates", "use_pch"),
}
# Keywords CUDAExtension takes beyond setuptools' positional ones.
_SETUP_KEYWORDS = ("py_limited_api", "dlink", "dlink_libraries")
# Arguments that do not change what is compiled: never evaluated, so they may be anything.
_IGNORED = frozenset({"build_directory", "verbose", "keep_intermediates", "use_pch", "cmdclass", "depends",
                      "language", "optional", "py_limited_api", "export_symbols", "swig_opts",
                      "extra_sycl_cflags"})
# Arguments that change the build but that flopwatch's build does not reproduce: noted when given.
_DROPPED = {"runtime_library_dirs": "a run-time search path", "extra_objects": "prebuilt objects",
            "dlink": "device linking", "dlink_libraries": "device linking"}

_HINTS = {"sources": "describe the extension in the variant's [[extensions]] table instead (name, sources, "
                     "extra_cuda_cflags ...: docs/variants.md)",
          "name": "write the extension's name as a string literal",
          "arguments": "pass the arguments by name in the call"}

_OS_PATH = ("join", "dirname", "abspath", "realpath", "normpath", "basename")
_PATH_FUNCTIONS = {f"{module}.{name}": name for module in ("os.path", "posixpath") for name in _OS_PATH}
_PATH_CLASSES = ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "pathlib.PurePosixPath")
_GLOBS = ("glob.glob", "glob.iglob")
_ENVIRONMENT = ("os.getenv", "os.environ.get", "os.getenvb")
_CONSTANTS = {"os.sep": "/", "os.path.sep": "/", "os.curdir": ".", "os.pardir": ".."}
# What a `from X import *` brings in, for the modules whose names matter here.
_STAR_NAMES = {_CPP_EXTENSION: ("CUDAExtension", "CppExtension", "load", "load_inline"),
               "os.path": _OS_PATH, "glob": ("glob", "iglob"), "pathlib": ("Path", "PurePath")}
_MUTATORS = frozenset({"append", "extend", "insert", "remove", "pop", "sort", "reverse", "clear",
                       "update", "setdefault", "add", "discard", "popitem"})
_PLACES = {"loop": "in a loop", "if": "under an if", "except": "in an except clause",
           "try-else": "in the else of a try", "match": "under a match case"}
_MAX_DEPTH = 200  # nested evaluations (each `x += ...` before the call is one more)


class ExtensionReadError(ValueError):
    """An extension call flopwatch cannot read; `str()` is `path:line: key: message`."""

    def __init__(self, path: str, line: int, key: str, message: str):
        super().__init__(f"{path}:{line}: {key}: {message}")
        self.path, self.line, self.key, self.message = path, line, key, message

    def __reduce__(self):
        # The default pickling passes str(self) back as the only argument (Ray ships errors).
        return (type(self), (self.path, self.line, self.key, self.message))


_TUPLE_FIELDS = ("sources", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags",
                 "extra_ldflags", "include_dirs", "notes")


@dataclass(frozen=True)
class ExtensionSpec(Record):
    """One torch extension as its repository builds it.

    name: the module name torch compiles in (TORCH_EXTENSION_NAME); module: the name users import
    (setup.py's dotted name, load()'s name); kind: `setup` | `load` | `load_inline`; origin:
    `path:line` of the call. sources and include_dirs are repository-relative (the root folder is
    "."); cpp_sources / cuda_sources are load_inline's texts. The flags hold define_macros (`-D`),
    libraries (`-l`) and in-repository library_dirs (`-L`, repository-relative). with_cuda: the
    value given, True for a CUDAExtension. package_dir: for setup.py, the repository-relative
    folder the dotted module's top package lives under. notes: what was dropped or assumed.
    """

    name: str
    module: str
    kind: str
    origin: str
    sources: tuple[str, ...] = ()
    cpp_sources: tuple[str, ...] = ()
    cuda_sources: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    with_cuda: bool | None = None
    is_python_module: bool = True
    package_dir: str = ""
    notes: tuple[str, ...] = ()

    @property
    def cuda(self) -> bool:
        """Built with nvcc and linked against CUDA, as torch decides: `with_cuda` where the call
        gives it, else whether it has CUDA sources."""
        if self.with_cuda is not None:
            return self.with_cuda
        return bool(self.cuda_sources) or any(s.endswith((".cu", ".cuh")) for s in self.sources)

    @property
    def line(self) -> int:
        return int(self.origin.rsplit(":", 1)[1])

    @classmethod
    def from_dict(cls, data: dict) -> ExtensionSpec:
        data = {k: (tuple(v) if k in _TUPLE_FIELDS else v) for k, v in data.items()}
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def digest(spec: ExtensionSpec) -> str:
    """sha256 of the spec's JSON: equal digests build the same extension from the same files."""
    return hashlib.sha256(json.dumps(spec.to_dict(), sort_keys=True).encode()).hexdigest()


def find_extensions(path: str, text: str, repo_files: frozenset[str] | set[str], *,
                    name: str | None = None, tree: ast.Module | None = None) -> list[ExtensionSpec]:
    """Every CUDAExtension / CppExtension / load / load_inline call of the file, in source order.

    `path` is the file's repository-relative path, `repo_files` every repository-relative file
    (posix). With `name`, only the extension of that name (or dotted module) is read: the other
    calls' arguments may then be unreadable, as long as their names are not. `tree`: the text's
    syntax tree where the caller has parsed it already.
    """
    try:
        tree = tree if tree is not None else ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise ExtensionReadError(path, exc.lineno or 1, "syntax",
                                 f"{exc.msg}; flopwatch reads the build calls from the file's source") from None
    reader = _Reader(path, text, tree, frozenset(repo_files))
    specs = []
    for site in reader.sites:
        spec = reader.spec(site, name)
        if spec is not None:
            specs.append(spec)
    return specs


def select(specs: Iterable[ExtensionSpec], name: str | None, path: str) -> ExtensionSpec:
    """The spec named `name` (its name or dotted module), or the only one when `name` is None."""
    specs = list(specs)
    if not specs:
        raise ExtensionReadError(path, 1, "name", f"no CUDAExtension, CppExtension, load() or load_inline() "
                                                  f"call in {path}")
    found = ", ".join(f"{s.module} (line {s.line})" for s in specs)
    if name is None:
        if len(specs) == 1:
            return specs[0]
        raise ExtensionReadError(path, specs[0].line, "name",
                                 f"{len(specs)} torch extensions here: {found}; name the one to build "
                                 f"in [[extensions]] name of the variant")
    matches = [s for s in specs if name in (s.name, s.module)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ExtensionReadError(path, specs[0].line, "name", f"no torch extension named {name!r}; found {found}")
    raise ExtensionReadError(path, matches[0].line, "name",
                             f"{name!r} names {len(matches)} extensions: "
                             + ", ".join(f"{s.module} (line {s.line})" for s in matches))


# --- values -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _PathValue:
    """A `pathlib.Path`: posix text relative to the calling file's folder (or absolute)."""

    text: str

    def __str__(self) -> str:
        return self.text


class _Unreadable(Exception):
    """A value that only running the file would give; `reason` says why, in words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.through: list[str] = []

    def via(self, name: str, line: int) -> _Unreadable:
        self.through.insert(0, f"{name} at line {line}")
        return self

    @property
    def message(self) -> str:
        if not self.through:
            return self.reason
        more = len(self.through) - 3
        return self.reason + f" (through {', '.join(self.through[:3])}{f' and {more} more' if more > 0 else ''})"


def _path(text: str) -> _PathValue:
    return _PathValue(posixpath.normpath(text) if text else ".")


def _dirname(text: str) -> str:
    """The folder of a path relative to the calling file's folder. Above "." lies "..":
    `__file__` is absolute when the file runs, so its parents go up."""
    if text.startswith("/"):
        return posixpath.dirname(text)
    norm = posixpath.normpath(text or ".")
    if norm == "." or all(part == ".." for part in norm.split("/")):
        return posixpath.normpath(norm + "/..")
    return posixpath.dirname(norm) or "."


def _inside(path: str) -> str | None:
    """`path` normalised, "" for the root, or None when it leads out of the repository."""
    norm = posixpath.normpath(path or ".")
    if norm == ".":
        return ""
    if norm == ".." or norm.startswith(("../", "/")):
        return None
    return norm


def _relative(path: str, folder: str) -> str:
    """`path` (repository-relative) as seen from `folder` (repository-relative)."""
    if not folder:
        return path
    a, b = path.split("/"), folder.split("/")
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return "/".join([".."] * (len(b) - n) + a[n:]) or "."


def _glob_match(pattern: list[str], parts: list[str], recursive: bool) -> bool:
    if not pattern:
        return not parts
    head = pattern[0]
    if head == "**" and recursive:  # zero or more folders, none of them hidden
        for i in range(len(parts) + 1):
            if _glob_match(pattern[1:], parts[i:], recursive):
                return True
            if i < len(parts) and parts[i].startswith("."):
                return False
        return False
    if not parts:
        return False
    # glob leaves hidden names out unless the pattern spells the dot
    if parts[0].startswith(".") and not head.startswith("."):
        return False
    return fnmatch.fnmatchcase(parts[0], head) and _glob_match(pattern[1:], parts[1:], recursive)


def _one_line(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(value: object) -> str:
    if isinstance(value, _PathValue):
        return f"the path {value.text!r}"
    return f"{type(value).__name__} {_one_line(repr(value), 40)}"


# --- where names are bound ----------------------------------------------------------------------


@dataclass
class _Scope:
    node: ast.AST
    name: str
    parent: _Scope | None
    bindings: dict[str, list[_Binding]] = field(default_factory=dict)

    def chain(self) -> list[_Scope]:
        """The scopes a name is looked up in, innermost first (a class body is not seen from
        the functions inside it)."""
        out, scope = [self], self.parent
        while scope is not None:
            if not isinstance(scope.node, ast.ClassDef):
                out.append(scope)
            scope = scope.parent
        return out


@dataclass(frozen=True)
class _Binding:
    line: int
    blocks: tuple  # the conditional blocks (if, loop, except...) the assignment sits in
    scope: _Scope
    value: ast.expr | None = None
    why: str = ""  # value None: why the bound value cannot be read


@dataclass(frozen=True)
class _Where:
    """Where an expression is evaluated: scope, enclosing blocks, statement line, and the names
    an enclosing comprehension or lambda binds."""

    scope: _Scope
    blocks: tuple
    line: int
    shadowed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _Site:
    call: ast.Call
    qualname: str
    where: _Where


@dataclass(frozen=True)
class _Arg:
    node: ast.expr
    value: object = None
    evaluated: bool = False


def _is_main_guard(test: ast.expr) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def _target_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


_STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")


class _Reader:
    """One file: its imports, the names each scope binds, the extension calls, and the evaluator."""

    def __init__(self, path: str, text: str, tree: ast.Module, repo_files: frozenset[str]):
        self.path, self.text, self.repo_files = path, text, repo_files
        self.folder = posixpath.dirname(path)
        self.dirs = {posixpath.dirname(f) for f in repo_files}
        for d in list(self.dirs):
            while d:
                d = posixpath.dirname(d)
                self.dirs.add(d)
        self.imports: dict[str, str] = {}
        self.star: set[str] = set()
        self._collect_imports(tree)
        self.sites: list[_Site] = []
        self.leaving: set[tuple] = set()  # conditional blocks that end in return or raise
        self.setup_sites: list[_Site] = []
        self._block(tree.body, _Scope(tree, "<module>", None), ())
        self.sites.sort(key=lambda s: (s.call.lineno, s.call.col_offset))
        self._depth = 0
        self._package_dirs: dict | None = None
        self._package_notes: list[str] = []

    # -- collection --------------------------------------------------------------------------

    def _collect_imports(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.imports[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name == "*":
                        self.star.add(node.module)
                    else:
                        self.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def _bind(self, scope: _Scope, name: str, line: int, blocks: tuple, value: ast.expr | None = None,
              why: str = "") -> None:
        scope.bindings.setdefault(name, []).append(_Binding(line, blocks, scope, value, why))

    def _block(self, stmts: list[ast.stmt], scope: _Scope, blocks: tuple) -> None:
        for stmt in stmts:
            self._statement(stmt, scope, blocks)

    def _branch(self, stmts: list[ast.stmt], scope: _Scope, blocks: tuple, block: tuple) -> None:
        """A conditional block; one that ends in return or raise is remembered, since what it
        binds never reaches the code after it."""
        if stmts and isinstance(stmts[-1], (ast.Return, ast.Raise)):
            self.leaving.add(block)
        self._block(stmts, scope, blocks + (block,))

    def _statement(self, stmt: ast.stmt, scope: _Scope, blocks: tuple) -> None:
        self._find_calls(stmt, scope, blocks)
        line = stmt.lineno
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = "class" if isinstance(stmt, ast.ClassDef) else "function"
            self._bind(scope, stmt.name, line, blocks, why=f"{stmt.name} is a {kind} (line {line})")
            inner = _Scope(stmt, stmt.name, scope)
            if not isinstance(stmt, ast.ClassDef):
                a = stmt.args
                for arg in [*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg]:
                    if arg is not None:
                        self._bind(inner, arg.arg, line, (), why=f"{arg.arg} is a parameter of {stmt.name}()")
            self._block(stmt.body, inner, ())
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self._assign(target, stmt.value, line, scope, blocks)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self._assign(stmt.target, stmt.value, line, scope, blocks)
        elif isinstance(stmt, ast.AugAssign):
            self._augment(stmt, scope, blocks)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self._mutation(stmt.value, line, scope, blocks)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            if not isinstance(stmt, ast.While):
                for name in _target_names(stmt.target):
                    self._bind(scope, name, line, blocks, why=f"{name} is the loop variable of line {line}")
            self._block(stmt.body, scope, blocks + (("loop", id(stmt)),))
            self._block(stmt.orelse, scope, blocks + (("loop", id(stmt)),))
        elif isinstance(stmt, ast.If):
            if _is_main_guard(stmt.test):  # runs whenever the file is run, which is how it is used
                self._block(stmt.body, scope, blocks)
            else:
                self._branch(stmt.body, scope, blocks, ("if", id(stmt), "body"))
            self._branch(stmt.orelse, scope, blocks, ("if", id(stmt), "else"))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                for name in _target_names(item.optional_vars) if item.optional_vars else ():
                    self._bind(scope, name, line, blocks, why=f"{name} is bound by the with of line {line}")
            self._block(stmt.body, scope, blocks)
        elif isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self._block(stmt.body, scope, blocks)
            for handler in stmt.handlers:
                if handler.name:
                    self._bind(scope, handler.name, handler.lineno, blocks, why=f"{handler.name} is an exception")
                self._branch(handler.body, scope, blocks, ("except", id(handler)))
            self._block(stmt.orelse, scope, blocks + (("try-else", id(stmt)),))
            self._block(stmt.finalbody, scope, blocks)
        elif isinstance(stmt, ast.Match):
            for i, case in enumerate(stmt.cases):
                self._branch(case.body, scope, blocks, ("match", id(stmt), i))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            origin = ""
            if isinstance(stmt, ast.ImportFrom):
                origin = f" from {'.' * stmt.level}{stmt.module or ''}"
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                if local != "*":
                    self._bind(scope, local, line, blocks, why=f"{local} is imported{origin} (line {line})")
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                for name in _target_names(target):
                    self._bind(scope, name, line, blocks, why=f"{name} is deleted at line {line}")

    def _assign(self, target: ast.expr, value: ast.expr, line: int, scope: _Scope, blocks: tuple) -> None:
        if isinstance(target, ast.Name):
            self._bind(scope, target.id, line, blocks, value)
        elif (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
              and len(target.elts) == len(value.elts)
              and not any(isinstance(e, ast.Starred) for e in [*target.elts, *value.elts])):
            for t, v in zip(target.elts, value.elts):
                self._assign(t, v, line, scope, blocks)
        elif isinstance(target, (ast.Tuple, ast.List, ast.Starred)):
            for name in _target_names(target):
                self._bind(scope, name, line, blocks, why=f"{name} is unpacked from {self._text(value)} "
                                                          f"(line {line})")
        elif (name := _root_name(target)) is not None:
            self._bind(scope, name, line, blocks, why=f"{name} is changed by {self._text(target)} = ... "
                                                      f"(line {line})")

    def _augment(self, stmt: ast.AugAssign, scope: _Scope, blocks: tuple) -> None:
        target = stmt.target
        if isinstance(target, ast.Name):
            # x += y reads as x = x + y, evaluated where it stands (its x is the earlier binding)
            load = ast.copy_location(ast.Name(target.id, ast.Load()), target)
            value = ast.copy_location(ast.BinOp(load, stmt.op, stmt.value), stmt)
            self._bind(scope, target.id, stmt.lineno, blocks, value)
        elif (name := _root_name(target)) is not None:
            self._bind(scope, name, stmt.lineno, blocks,
                       why=f"{name} is changed by {self._text(stmt)} (line {stmt.lineno})")

    def _mutation(self, call: ast.Call, line: int, scope: _Scope, blocks: tuple) -> None:
        """`x.append(v)` / `x.extend(vs)` read as `x = x + [...]`; other changes make x unreadable."""
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in _MUTATORS:
            return
        name = _root_name(func.value)
        if name is None or name in self.imports:
            return
        if (isinstance(func.value, ast.Name) and func.attr in ("append", "extend") and len(call.args) == 1
                and not call.keywords and not isinstance(call.args[0], ast.Starred)):
            item = call.args[0]
            added = ast.List([item if func.attr == "append" else ast.Starred(item, ast.Load())], ast.Load())
            load = ast.Name(name, ast.Load())
            value = ast.BinOp(load, ast.Add(), added)
            for node in (added, load, value, *added.elts):
                ast.copy_location(node, call)
            self._bind(scope, name, line, blocks, value)
        else:
            self._bind(scope, name, line, blocks, why=f"{name} is changed by {self._text(call)} (line {line})")

    def _find_calls(self, stmt: ast.stmt, scope: _Scope, blocks: tuple) -> None:
        """Record the extension and setup() calls in the statement's own expressions (nested
        statements are visited with their own blocks)."""
        for name, value in ast.iter_fields(stmt):
            if name in _STATEMENT_LISTS:
                continue
            for node in value if isinstance(value, list) else [value]:
                if isinstance(node, ast.AST):
                    self._walk_expression(node, _Where(scope, blocks, stmt.lineno))

    def _walk_expression(self, node: ast.AST, where: _Where) -> None:
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            names = [n for gen in node.generators for n in _target_names(gen.target)]
            where = dataclasses.replace(where, shadowed=where.shadowed + tuple(
                (n, f"{n} is a comprehension variable (line {node.lineno})") for n in names))
        elif isinstance(node, ast.Lambda):
            names = [a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)]
            where = dataclasses.replace(where, shadowed=where.shadowed + tuple(
                (n, f"{n} is a lambda parameter (line {node.lineno})") for n in names))
        elif isinstance(node, ast.Call):
            qualname = self._qualname(node.func)
            if qualname in _KINDS:
                self.sites.append(_Site(node, qualname, where))
            elif qualname in _SETUP_FUNCTIONS:
                self.setup_sites.append(_Site(node, qualname, where))
        for child in ast.iter_child_nodes(node):
            self._walk_expression(child, where)

    def _qualname(self, node: ast.AST) -> str | None:
        """`ce.load` → `torch.utils.cpp_extension.load` through the file's imports; None when
        the expression is not a dotted name rooted in an import."""
        if isinstance(node, ast.Name):
            if node.id in self.imports:
                return self.imports[node.id]
            for module in self.star:
                if node.id in _STAR_NAMES.get(module, ()):
                    return f"{module}.{node.id}"
            return None
        if isinstance(node, ast.Attribute):
            base = self._qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def _text(self, node: ast.AST) -> str:
        return _one_line(ast.get_source_segment(self.text, node) or ast.unparse(node))

    # -- evaluation --------------------------------------------------------------------------

    def value(self, node: ast.expr, where: _Where) -> object:
        self._depth += 1
        try:
            if self._depth > _MAX_DEPTH:
                raise _Unreadable(f"{self._text(node)} nests too deeply")
            method = getattr(self, "_eval_" + type(node).__name__, None)
            if method is None:
                raise _Unreadable(f"{self._text(node)} is not a value flopwatch reads "
                                  f"({type(node).__name__.lower()})")
            return method(node, where)
        finally:
            self._depth -= 1

    def _eval_Constant(self, node: ast.Constant, where: _Where) -> object:
        return node.value

    def _eval_JoinedStr(self, node: ast.JoinedStr, where: _Where) -> str:
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
                continue
            value = self.value(part.value, where)
            if isinstance(value, _PathValue):
                value = value.text
            if not isinstance(value, (str, int, float, bool)) and value is not None:
                raise _Unreadable(f"{self._text(part.value)} in {self._text(node)} is {_describe(value)}")
            if part.conversion != -1:
                value = {ord("r"): repr, ord("s"): str, ord("a"): ascii}[part.conversion](value)
            spec = self.value(part.format_spec, where) if part.format_spec else ""
            try:
                out.append(format(value, spec))
            except (TypeError, ValueError) as exc:
                raise _Unreadable(f"{self._text(node)} fails: {exc}") from None
        return "".join(out)

    def _eval_List(self, node: ast.List, where: _Where) -> list:
        out: list = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                items = self.value(elt.value, where)
                if not isinstance(items, (list, tuple)):
                    raise _Unreadable(f"{self._text(elt)} unpacks {_describe(items)}")
                out.extend(items)
            else:
                out.append(self.value(elt, where))
        return out

    def _eval_Tuple(self, node: ast.Tuple, where: _Where) -> tuple:
        return tuple(self._eval_List(node, where))  # type: ignore[arg-type]

    def _eval_Dict(self, node: ast.Dict, where: _Where) -> dict:
        out = {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                merged = self.value(value, where)
                if not isinstance(merged, dict):
                    raise _Unreadable(f"**{self._text(value)} unpacks {_describe(merged)}")
                out.update(merged)
            else:
                k = self.value(key, where)
                if not isinstance(k, (str, int, float, bool, tuple)) and k is not None:
                    raise _Unreadable(f"the key {self._text(key)} is {_describe(k)}")
                out[k] = self.value(value, where)
        return out

    def _eval_BinOp(self, node: ast.BinOp, where: _Where) -> object:
        left, right = self.value(node.left, where), self.value(node.right, where)
        if isinstance(node.op, ast.Add):
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            if isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(left, tuple) and isinstance(right, tuple):
                return left + right
        if (isinstance(node.op, ast.Div) and _PathValue in (type(left), type(right))
                and isinstance(left, (str, _PathValue)) and isinstance(right, (str, _PathValue))):
            return _path(posixpath.join(str(left), str(right)))
        raise _Unreadable(f"{self._text(node)} combines {_describe(left)} and {_describe(right)}")

    def _eval_Name(self, node: ast.Name, where: _Where) -> object:
        name = node.id
        for shadowed, why in reversed(where.shadowed):
            if shadowed == name:
                raise _Unreadable(why)
        if name == "__file__":
            return posixpath.basename(self.path)
        binding = self._binding(name, where)
        if binding.value is None:
            raise _Unreadable(binding.why)
        try:
            return self.value(binding.value, _Where(binding.scope, binding.blocks, binding.line))
        except _Unreadable as exc:
            raise exc.via(name, binding.line) from None

    def _binding(self, name: str, where: _Where) -> _Binding:
        """The assignment a name refers to at `where`: in the same scope the last one before
        the statement; in an enclosing scope the last one of all (a function runs after its
        module has been read)."""
        for depth, scope in enumerate(where.scope.chain()):
            found = scope.bindings.get(name)
            if not found:
                continue
            candidates = [b for b in found if b.line < where.line] if depth == 0 else found
            blocks = where.blocks if depth == 0 else ()
            for binding in reversed(candidates):
                apart = next((b for i, b in enumerate(binding.blocks) if i >= len(blocks) or blocks[i] != b), None)
                if apart is None:
                    return binding
                if apart not in self.leaving:
                    raise _Unreadable(f"{name} is set {_PLACES[apart[0]]} (line {binding.line})")
                # set in a block that ends in return or raise: it never reaches here
            raise _Unreadable(f"{name} is not assigned before line {where.line}")
        raise _Unreadable(f"{name} is not assigned in {self.path}")

    def _eval_Attribute(self, node: ast.Attribute, where: _Where) -> object:
        qualname = self._qualname(node)
        if qualname in _CONSTANTS:
            return _CONSTANTS[qualname]
        if qualname is not None:
            if qualname.startswith("os.environ"):
                raise _Unreadable(f"read from the environment ({self._text(node)})")
            raise _Unreadable(f"{self._text(node)} is known only when {self.path} runs")
        base = self.value(node.value, where)
        if isinstance(base, _PathValue) and node.attr == "parent":
            return _PathValue(_dirname(base.text))
        if isinstance(base, _PathValue) and node.attr == "name":
            return posixpath.basename(base.text)
        raise _Unreadable(f"{self._text(node)} is an attribute flopwatch does not read")

    def _eval_Subscript(self, node: ast.Subscript, where: _Where) -> object:
        if self._qualname(node.value) == "os.environ":
            raise _Unreadable(f"read from the environment ({self._text(node)})")
        container = self.value(node.value, where)
        index = self.value(node.slice, where)
        if isinstance(container, (dict, list, tuple, str)) and isinstance(index, (str, int)):
            try:
                return container[index]  # type: ignore[index]
            except (KeyError, IndexError, TypeError) as exc:
                raise _Unreadable(f"{self._text(node)} fails ({type(exc).__name__} {exc})") from None
        raise _Unreadable(f"{self._text(node)} indexes {_describe(container)}")

    def _eval_ListComp(self, node: ast.expr, where: _Where) -> object:
        raise _Unreadable(f"built by a comprehension ({self._text(node)})")

    _eval_SetComp = _eval_DictComp = _eval_GeneratorExp = _eval_ListComp

    def _eval_IfExp(self, node: ast.IfExp, where: _Where) -> object:
        raise _Unreadable(f"chosen when the file runs ({self._text(node)})")

    def _eval_Call(self, node: ast.Call, where: _Where) -> object:
        func = node.func
        qualname = self._qualname(func)
        if qualname in _ENVIRONMENT:
            raise _Unreadable(f"read from the environment ({self._text(node)})")
        if qualname in _PATH_FUNCTIONS:
            return self._os_path(_PATH_FUNCTIONS[qualname], node, where)
        if qualname in _PATH_CLASSES:
            parts = self._arguments_of(node, where)
            return _path(posixpath.join(*[self._path_text(p, node) for p in parts]) if parts else ".")
        if qualname in _GLOBS:
            return self._glob_call(node, where)
        if (isinstance(func, ast.Name) and qualname is None and func.id in ("sorted", "list", "tuple", "str", "dict")
                and not any(func.id in s.bindings for s in where.scope.chain())):  # not redefined here
            return self._builtin(func.id, node, where)
        if isinstance(func, ast.Attribute) and qualname is None:
            return self._method(func, node, where)
        raise _Unreadable(f"computed by {self._text(func)}(...)")

    def _arguments_of(self, node: ast.Call, where: _Where, keywords: tuple[str, ...] = ()) -> list:
        if node.keywords and any(k.arg not in keywords for k in node.keywords):
            raise _Unreadable(f"computed by {self._text(node.func)}(...) with arguments flopwatch does not read")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise _Unreadable(f"computed by {self._text(node.func)}(*...)")
        return [self.value(a, where) for a in node.args]

    def _path_text(self, value: object, node: ast.AST) -> str:
        if isinstance(value, _PathValue):
            return value.text
        if isinstance(value, str):
            return value
        raise _Unreadable(f"{self._text(node)} is given {_describe(value)} where a path is expected")

    def _os_path(self, function: str, node: ast.Call, where: _Where) -> str:
        parts = [self._path_text(p, node) for p in self._arguments_of(node, where)]
        if function == "join" and parts:
            return posixpath.join(*parts)
        if len(parts) != 1:
            raise _Unreadable(f"{self._text(node)} takes one path")
        path = parts[0]
        if function == "dirname":
            return _dirname(path)
        if function == "basename":
            return posixpath.basename(path)
        # abspath, realpath, normpath: a path relative to the calling file's folder stays so
        return posixpath.normpath(path) if path else "."

    def _glob_call(self, node: ast.Call, where: _Where) -> list[str]:
        args = self._arguments_of(node, where, keywords=("recursive",))
        recursive = False
        for keyword in node.keywords:
            recursive = self.value(keyword.value, where)
            if not isinstance(recursive, bool):
                raise _Unreadable(f"recursive= of {self._text(node)} is {_describe(recursive)}")
        if len(args) != 1:
            raise _Unreadable(f"{self._text(node)} takes one pattern")
        return self._glob(self._path_text(args[0], node), recursive, node)

    def _glob(self, pattern: str, recursive: bool, node: ast.AST) -> list[str]:
        """Files and folders of the repository matching `pattern`, sorted, as seen from the
        calling file's folder; the pattern is tried from the repository root when it matches
        nothing from there."""
        if pattern.startswith("/"):
            raise _Unreadable(f"{self._text(node)} globs the absolute pattern {pattern}, outside the repository")
        bases = [self.folder] + ([""] if self.folder else [])
        for base in bases:
            full = _inside(posixpath.join(base, pattern))
            if not full:
                continue
            parts = full.split("/")
            found = sorted(p for p in self.repo_files | self.dirs
                           if p and _glob_match(parts, p.split("/"), recursive))
            if found:
                return [_relative(p, self.folder) for p in found]
        return []

    def _builtin(self, name: str, node: ast.Call, where: _Where) -> object:
        if name == "dict" and not node.args and all(k.arg for k in node.keywords):
            return {k.arg: self.value(k.value, where) for k in node.keywords}
        args = self._arguments_of(node, where)
        if len(args) != 1:
            raise _Unreadable(f"{self._text(node)} takes one argument here")
        value = args[0]
        if name == "str":
            if isinstance(value, (str, int, float, _PathValue)):
                return str(value)
        elif isinstance(value, (list, tuple)):
            if name == "sorted":
                if all(isinstance(v, (str, _PathValue)) for v in value):
                    return sorted(value, key=str)
            else:
                return list(value) if name == "list" else tuple(value)
        raise _Unreadable(f"{self._text(node)} is given {_describe(value)}")

    def _method(self, func: ast.Attribute, node: ast.Call, where: _Where) -> object:
        known = {"join"} | {"glob", "rglob", "joinpath", "resolve", "absolute", "as_posix"}
        if func.attr not in known:
            raise _Unreadable(f"computed by {self._text(func)}(...)")
        receiver = self.value(func.value, where)
        args = self._arguments_of(node, where)
        if isinstance(receiver, str) and func.attr == "join" and len(args) == 1:
            items = args[0]
            if isinstance(items, (list, tuple)) and all(isinstance(s, str) for s in items):
                return receiver.join(items)
            raise _Unreadable(f"{self._text(node)} joins {_describe(items)}")
        if isinstance(receiver, _PathValue):
            if func.attr in ("resolve", "absolute") and not args:
                return receiver
            if func.attr == "as_posix" and not args:
                return receiver.text
            if func.attr == "joinpath":
                return _path(posixpath.join(receiver.text, *[self._path_text(a, node) for a in args]))
            if func.attr in ("glob", "rglob") and len(args) == 1:
                pattern = self._path_text(args[0], node)
                if func.attr == "rglob":
                    pattern = "**/" + pattern
                found = self._glob(posixpath.join(receiver.text, pattern), True, node)
                return [_path(p) for p in found]
        raise _Unreadable(f"computed by {self._text(func)}(...) on {_describe(receiver)}")

    # -- extension calls ---------------------------------------------------------------------

    def spec(self, site: _Site, only: str | None) -> ExtensionSpec | None:
        kind = _KINDS[site.qualname]
        args = self._call_arguments(site, kind)
        if kind == "setup":
            return self._setup_spec(site, args, only)
        return self._load_spec(site, args, kind, only)

    def _fail(self, node: ast.AST, key: str, message: str) -> ExtensionReadError:
        return ExtensionReadError(self.path, getattr(node, "lineno", 1), key, message)

    def _call_arguments(self, site: _Site, kind: str) -> dict[str, _Arg]:
        """The call's arguments by parameter name, positional ones mapped by torch's order."""
        call, params = site.call, _PARAMS[kind]
        callee = site.qualname.rsplit(".", 1)[1]
        out: dict[str, _Arg] = {}
        positional: list[_Arg] = []
        for arg in call.args:
            if isinstance(arg, ast.Starred):
                values = self._evaluate(_Arg(arg.value), "arguments", site)
                if not isinstance(values, (list, tuple)):
                    raise self._fail(arg, "arguments", f"*{self._text(arg.value)} is {_describe(values)}")
                positional.extend(_Arg(arg.value, v, True) for v in values)
            else:
                positional.append(_Arg(arg))
        if len(positional) > len(params):
            raise self._fail(call, "arguments", f"{callee}() takes at most {len(params)} positional arguments, "
                                                f"{len(positional)} given")
        out.update(zip(params, positional))
        for keyword in call.keywords:
            if keyword.arg is None:
                values = self._evaluate(_Arg(keyword.value), "arguments", site)
                if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
                    raise self._fail(keyword.value, "arguments",
                                     f"**{self._text(keyword.value)} is {_describe(values)}")
                out.update((k, _Arg(keyword.value, v, True)) for k, v in values.items())
            else:
                out[keyword.arg] = _Arg(keyword.value)
        if kind != "setup":
            for key, arg in out.items():
                if key not in params:
                    raise self._fail(arg.node, key, f"not a parameter of {callee}()")
        return out

    def _evaluate(self, arg: _Arg, key: str, site: _Site) -> object:
        if arg.evaluated:
            return arg.value
        try:
            return self.value(arg.node, site.where)
        except _Unreadable as exc:
            hint = _HINTS.get(key, f"describe the extension in the variant's [[extensions]] table instead "
                                   f"(name, sources, {key} ...: docs/variants.md)")
            raise self._fail(arg.node, key, f"{exc.message}, which flopwatch cannot read without running "
                                            f"{self.path}; {hint}") from None

    def _get(self, args: dict[str, _Arg], key: str, site: _Site, default: object = ...) -> object:
        if key not in args:
            if default is ...:
                raise self._fail(site.call, key, f"not given to {site.qualname.rsplit('.', 1)[1]}()")
            return default
        return self._evaluate(args[key], key, site)

    def _node(self, args: dict[str, _Arg], key: str, site: _Site) -> ast.AST:
        return args[key].node if key in args else site.call

    def _string(self, args: dict[str, _Arg], key: str, site: _Site) -> str:
        value = self._get(args, key, site)
        if not isinstance(value, str) or not value:
            raise self._fail(self._node(args, key, site), key, f"expected a non-empty string, got {_describe(value)}")
        return value

    def _strings(self, args: dict[str, _Arg], key: str, site: _Site, single: bool = False) -> list[str]:
        """A list of strings (None: empty); `single`: a lone string counts as a list of one."""
        value = self._get(args, key, site, None)
        if value is None:
            return []
        if single and isinstance(value, (str, _PathValue)):
            value = [value]
        if isinstance(value, (list, tuple)) and all(isinstance(v, (str, _PathValue)) for v in value):
            return [str(v) for v in value]
        raise self._fail(self._node(args, key, site), key, f"expected a list of strings, got {_describe(value)}")

    def _flag(self, args: dict[str, _Arg], key: str, site: _Site, default: bool | None) -> bool | None:
        value = self._get(args, key, site, default)
        if value is not None and not isinstance(value, bool):
            raise self._fail(self._node(args, key, site), key, f"expected True or False, got {_describe(value)}")
        return value

    def _files(self, args: dict[str, _Arg], key: str, site: _Site) -> tuple[str, ...]:
        if key not in args:
            raise self._fail(site.call, key, f"not given to {site.qualname.rsplit('.', 1)[1]}()")
        node = args[key].node
        names = self._strings(args, key, site, single=True)
        if not names:
            raise self._fail(node, key, f"{self._text(node)} names no files")
        return tuple(self._file(name, key, node) for name in names)

    def _file(self, name: str, key: str, node: ast.AST) -> str:
        """A source file, repository-relative: from the calling file's folder, else the root."""
        if name.startswith("/"):
            raise self._fail(node, key, f"{name} is an absolute path; sources must be files of the repository")
        here = _inside(posixpath.join(self.folder, name))
        if here is None:
            raise self._fail(node, key, f"{posixpath.normpath(name)} leads out of the repository "
                                        f"(from {self.folder or 'its root'})")
        if here in self.repo_files:
            return here
        root = _inside(name)
        if root is not None and root in self.repo_files:
            return root
        looked = here if root in (None, here) else f"{here} and {root}"
        raise self._fail(node, key, f"{name} is not a file of the repository (looked for {looked})")

    def _folder(self, name: str, key: str, node: ast.AST, notes: list[str]) -> str | None:
        """An include folder, repository-relative ("." for the root); None (with a note) for one
        outside the repository or missing from it."""
        if name.startswith("/"):
            notes.append(f"{key}: {name} dropped: outside the repository (torch adds its own and CUDA's)")
            return None
        here = _inside(posixpath.join(self.folder, name))
        if here is None:
            raise self._fail(node, key, f"{posixpath.normpath(name)} leads out of the repository "
                                        f"(from {self.folder or 'its root'})")
        for folder in (here, _inside(name)):
            if folder is not None and folder in self.dirs:
                return folder or "."
        notes.append(f"{key}: {name} dropped: no such folder in the repository (a submodule not checked out?)")
        return None

    def _folders(self, args: dict[str, _Arg], key: str, site: _Site, notes: list[str]) -> tuple[str, ...]:
        node = self._node(args, key, site)
        found = (self._folder(name, key, node, notes) for name in self._strings(args, key, site))
        return tuple(f for f in found if f is not None)

    def _name_matches(self, only: str | None, name: str, module: str) -> bool:
        return only is None or only in (name, module)

    def _setup_spec(self, site: _Site, args: dict[str, _Arg], only: str | None) -> ExtensionSpec | None:
        module = self._string(args, "name", site)
        if not all(part.isidentifier() for part in module.split(".")):
            raise self._fail(args["name"].node, "name", f"{module!r} is not a dotted module name")
        name = module.rsplit(".", 1)[-1]
        if not self._name_matches(only, name, module):
            return None
        notes: list[str] = []
        sources = self._files(args, "sources", site)
        include_dirs = self._folders(args, "include_dirs", site, notes)
        macros = self._macros(args, site)
        cflags, cuda_cflags = self._compile_args(args, site, notes)
        ldflags = self._link_args(args, site, notes)
        for key in args:
            if key in _DROPPED:
                notes.append(f"{key} ({_DROPPED[key]}) is not reproduced by flopwatch's build")
            elif key not in _PARAMS["setup"] and key not in _SETUP_KEYWORDS and key not in _IGNORED:
                notes.append(f"{key} ignored: not an argument flopwatch knows")
        return ExtensionSpec(
            name=name, module=module, kind="setup", origin=f"{self.path}:{site.call.lineno}", sources=sources,
            extra_cflags=tuple(macros + cflags), extra_cuda_cflags=tuple(macros + cuda_cflags),
            extra_ldflags=tuple(ldflags), include_dirs=include_dirs,
            with_cuda=True if site.qualname.endswith(".CUDAExtension") else None,
            package_dir=self._package_dir(module, notes), notes=tuple(notes))

    def _macros(self, args: dict[str, _Arg], site: _Site) -> list[str]:
        """define_macros [(NAME, VALUE)] → -DNAME=VALUE (-DNAME for None); undef_macros → -UNAME."""
        flags = []
        defines = self._get(args, "define_macros", site, None) or []
        node = self._node(args, "define_macros", site)
        if not isinstance(defines, (list, tuple)):
            raise self._fail(node, "define_macros", f"expected a list of (NAME, VALUE), got {_describe(defines)}")
        for item in defines:
            if (not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[0], str)
                    or not (item[1] is None or isinstance(item[1], (str, int)))):
                raise self._fail(node, "define_macros", f"expected (NAME, VALUE) pairs, got {_describe(item)}")
            flags.append(f"-D{item[0]}" if item[1] is None else f"-D{item[0]}={item[1]}")
        flags += [f"-U{name}" for name in self._strings(args, "undef_macros", site)]
        return flags

    def _compile_args(self, args: dict[str, _Arg], site: _Site, notes: list[str]) -> tuple[list, list]:
        """extra_compile_args: a list is the C++ compiler's; a dict has "cxx" and "nvcc" lists."""
        value = self._get(args, "extra_compile_args", site, None)
        node = self._node(args, "extra_compile_args", site)
        if value is None:
            return [], []
        if not isinstance(value, dict):
            return self._strings(args, "extra_compile_args", site), []
        lists = []
        for compiler in ("cxx", "nvcc"):
            flags = value.get(compiler) or []
            if not isinstance(flags, (list, tuple)) or not all(isinstance(f, str) for f in flags):
                raise self._fail(node, "extra_compile_args",
                                 f"[{compiler!r}] should be a list of strings, got {_describe(flags)}")
            lists.append(list(flags))
        for other in sorted(set(value) - {"cxx", "nvcc"}, key=str):
            notes.append(f"extra_compile_args[{other!r}] dropped: flopwatch passes the cxx and nvcc flags")
        return lists[0], lists[1]

    def _link_args(self, args: dict[str, _Arg], site: _Site, notes: list[str]) -> list[str]:
        """-L for library folders inside the repository, -l per library, then extra_link_args
        (the order setuptools writes them in)."""
        flags = []
        for folder in self._strings(args, "library_dirs", site):
            inside = None if folder.startswith("/") else _inside(posixpath.join(self.folder, folder))
            if inside is None:
                notes.append(f"library_dirs: {folder} dropped: outside the repository")
            else:
                flags.append(f"-L{inside or '.'}")
        flags += [f"-l{lib}" for lib in self._strings(args, "libraries", site)]
        return flags + self._strings(args, "extra_link_args", site)

    def _package_dir(self, module: str, notes: list[str]) -> str:
        """The folder the module's top package lives under, from setup(package_dir=...)."""
        mapping = self._setup_package_dirs(notes)
        top = module.split(".")[0]
        where = None
        if top in mapping and "." in module:
            folder = posixpath.normpath(mapping[top])
            if posixpath.basename(folder) == top:
                where = posixpath.dirname(folder)
            else:
                notes.append(f"package_dir maps {top} to {mapping[top]}, not a folder named {top}; "
                             f"assumed the package lies under the setup.py's folder")
        elif "" in mapping:
            where = mapping[""]
        if where is None:
            return self.folder
        inside = _inside(posixpath.join(self.folder, where))
        if inside is None:
            notes.append(f"package_dir {where} leads out of the repository; assumed the setup.py's folder")
            return self.folder
        return inside

    def _setup_package_dirs(self, notes: list[str]) -> dict:
        if self._package_dirs is None:
            self._package_dirs = self._read_package_dirs()
        notes.extend(self._package_notes)
        return self._package_dirs

    def _read_package_dirs(self) -> dict:
        """setup(package_dir=...) merged over every setup() call; what cannot be read is a note."""
        mapping: dict = {}
        for site in self.setup_sites:
            keyword = next((k for k in site.call.keywords if k.arg == "package_dir"), None)
            if keyword is None:
                continue
            try:
                value = self.value(keyword.value, site.where)
            except _Unreadable as exc:
                self._package_notes.append(f"package_dir of setup() at line {site.call.lineno} not read "
                                           f"({exc.message}); assumed the setup.py's folder")
                continue
            if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                mapping.update(value)
            else:
                self._package_notes.append(f"package_dir of setup() at line {site.call.lineno} is "
                                           f"{_describe(value)}; assumed the setup.py's folder")
        return mapping

    def _load_spec(self, site: _Site, args: dict[str, _Arg], kind: str, only: str | None) -> ExtensionSpec | None:
        name = self._string(args, "name", site)
        if not name.isidentifier():
            raise self._fail(args["name"].node, "name", f"{name!r} is not a module name")
        if not self._name_matches(only, name, name):
            return None
        notes: list[str] = []
        extra: dict = {}
        if kind == "load":
            extra["sources"] = self._files(args, "sources", site)
            if self._flag(args, "is_standalone", site, False):
                raise self._fail(args["is_standalone"].node, "is_standalone",
                                 "builds an executable, not a module flopwatch can import")
        else:
            extra["cpp_sources"] = tuple(self._strings(args, "cpp_sources", site, single=True))
            if "cpp_sources" not in args:
                raise self._fail(site.call, "cpp_sources", "not given to load_inline()")
            extra["cuda_sources"] = tuple(self._strings(args, "cuda_sources", site, single=True))
            if self._strings(args, "sycl_sources", site, single=True):
                raise self._fail(args["sycl_sources"].node, "sycl_sources", "SYCL sources are not built by flopwatch")
            extra["functions"] = self._functions(args, site)
            if self._flag(args, "with_pytorch_error_handling", site, True) is False:
                notes.append("with_pytorch_error_handling=False not kept: the build uses torch's default (True)")
        return ExtensionSpec(
            name=name, module=name, kind=kind, origin=f"{self.path}:{site.call.lineno}",
            extra_cflags=tuple(self._strings(args, "extra_cflags", site)),
            extra_cuda_cflags=tuple(self._strings(args, "extra_cuda_cflags", site)),
            extra_ldflags=tuple(self._strings(args, "extra_ldflags", site)),
            include_dirs=self._folders(args, "extra_include_paths", site, notes),
            with_cuda=self._flag(args, "with_cuda", site, None),
            is_python_module=bool(self._flag(args, "is_python_module", site, True)),
            notes=tuple(notes), **extra)

    def _functions(self, args: dict[str, _Arg], site: _Site) -> tuple[str, ...]:
        """load_inline's functions: a name, a list of names, or {name: docstring} (docstrings dropped)."""
        value = self._get(args, "functions", site, None)
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        elif isinstance(value, dict):
            value = list(value)
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) and v.isidentifier() for v in value):
            return tuple(value)
        raise self._fail(args["functions"].node, "functions",
                         f"expected a name, a list of names or a dict by name, got {_describe(value)}")
