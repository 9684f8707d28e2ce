"""The reference an entry is checked against, found where the repository keeps it, in this order
(the first found is taken; each says how it was found):

1. a built-in op (`workers/ops`): the entry's name is one of the op's ENTRY_NAMES (or, where an
   op has none, the op's own name once the repository's prefix is taken off: `liger_rms_norm` →
   rms_norm), and its parameters give the op's inputs. A name that only contains an op's name
   among other words is not that op: `liger_fused_neighborhood_attention` attends to a window,
   not the whole sequence;
2. the repository's own reference by convention: a function named `X_ref`, `ref_X`,
   `reference_X`, `X_reference`, `torch_X`, `pytorch_X` or `naive_X` (X the entry's name, or
   the name without the repository's prefix) in the entry's module, its package or its tests;
   a class `Torch<X>` / `Naive<X>` (an nn.Module) is noted, not taken: `[reference]` calls a
   function with the inputs, and a module would have to be built first;
3. the repository's tests: a test comparing the entry's result (or that of the function the
   entry only forwards to) with another callable's (`pipeline.onboarding.tests_scan`);
4. none: the entry is measured unchecked (its output kept per commit, so a change shows).

Pure functions over the repository's text; nothing is imported or run.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import PurePosixPath

from pipeline.onboarding import drafting, drafting_python, test_slices, tests_scan
from pipeline.onboarding.source.py_values import dotted
from pipeline.onboarding.source.pytest_file import ends_with
from pipeline.onboarding.source.records import Calls, Comparison, Equivalent, Forwarded, Reference, Sliced
from workers.ops import OPS

# Words around an op's name that say how it is built, not what it computes: `rms_norm_fwd`,
# `triton_softmax` are rms_norm and softmax. Anything else (`fused_neighborhood_attention`)
# makes another op.
QUALIFIERS = ("fwd", "forward", "fn", "func", "kernel", "impl", "op", "triton", "cuda", "torch", "in_place",
              "inplace", "fast", "my", "custom", "v2")
CONVENTIONS = ("{x}_ref", "ref_{x}", "reference_{x}", "{x}_reference", "torch_{x}", "pytorch_{x}", "naive_{x}")
CLASS_PREFIXES = ("Torch", "Naive")


def label(ref: Reference) -> str:
    """The draft's first line says which reference it took, in these words."""
    if ref.kind == "builtin":
        return f"built-in op {ref.op}"
    if ref.kind == "convention":
        where = f"{ref.module}:{ref.name}" if ref.module else f"{ref.file}:{ref.name}"
        return f"{where} (by name, {ref.file}:{ref.line})"
    if ref.kind == "test":
        return f"{ref.file}:{ref.line} ({ref.name}, compared by {ref.compared_by})"
    return "none found — measured as unchecked"


# -- names ------------------------------------------------------------------------------------------

def common_prefix(names: list[str]) -> str:
    """The prefix most of a module's public functions share, up to a word boundary (`liger_`),
    or a short one all share (`my` of `mymuladd`, `myadd_out`); "" when none."""
    if len(names) < 2:
        return ""
    counts: dict[str, int] = {}
    for n in names:
        if "_" in n:
            counts[n.split("_")[0] + "_"] = counts.get(n.split("_")[0] + "_", 0) + 1
    best = max(counts.items(), key=lambda kv: kv[1], default=("", 0))
    if best[1] * 2 > len(names) and best[1] >= 2:
        return best[0]
    shared = names[0]
    for n in names[1:]:
        while not n.startswith(shared):
            shared = shared[:-1]
    return shared if 2 <= len(shared) <= 3 and all(len(n) > len(shared) + 2 for n in names) else ""


def stems(name: str, prefix: str) -> list[str]:
    """The names an entry may go by: its own, without the repository's prefix, without
    qualifier words at either end (`liger_rms_norm_fwd` → rms_norm)."""
    out = [name]
    if prefix and name.startswith(prefix) and len(name) > len(prefix):
        out.append(name[len(prefix):])
    for n in list(out):
        words = n.split("_")
        while len(words) > 1 and words[0] in QUALIFIERS:
            words = words[1:]
        while len(words) > 1 and words[-1] in QUALIFIERS:
            words = words[:-1]
        joined = "_".join(words)
        for q in ("in_place", "inplace"):
            if joined.endswith("_" + q):
                joined = joined[:-len(q) - 1]
        out.append(joined)
    return list(dict.fromkeys(o for o in out if o))


def _squash(name: str) -> str:
    return name.replace("_", "").lower()


# -- 1. built-in op -------------------------------------------------------------------------------

