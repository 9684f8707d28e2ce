"""A Python module's entries, as packages of kernels write them: every public top-level function
(public: no leading `_`, and in `__all__` where the module has one) and every public name bound
to an autograd Function's `apply` (Liger's `liger_fused_linear_orpo =
LigerFusedLinearORPOFunction.apply`: the Function's `forward` less `ctx`), each an `Entry`;
why each other public function is none (`Skipped`); the package's functions that only forward
to another callable (`Forwarder`); the modules `init` drafts every entry of; and what a module
says about where it runs (Triton, GPU-only imports, a compiled module it loads)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import PurePosixPath

from pipeline.onboarding.conventions import ref_names
from pipeline.onboarding.source.py_values import dotted, own_returns
from pipeline.onboarding.source.records import Entry, Forwarded, Forwarder, Skipped
from pipeline.onboarding.source.repo import is_test

GIVES = (Entry, Skipped, Forwarder)
# Modules `init` reads as a package's kernel entry points (`flopwatch new` reads any module named).
ENTRY_MODULES = ("functional", "ops", "interface")
_OUTPUT = re.compile(r"^(out|output|dst|result|res|y|o)$|_out$")
# Code that only runs on an NVIDIA (or AMD) GPU: moved there by hand, or asking CUDA for something.
_GPU_CODE = re.compile(r"""\.cuda\(|device\s*=\s*['"]cuda|torch\.device\(\s*['"]cuda|torch\.cuda\.(?!is_available)""")


def matches(repo, rel: str) -> bool:
    """Any Python module: `new` drafts the entries of whichever module it is named."""
    return rel.endswith(".py")


def read(repo, rel: str) -> list:
    """The module's entries and the public functions that are none, then its forwarders."""
    entries, skipped = public_functions(repo, rel)
    return [*entries, *skipped, *forwarders(repo, rel)]


def _records(repo, rel: str) -> list:
    return repo.records(sys.modules[__name__], rel)


# -- entries -----------------------------------------------------------------------------------------

def public_functions(repo, rel: str) -> tuple[list[Entry], list[Skipped]]:
    """The module's top-level functions that are entries, and those that are not with why. A
    public name bound to an autograd Function's `apply` is an entry too, with the parameters of
    the Function's forward (defined in the module or imported into it)."""
    return repo.reading("public functions", rel, lambda: _public_functions(repo, rel))


def _public_functions(repo, rel: str) -> tuple[list[Entry], list[Skipped]]:
    tree = repo.tree(rel)
    if tree is None:
        return [], []
    exported = _all(tree)
    entries, skipped = [], []
    for node in tree.body:
        alias = _apply_alias(node)
        if alias is None or alias[0].startswith("_") or exported is not None and alias[0] not in exported:
            continue
        fn = _as_function(alias[0], alias[1], tree, repo)
        if fn is None:
            skipped.append(Skipped(alias[0], f"{alias[1]}.apply, whose forward flopwatch cannot find"))
        else:
            entries.append(entry_of(fn, rel))
    for fn in tree.body:
        if isinstance(fn, ast.AsyncFunctionDef):
            skipped.append(Skipped(fn.name, "an async function"))
            continue
        if not isinstance(fn, ast.FunctionDef):
            continue
        if fn.name.startswith("_"):
            if fn.name not in {x.entry for x in skipped}:  # `_` twice (torch.library's fakes): one line
                skipped.append(Skipped(fn.name, "not public"))
            continue
        if exported is not None and fn.name not in exported:
            skipped.append(Skipped(fn.name, "not in the module's __all__"))
            continue
        why = not_an_entry(fn)
        if why:
            skipped.append(Skipped(fn.name, why))
            continue
        entries.append(entry_of(fn, rel))
    return entries, skipped


def entry_of(fn: ast.FunctionDef, rel: str) -> Entry:
    """The function as an entry: its parameters, what it returns or writes, what it forwards to."""
    params = tuple(a.arg for a in (*fn.args.posonlyargs, *fn.args.args))
    returns = bool(own_returns(fn))
    output = "" if returns else next((p for p in reversed(params) if _OUTPUT.search(p)), "")
    return Entry(rel, fn.name, fn.lineno, params, tuple(a.arg for a in fn.args.kwonlyargs),
                 len(params) - len(fn.args.defaults), returns, output, fn.args.kwarg is not None, forwarded(fn),
                 applied(fn))


def applied(fn: ast.FunctionDef) -> tuple[str, ...]:
    """The names whose `.apply` the function's body calls (`LigerCrossEntropyFunction.apply(...)`
    amid other statements too), in the order written."""
    names = [dotted(node.func.value).split(".")[-1] for node in ast.walk(fn)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "apply"
             and dotted(node.func.value)]
    return tuple(dict.fromkeys(names))


def _apply_alias(node: ast.AST) -> tuple[str, str] | None:
    """(name, Function) of `name = Function.apply` at a module's top level."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
            and isinstance(node.value, ast.Attribute) and node.value.attr == "apply" \
            and isinstance(node.value.value, ast.Name):
        return node.targets[0].id, node.value.value.id
    return None


def _as_function(name: str, cls: str, tree: ast.Module, repo) -> ast.FunctionDef | None:
    """`name = Cls.apply` as the function it is: the parameters of `Cls.forward` after ctx,
    returning `Cls.apply(...)` of them (so the tests' calls of either are the entry's)."""
    forward = _forward_of(cls, tree, repo)
    if forward is None:
        return None
    a = forward.args
    positional = [*a.posonlyargs, *a.args]
    skip = 2 if positional[:1] and positional[0].arg in ("cls", "self") else 1  # (cls,) ctx
    kept = positional[skip:]
    defaults = list(a.defaults)[-len(kept):] if kept and a.defaults else []
    call = ast.Call(func=ast.Attribute(value=ast.Name(id=cls, ctx=ast.Load()), attr="apply", ctx=ast.Load()),
                    args=[ast.Name(id=p.arg, ctx=ast.Load()) for p in kept], keywords=[])
    fn = ast.FunctionDef(name=name, args=ast.arguments(posonlyargs=[], args=kept, vararg=None, kwonlyargs=[],
                                                       kw_defaults=[], kwarg=None, defaults=defaults),
                         body=[ast.Return(value=call)], decorator_list=[], returns=None, type_params=[])
    return ast.fix_missing_locations(ast.copy_location(fn, forward))


def _forward_of(cls: str, tree: ast.Module, repo) -> ast.FunctionDef | None:
    """The `forward` of class `cls`, defined in the module or imported into it (`from a.b import
    Cls`, looked up as a/b.py or a/b/__init__.py under any folder of the repository)."""
    where = [tree]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and any((a.asname or a.name) == cls for a in node.names):
            tail = node.module.replace(".", "/")
            for path in repo.sources:
                if path.endswith((f"{tail}.py", f"{tail}/__init__.py")) and (other := repo.tree(path)) is not None:
                    where.append(other)
    for module in where:
        for node in module.body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                return next((m for m in node.body if isinstance(m, ast.FunctionDef) and m.name == "forward"), None)
    return None


def _all(tree: ast.Module) -> set[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets) \
                and isinstance(node.value, (ast.List, ast.Tuple)):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return None


def not_an_entry(fn: ast.FunctionDef) -> str:
    """Why a public function cannot be measured as an entry ("" when it can)."""
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn)):
        return "a generator, not a function returning tensors"
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]
    if not params:
        return "takes no arguments"
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in params:
            return f"takes an nn.Module or callable argument ({node.func.id}), not tensors"
        if isinstance(node, ast.Attribute) and node.attr in ("parameters", "named_parameters", "forward") \
                and isinstance(node.value, ast.Name) and node.value.id in params:
            return f"takes an nn.Module argument ({node.value.id}), not tensors"
    if not own_returns(fn) and not entry_of(fn, "").output:
        return "returns no tensor and takes no output buffer"
    return ""


# -- forwarders --------------------------------------------------------------------------------------

def forwarded(fn: ast.FunctionDef) -> Forwarded | None:
    """What a function only forwards to (`return LigerDyTFunction.apply(x, alpha, gamma, beta)`),
    its arguments all its own parameters; None where it does more."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
        return None
    call = body[0].value
    callee_name = dotted(call.func)
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    if not callee_name or not all(isinstance(a, ast.Name) and a.id in names for a in call.args) or call.keywords:
        return None
    parts = callee_name.split(".")
    # `F.apply(...)`, `torch.ops.ns.op.default(...)`: the last word names nothing on its own
    callee = tuple(parts[-2:]) if parts[-1] in ("apply", "default", "__call__") and len(parts) > 1 else (parts[-1],)
    return Forwarded(callee, tuple(a.id for a in call.args))


def forwarders(repo, rel: str) -> list[Forwarder]:
    """The module's top-level functions that only forward to another callable."""
    def read_them() -> list[Forwarder]:
        if "return" not in repo.text(rel) or (tree := repo.tree(rel)) is None:
            return []
        out = []
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and (f := forwarded(node)) is not None:
                out.append(Forwarder(rel, node.name, f, tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args))))
        return out
    return repo.reading("forwarders", rel, read_them)