def op_by_name(name: str, prefix: str) -> str:
    """The built-in op an entry's name says, or "". Through the ops' ENTRY_NAMES where they have
    them (`workers.ops.op_for_entry_name`), else the op's own name."""
    try:
        from workers.ops import op_for_entry_name
    except ImportError:
        op_for_entry_name = None
    names = stems(name, prefix)
    if op_for_entry_name is not None:
        for n in names:
            found = op_for_entry_name(n)
            if found:
                return found
    for n in names:
        for op, module in OPS.items():
            if getattr(module, "ENTRY_NAMES", None) and op_for_entry_name is not None:
                continue  # the op says by which names it goes
            if _squash(n) == _squash(op):
                return op
    return ""


def builtin(name: str, prefix: str, params: list[str], required: int, returns: bool) -> Reference | None:
    """The built-in op this entry computes, where its name says which and its parameters give the
    op's inputs (by name, else in order: ops follow the functional signatures of the libraries
    they come from, inputs then scalars)."""
    op = op_by_name(name, prefix)
    if not op:
        return None
    found, mapped = drafting_python.op_from_params(name, params, returns, only=(op,))
    if found and all(mapped[:required]):
        return Reference("builtin", op=op, mapped=tuple(mapped))
    module = OPS[op]
    order = [*module.INPUTS, *getattr(module, "SCALARS", ())] + ([] if returns else [module.OUTPUT])
    if op not in drafting.ALIASES and required <= len(order):
        positional = order[:len(params)] + [""] * max(0, len(params) - len(order))
        return Reference("builtin", op=op, mapped=tuple(positional))
    return None


# -- 2. by convention -----------------------------------------------------------------------------

def by_convention(name: str, prefix: str, rel: str, texts: dict[str, str], package: str) -> Reference | None:
    """A reference named after the entry, in its module, then its package, then the tests."""
    # `chunk_gla_fwd` beside `chunk_gla` in one module is that entry's helper (other arguments,
    # other results): a stem naming another function of the module is that function's, not this one's
    siblings = _functions_of(texts.get(rel, "")) - {name}
    names = [x for x in stems(name, prefix) if x not in siblings]
    wanted_fn = {c.format(x=x): x for x in names for c in CONVENTIONS}
    wanted_fn = {k: v for k, v in wanted_fn.items() if k != name}
    wanted_cls = {_squash(p + x) for x in names for p in CLASS_PREFIXES}
    tests = sorted(p for p in texts if tests_scan.is_test_file(p))
    in_package = sorted(p for p in texts if package and p.startswith(package + "/") and p.endswith(".py")
                        and p != rel and p not in tests)
    notes: list[str] = []
    for path in [rel, *in_package, *tests]:
        text = texts.get(path, "")
        if not any(w in text for w in wanted_fn) and not re.search(r"class (Torch|Naive)", text):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in wanted_fn:
                return Reference("convention", file=path, name=node.name, line=node.lineno,
                                 module=_module_of(path, texts), notes=tuple(notes))
            if isinstance(node, ast.ClassDef) and _squash(node.name) in wanted_cls:
                # [reference] calls a function with the inputs; a module must be built first
                notes.append(f"{path}:{node.lineno} class {node.name} is a reference by name, but an nn.Module "
                             + ("([reference] calls functions: wrap it in one)" if _built_bare(node)
                                else "built with constructor arguments"))
    return Reference("none", notes=tuple(notes)) if notes else None


@functools.lru_cache(maxsize=256)
def _functions_of(text: str) -> frozenset[str]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return frozenset()
    return frozenset(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _built_bare(cls: ast.ClassDef) -> bool:
    """An nn.Module class built with no arguments: its __init__ takes none, or only defaults."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return True
    a = init.args
    positional = [*a.posonlyargs, *a.args][1:]
    return len(positional) <= len(a.defaults) and all(d is not None for d in a.kw_defaults)


def _module_of(path: str, texts: dict[str, str]) -> str:
    """The dotted module a package file is imported as; "" for a file taken by its path (a test,
    a script: not importable as part of the package)."""
    if tests_scan.is_test_file(path):
        return ""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    depth = 0
    while depth < len(parts) - 1 and "/".join(parts[:len(parts) - 1 - depth] + ["__init__.py"]) in texts:
        depth += 1
    return ".".join(parts[len(parts) - 1 - depth:]) if depth else ""


# -- 3. from the tests ------------------------------------------------------------------------------

def forwarded(fn: ast.FunctionDef) -> Forwarded | None:
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


def equivalents(fn: ast.FunctionDef, texts: dict[str, str], package: str,
                imports: dict[str, str] | None = None, module: str = "") -> list[Equivalent]:
    """`imports`: name → dotted origin in the entry's module (`LigerDyTFunction` →
    "liger_kernel.ops.LigerDyTFunction"), and `module` the entry's own dotted module, so that a
    test's call of a namesake (Liger's chunked_loss has its own `liger_fused_linear_jsd`) is
    not taken for the entry's."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    kw = [a.arg for a in fn.args.kwonlyargs]
    out = [Equivalent((fn.name,), tuple(params), {p: p for p in params + kw}, f"{module}.{fn.name}" if module else "")]
    forward = forwarded(fn)
    if forward is None:
        return out
    out.append(Equivalent(forward.callee, forward.params, {}, (imports or {}).get(forward.callee[0], "")))
    for path, name, other, other_params in _forwarders(package, texts):
        if other.callee != forward.callee or name == fn.name or len(other.params) != len(forward.params):
            continue
        mapping = dict(zip(other.params, forward.params))  # the sibling's parameter → the entry's
        out.append(Equivalent((name,), tuple(mapping.get(p, "") for p in other_params), mapping))
    return out


def equivalent_for(callee: str, same_as: list[Equivalent]) -> Equivalent:
    """The equivalent a test's call goes through (`LigerDyTFunction.apply`), else the entry itself."""
    return next((e for e in same_as if ends_with(callee, e.callee)), same_as[0])


def _forwarders(package: str, texts: dict[str, str]) -> list[tuple[str, str, Forwarded, list[str]]]:
    """The package's top-level functions that only forward to another callable."""
    out = []
    for path in sorted(p for p in texts if package and p.startswith(package + "/") and p.endswith(".py")):
        out += _forwarders_in(path, texts[path])
    return out


@functools.lru_cache(maxsize=1024)  # read once per file, whatever number of entries asks
def _forwarders_in(path: str, text: str) -> list:
    if "return" not in text:
        return []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            f = forwarded(node)
            if f is not None:
                out.append((path, node.name, f, [a.arg for a in (*node.args.posonlyargs, *node.args.args)]))
    return out


def from_tests(name: str, prefix: str, texts: dict[str, str], same_as: list[Equivalent]) -> list[Comparison]:
    """The tests' comparisons of the entry (or an equivalent call) with another callable, the
    test files named after the entry first."""
    callees = [e.callee for e in same_as]
    found = []
    camel = prefix.rstrip("_").lower()
    for path in _tests_calling(name, prefix, texts, callees):
        for c in tests_scan.comparisons(path, texts[path], callees, callees[1:], _origins(same_as)):
            if camel and any(w.lower().startswith(camel) for w in c.other.split(".")[-2:]):
                continue  # the repository's own implementation (its module wrapper, its Function)
            found.append(c)
    return found


def sliced_from_tests(name: str, prefix: str, texts: dict[str, str], same_as: list[Equivalent],
                      params: list[str]) -> list[Sliced]:
    """The tests' comparisons of the entry with a value they compute themselves (an expression,
    a module they build): `pipeline.onboarding.test_slices`. Test files named after the entry first."""
    callees = [e.callee for e in same_as]

    def positional_of(callee: str) -> tuple[str, ...]:
        return equivalent_for(callee, same_as).positional

    found = []
    for path in _tests_calling(name, prefix, texts, callees):
        found += test_slices.from_test_file(path, texts[path], callees, callees[1:], _origins(same_as), params,
                                            positional_of)
    return found


def _tests_calling(name: str, prefix: str, texts: dict[str, str], callees: list[tuple[str, ...]]) -> list[str]:
    """The test files that name one of `callees`, those named after the entry first."""
    named = stems(name, prefix)
    tests = (p for p in texts if tests_scan.is_test_file(p)
             and any(re.search(rf"\b{re.escape(c[-1])}\b", texts[p]) for c in callees))
    return sorted(tests, key=lambda p: (not any(PurePosixPath(p).stem in (f"test_{s}", f"{s}_test") for s in named), p))


def calls_in_tests(texts: dict[str, str], same_as: list[Equivalent]) -> list[Calls]:
    """Every call of the entry (or an equivalent) in the tests, for its arguments."""
    callees = [e.callee for e in same_as]
    out = []
    for path in sorted(p for p in texts if tests_scan.is_test_file(p)):
        if any(re.search(rf"\b{re.escape(c[-1])}\b", texts[path]) for c in callees):
            out += tests_scan.entry_calls(path, texts[path], callees, _origins(same_as))
    return out


def _origins(same_as: list[Equivalent]) -> dict:
    return {e.callee: e.origin for e in same_as if e.origin}


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