def module_imports(tree: ast.Module) -> dict[str, str]:
    """Name → dotted origin of a module's `from x import y` (and `import x.y as z`)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
    return out


# -- which modules, and where they run ----------------------------------------------------------------

def is_entry_module(repo, rel: str) -> bool:
    """A module `init` drafts every public function of, kept few (tests aside): one named
    functional / ops / interface; in a package (a folder with __init__.py), one holding a
    reference beside its functions (`def foo_ref`); outside any (a top-level `ops.py`, a folder of
    modules without __init__.py), one holding a reference of a function of its own (`def foo` and
    `def foo_ref`), not a script keeping a `ref_kernel` of code found elsewhere. A package's other
    helpers are left to `flopwatch new <module>`."""
    path = repo.path(rel)
    if is_test(rel) or path.name == "__init__.py":
        return False
    if path.stem in ENTRY_MODULES:
        return True
    if (path.parent / "__init__.py").is_file():
        return ref_names.holds_reference(repo.text(rel))
    return ref_names.holds_reference_of_its_own(repo.text(rel))


def uses_triton(text: str) -> bool:
    """Triton imported, or a `@triton.jit` kernel defined."""
    return bool(re.search(r"^\s*(import triton|from triton)", text, re.MULTILINE)) or "@triton.jit" in text


def gpu_code(text: str) -> bool:
    """`.cuda()`, `device="cuda"`, `torch.cuda.*` (not `is_available`): code that runs on a GPU only."""
    return bool(_GPU_CODE.search(text))


def imports_gpu_only(text: str) -> bool:
    """A module importing what runs on NVIDIA GPUs only (cupy, pycuda, cuda-python)."""
    return bool(re.search(r"^\s*(import|from)\s+(cupy|pycuda|cuda\b|cuda\.)", text, re.MULTILINE))


def package_uses_triton(repo, rel: str) -> bool:
    """Whether the package a module belongs to has Triton kernels (Liger's functional module
    calls autograd Functions whose kernels live in the package's ops)."""
    root = repo.import_root(rel)[0]
    if not root:
        return False
    top = PurePosixPath(rel).relative_to(root).parts[0] if root != "." else PurePosixPath(rel).parts[0]
    prefix = f"{root}/{top}/" if root != "." else f"{top}/"
    return any(p.startswith(prefix) and p.endswith(".py") and "@triton.jit" in repo.text(p) for p in repo.sources)


def extension_loaded(repo, rel: str) -> str:
    """The setup.py building the compiled module a package loads (`from . import _C` in its
    __init__: the functions call `torch.ops.<ns>.<op>`, which exist only once it is built), or ""."""
    root = repo.import_root(rel)[0]
    if not root:
        return ""
    package = PurePosixPath(rel).parent
    init = repo.text(f"{package}/__init__.py") if f"{package}/__init__.py" in repo.sources else ""
    if not re.search(r"from\s+\.\s+import\s+[^\n]*\b_C\b|import\s+\w+\._C\b", init):
        return ""
    for candidate in ("setup.py", f"{root}/setup.py" if root != "." else "setup.py"):
        text = repo.text(candidate) if candidate in repo.sources else ""
        if re.search(r"\b(CUDAExtension|CppExtension)\b", text):
            return candidate
    return ""
