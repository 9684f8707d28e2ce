"""Draft every public function of a Python module as an entry, each checked against the
reference the repository already trusts (`pipeline.onboarding.references`), and say why each
public function that is not drafted is not.

A built-in op's draft is the op's (`op = "layer_norm"`, its inputs and peer). Any other entry
is an op of its own, named after the variant, with a `[reference]` table (docs/variants.md):
the callable to compare with (`call`, how it was `found`, `where`), the sizes and the inputs of
one call — from the test that calls the entry where there is one, else a marked guess — or
`check = "none"` where the repository has no reference: measured as `unchecked`, its output
kept per commit. The draft's first line names the reference it took.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import PurePosixPath

from pipeline.onboarding import drafting, drafting_python, python_scan, references, test_slices
from pipeline.onboarding.source.records import (
    Arg,
    Calls,
    Comparison,
    Inputs,
    Reference,
    Skipped,
    TensorMade,
    Where,
)
from pipeline.project.schema import REFERENCE_FLOAT_DTYPES, REFERENCE_INT_DTYPES
from workers.ops import OPS
from workers.ops.problem import TOLERANCE

GUESS = "# TODO (guess)"
# Parameter names of scalars, not tensors (a guess for entries no test calls).
_SCALAR = re.compile(r"^(eps|epsilon|dim|axis|dims|num_\w+|n_\w+|\w+_size|size|stride|padding|dilation|groups|"
                     r"scale|softmax_scale|sm_scale|temperature|p|mode|reduction|\w+_index|\w+_mode|offset|"
                     r"casting_mode|in_place|inplace|causal|training|\w+_eps|alpha_\w+|tmax)$")
_OUTPUT = re.compile(r"^(out|output|dst|result|res|y|o)$|_out$")
_GUESSED_SIZE = 1024
_SIZE_NAMES = ("N", "M", "K", "L", "P", "Q", "R", "S", "T", "U")


def public_functions(tree: ast.Module, texts: dict[str, str] | None = None) -> tuple[list[ast.FunctionDef], list[Skipped]]:
    """The module's top-level functions that are entries, and those that are not with why. A
    public name bound to an autograd Function's `apply` (`liger_fused_linear_orpo =
    LigerFusedLinearORPOFunction.apply`) is an entry too, with the parameters of the Function's
    forward (`texts`: the repository's files, to find it)."""
    exported = _all(tree)
    entries, skipped = [], []
    for node in tree.body:
        alias = _apply_alias(node)
        if alias is None or alias[0].startswith("_") or exported is not None and alias[0] not in exported:
            continue
        fn = _as_function(alias[0], alias[1], tree, texts or {})
        if fn is None:
            skipped.append(Skipped(alias[0], f"{alias[1]}.apply, whose forward flopwatch cannot find"))
        else:
            entries.append(fn)
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
        entries.append(fn)
    return entries, skipped


def _apply_alias(node: ast.AST) -> tuple[str, str] | None:
    """(name, Function) of `name = Function.apply` at a module's top level."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
            and isinstance(node.value, ast.Attribute) and node.value.attr == "apply" \
            and isinstance(node.value.value, ast.Name):
        return node.targets[0].id, node.value.value.id
    return None


def _as_function(name: str, cls: str, tree: ast.Module, texts: dict[str, str]) -> ast.FunctionDef | None:
    """`name = Cls.apply` as the function it is: the parameters of `Cls.forward` after ctx,
    returning `Cls.apply(...)` of them (so the tests' calls of either are the entry's)."""
    forward = _forward_of(cls, tree, texts)
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


def _forward_of(cls: str, tree: ast.Module, texts: dict[str, str]) -> ast.FunctionDef | None:
    """The `forward` of class `cls`, defined in the module or imported into it (`from a.b import
    Cls`, looked up as a/b.py or a/b/__init__.py under any folder of the repository)."""
    where = [tree]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and any((a.asname or a.name) == cls for a in node.names):
            tail = node.module.replace(".", "/")
            for path, text in texts.items():
                if path.endswith((f"{tail}.py", f"{tail}/__init__.py")):
                    try:
                        where.append(ast.parse(text))
                    except SyntaxError:
                        pass
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
    if not returns_value(fn) and not output_param(fn):
        return "returns no tensor and takes no output buffer"
    return ""


def returns_value(fn: ast.FunctionDef) -> bool:
    return bool(python_scan.own_returns(fn))


def output_param(fn: ast.FunctionDef) -> str:
    """The parameter an entry that returns nothing writes its result into (`out`)."""
    if returns_value(fn):
        return ""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    return next((p for p in reversed(params) if _OUTPUT.search(p)), "")


# -- the draft -------------------------------------------------------------------------------------------

def draft_entry(fn: ast.FunctionDef, prefix: str, where: Where, repo_texts: dict[str, str], package: str,
                out_dir: str, taken: set[str], imports: dict[str, str] | None = None) -> drafting.Draft:
    """One entry's draft with the first reference found (built-in op → convention → test → none)."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    required = len(params) - len(fn.args.defaults)
    returns = returns_value(fn)
    name = drafting_python._name(fn.name, taken)
    folder = f"{out_dir}/{name}"
    module = where.entry.split(":")[0] if ":" in where.entry and "/" not in where.entry else ""
    same_as = references.equivalents(fn, repo_texts, package, imports, module)
    ref = references.builtin(fn.name, prefix, params, required, returns)
    if ref is not None:
        return _builtin_draft(fn, ref, where, name, folder, repo_texts, returns, same_as,
                              references.calls_in_tests(repo_texts, same_as))
    comparisons = references.from_tests(fn.name, prefix, repo_texts, same_as)
    convention = references.by_convention(fn.name, prefix, where.rel, repo_texts, package)
    calls = references.calls_in_tests(repo_texts, same_as)
    notes = list(convention.notes) if convention else []
    out = output_param(fn)
    # The arguments: from the test comparing the entry (it called it as the reference expects),
    # else from any test's call of it; the reference: by convention first, else that test's.
    usable = []
    for c in comparisons:
        inputs = _inputs_of(params, required, same_as, c.entry_call, c.entry_args, c.entry_kwargs, c.output_index)
        if inputs is not None and _lines_up(inputs, c):
            usable.append((c, inputs))
    if convention is not None and convention.kind == "convention":
        # its inputs (and the keywords it is given): a test comparing with it, else any comparison or call
        compared = next(((c, i) for c, i in usable if c.other.split(".")[-1] == convention.name), None)
        chosen = dataclasses.replace(convention, comparison=compared[0]) if compared else convention
        source = compared[1] if compared else \
            (usable[0][1] if usable else _from_calls(params, required, same_as, calls))
    elif usable:
        c, source = usable[0]
        shown = c.other if not c.other_local and c.other.startswith("torch.") else \
            ".".join(c.other.split(".")[-2:]) if c.other.endswith((".apply", ".default")) else c.other.split(".")[-1]
        chosen = Reference("test", file=c.file, name=shown, line=c.line, compared_by=c.compared_by,
                                      comparison=c)
    elif (sliced := _sliced(fn, prefix, params, required, same_as, repo_texts)) is not None:
        chosen, source = sliced
    else:
        chosen = Reference("none", notes=tuple(notes))
        source = _from_calls(params, required, same_as, calls)
    if source is None:
        source = _guessed_inputs(fn, params, required, out)
    return _reference_draft(fn, chosen, source, where, name, folder, returns, out)


def _sliced(fn, prefix, params, required, same_as, repo_texts):
    """(the reference made of a test's own statements, the inputs of its entry call), from the
    first test comparing the entry with a value it computes whose slice can be written."""
    for s in references.sliced_from_tests(fn.name, prefix, repo_texts, same_as, params):
        c = s.comparison
        inputs = _inputs_of(params, required, same_as, c.entry_call, c.entry_args, c.entry_kwargs, None)
        if inputs is None:
            continue
        text = test_slices.reference_source(s, inputs.names, fn.name)
        if text is not None:
            return Reference("test", file=c.file, name=f"its own statements, in {test_slices.REFERENCE_FILE}", line=c.line,
                                        compared_by=c.compared_by, comparison=c, sliced=text), inputs
    return None


def _from_calls(params, required, same_as, calls: list[Calls]):
    best = None
    for c in calls:
        inputs = _inputs_of(params, required, same_as, c.callee, c.args, c.kwargs, None)
        if inputs is not None and all(i.known for i in inputs.args):
            return inputs
        best = best or inputs
    return best


def _inputs_of(params, required, same_as, callee: str, args, kwargs, output_index) -> Inputs | None:
    """The entry's leading parameters as the test passes them (a call of an equivalent passes
    them in its own order: `references.Equivalent`); None when a required one is missing."""
    if any(a.text.startswith("*") for a in args):
        return None  # spread from something the test does not write out
    equivalent = references.equivalent_for(callee, same_as)
    by_param = equivalent.params_of(args, kwargs)
    if output_index is not None and args:
        index = output_index % len(args)
        at = equivalent.positional[index] if index < len(equivalent.positional) else ""
        output_index = params.index(at) if at in params else None
        if output_index is None:
            return None
    names = []
    for i, p in enumerate(params):
        if p not in by_param:
            if i < required:
                return None
            break
        names.append(p)
    # a trailing optional argument the test passes as None or as something unread: the entry's
    # own default stands in (an input is a tensor or a constant, never None)
    while len(names) > max(required, 1) and not by_param[names[-1]].known \
            and (output_index is None or output_index < len(names) - 1):
        names.pop()
    if not names or (output_index is not None and output_index >= len(names)):
        return None
    return Inputs(tuple(names), tuple(by_param[n] for n in names), output_index)


def _lines_up(inputs: Inputs, c: Comparison) -> bool:
    """Whether the reference takes the entry's inputs (those not written into) in order: its
    positional arguments are the entry's first ones, and what it is given by keyword is the
    entry's next ones under the same names."""
    given = [a for i, a in enumerate(inputs.args) if i != inputs.output]
    names = [n for i, n in enumerate(inputs.names) if i != inputs.output]
    theirs = list(c.other_args)
    if len(theirs) > len(given):
        return False
    for mine, other in zip(given, theirs):
        if not _same(mine, other):
            return False
    for n, a in zip(names[len(theirs):], given[len(theirs):]):
        if n not in c.other_kwargs or not _same(a, c.other_kwargs[n]):
            return False
    return True


def _same(a: Arg, b: Arg) -> bool:
    if a.text == b.text:
        return True
    if a.tensor and b.tensor:
        return a.shape == b.shape and a.dtype == b.dtype
    return a.value is not None and a.value == b.value


def _guessed_inputs(fn, params, required, out) -> Inputs:
    """No test calls the entry: its required parameters, tensors by their names' look."""
    names = params[:max(required, params.index(out) + 1 if out else 0)]
    args = []
    for p in names:
        if _SCALAR.match(p) and p != out:
            args.append(Arg(p, value=1e-6 if "eps" in p else 1))
        else:
            args.append(Arg(p, shape=("M", "N"), sizes={"M": _GUESSED_SIZE, "N": _GUESSED_SIZE},
                                       tensor=True))
    return Inputs(tuple(names), tuple(args), names.index(out) if out else None, guessed=True)


# -- writing ----------------------------------------------------------------------------------------

def _header(label: str, where: Where, fn: ast.FunctionDef, name: str, op: str) -> list[str]:
    return [f"# reference: {label}", f"# Drafted by `flopwatch new` from {where.rel} (function {fn.name}).",
            f'name = "{name}"', f'op = "{op}"', f'backend = "{where.backend}"']


def _binding(where: Where, returns: bool) -> list[str]:
    lines = ["", "[binding]", f'kind = "{"triton" if where.backend == "triton" else "python"}"',
             f'entry = "{where.entry}"']
    if returns:
        lines.append("returns = true")
    return lines


def _devices(where: Where) -> list[str]:
    if where.backend == "triton":
        return []  # Triton's default: the GPUs (cuda, rocm)
    why = ("its extension builds for the CPU and for GPUs" if where.extension_from else
           "plain torch: runs on the CPU too") if "cpu" in where.devices else "imports GPU-only code"
    return [f"devices = {json.dumps(where.devices)}  # {why}"]


def _extensions(where: Where, folder: str) -> list[str]:
    if not where.extension_from:
        return []
    from_folder = drafting_python.from_folder
    return ["", "[[extensions]]", f'from = "{from_folder(folder, where.extension_from)}"  # the extension the '
                                  f"package loads (its TORCH_LIBRARY ops)"]


def _op_shape_from_tests(fn, ref: Reference, same_as, calls, repo_texts) -> tuple[list, str, list]:
    """The op's sizes and dtype from a test's call of the entry: each tensor argument's
    dimensions read as the op's axes for that input (`drafting.TENSOR_DIMS`), a row-wise op's
    leading dimensions folded into its rows. ([], "", []) when no call gives every axis."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    op = ref.op
    axes = drafting.TENSOR_DIMS.get(op, {})
    dims = OPS[op].DIMS
    for c in calls:
        equivalent = references.equivalent_for(c.callee, same_as)
        by_param = equivalent.params_of(c.args, c.kwargs)
        made, found = [], {}
        for p, arg in zip(params, ref.mapped):
            a = by_param.get(p)
            if a is None or not a.tensor or not a.shape:
                continue
            shape = [d if type(d) is int else a.sizes.get(d) for d in a.shape]
            if None in shape:
                continue
            made.append(TensorMade(p, tuple(shape), a.dtype, True, "", c.line))
            wanted = axes.get(arg, ())
            if len(wanted) == len(shape):
                for axis, value in zip(wanted, shape):
                    found.setdefault(axis, value)
            elif len(wanted) == 2 and len(shape) > 2 and tuple(wanted) == tuple(dims[:2]):
                rows = 1
                for d in shape[:-1]:
                    rows *= d
                found.setdefault(wanted[0], rows)
                found.setdefault(wanted[1], shape[-1])
        dtypes = [t.dtype for t in made if t.dtype in ("fp32", "fp16", "bf16")]
        if made and all(d in found for d in dims):
            return [[found[d] for d in dims]], (dtypes[0] if dtypes else ""), made
        folded = drafting_python.shape_of(made, op)
        if folded:
            return folded, (dtypes[0] if dtypes else ""), made
    return [], "", []


def _builtin_draft(fn, ref: Reference, where: Where, name, folder, repo_texts, returns, same_as,
                   calls) -> drafting.Draft:
    op = ref.op
    module = OPS[op]
    triton = where.backend == "triton"
    shapes, dtype, made = _op_shape_from_tests(fn, ref, same_as, calls, repo_texts)
    if not shapes:  # the scripts that call it, as for kernels
        made = drafting_python.tensors_passed(drafting_python.Repo(repo_texts, frozenset(repo_texts)), (fn.name,),
                                              len(module.INPUTS))
        dtype, _ = drafting_python.dtype_of(made, "bf16" if triton else "fp32")
        shapes = drafting_python.shape_of(made, op)
    dtype = dtype or ("bf16" if triton else "fp32")
    guessed = [] if made and shapes else ["shapes"] + ([] if made else ["dtypes"])
    default = drafting.DEFAULT_SHAPES.get(op) or [list(getattr(module, "DEFAULT_SHAPE", ())) or [4096, 4096]]
    lines = _header(references.label(ref), where, fn, name, op)
    lines.append(f'dtypes = ["{dtype}"]' + (f"  {GUESS}" if "dtypes" in guessed else ""))
    lines.append(f"shapes = {json.dumps(shapes or default)}" + (f"  {GUESS}: sizes {list(module.DIMS)}"
                                                               if "shapes" in guessed else ""))
    lines += _devices(where)
    lines += _binding(where, returns)
    passed = drafting_python._leading(list(ref.mapped))
    if passed != drafting_python._default_order(op, returns):
        lines.append(f"args = {json.dumps(passed)}")
    lines += _extensions(where, folder)
    todo = [f"{', '.join(guessed)}: no script or test of the repository calls {fn.name} with tensors flopwatch can "
            f"read"] if guessed else []
    return drafting.Draft(name, folder, {"variant.toml": "\n".join(lines) + "\n"}, where.include_dir, op,
                          tuple(todo), tuple(guessed))


def _call_text(ref: Reference, folder: str) -> str:
    from_folder = drafting_python.from_folder
    if ref.kind == "convention":
        return f"{ref.module}:{ref.name}" if ref.module else f"{from_folder(folder, ref.file)}:{ref.name}"
    c = ref.comparison
    if ref.sliced:
        return f"{test_slices.REFERENCE_FILE}:{test_slices.REFERENCE_FUNCTION}"
    if c.other_local:
        return f"{from_folder(folder, c.file)}:{c.other}"
    module, _, last = c.other.rpartition(".")
    if module == "torch":
        return c.other  # "torch.add": a torch function, as the contract writes it
    return f"{module}:{last}" if module else c.other


def _reference_draft(fn, ref: Reference, inputs: Inputs, where: Where, name, folder, returns,
                     out: str) -> drafting.Draft:
    op = re.sub(r"[^a-z0-9_]", "_", name.lower())
    todo: list[str] = []
    guessed: list[str] = []
    sizes, rows, dtype, guess_why = _table(inputs)
    if inputs.guessed or guess_why:
        guessed.append("reference.inputs")
        todo.append(f"reference.inputs: {guess_why or f'no test of the repository calls {fn.name}; its parameters'} "
                    f"— the shapes are a guess")
    lines = _header(references.label(ref), where, fn, name, op)
    dtype_guess = not dtype
    lines.append(f'dtypes = ["{dtype or ("bf16" if where.backend == "triton" else "fp32")}"]'
                 + (f"  {GUESS}" if dtype_guess else ""))
    if dtype_guess:
        guessed.append("dtypes")
    lines += _devices(where)
    lines += _binding(where, returns)
    entry_kwargs, reference_kwargs = _keywords(fn, ref, inputs)
    if entry_kwargs:
        lines.append(f"kwargs = {_inline(entry_kwargs)}  # as the test calls it")
    lines += _extensions(where, folder)
    lines += ["", "[reference]"]
    if ref.kind == "none":
        lines.append('check = "none"  # no reference found: measured as unchecked, its output kept per commit')
        todo.append(f"reference: none found for {fn.name}; name one (call = \"file.py:fn\") to check it"
                    + "".join(f"; {n}" for n in ref.notes))
    else:
        lines.append(f'call = "{_call_text(ref, folder)}"')
        lines.append(f'found = "{ref.kind}"')
        lines.append(f'where = "{ref.file}:{ref.line}"')
        if reference_kwargs:
            lines.append(f"kwargs = {_inline(reference_kwargs)}  # as the test calls it")
    if sizes:
        lines.append("sizes = { " + ", ".join(f"{k} = {v}" for k, v in sizes.items()) + " }"
                     + (f"  {GUESS}" if "reference.inputs" in guessed else ""))
    lines.append("inputs = [" + (f"  {GUESS}" if "reference.inputs" in guessed else ""))
    lines += [f"  {r}," for r in rows]
    lines.append("]")
    lines += _tolerance(ref, dtype or ("bf16" if where.backend == "triton" else "fp32"))
    files = {"variant.toml": "\n".join(lines) + "\n"}
    if ref.sliced:
        files[test_slices.REFERENCE_FILE] = ref.sliced
    return drafting.Draft(name, folder, files, where.include_dir, op, tuple(todo), tuple(guessed))


def _keywords(fn, ref: Reference, inputs: Inputs) -> tuple[dict, dict]:
    """The constant keyword arguments the comparing test passes beyond the inputs: the entry's
    (`allow_fp32=...`, `**cfg`), which the job passes too (binding.kwargs), and a named
    reference's (`mhc_coeffs_ref(..., **cfg)`: reference.kwargs)."""
    c = ref.comparison
    if c is None:
        return {}, {}
    accepted = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}

    def constants(kwargs: dict, allowed) -> dict:
        return {k: a.value for k, a in kwargs.items() if k not in inputs.names and allowed(k)
                and isinstance(a.value, (bool, int, float, str)) and not a.tensor}

    entry = constants(c.entry_kwargs, lambda k: k in accepted or fn.args.kwarg is not None)
    other = {} if ref.sliced else constants(c.other_kwargs, lambda k: True)
    return entry, other


def _tolerance(ref: Reference, dtype: str) -> list[str]:
    """The comparing test's rtol where it allows more than flopwatch's default for the dtype: the
    repository trusts its kernel to that bound (Liger's fp32 attention, 5e-3 with TF32 dots)."""
    c = ref.comparison
    rtol = (c.tolerance if c is not None else {}).get("rtol")
    default = TOLERANCE.get(dtype, (None,))[0]
    if rtol is None or default is None or rtol <= default:
        return []
    return ["", "[tolerance]", f"rtol = {rtol!r}  # the test's own rtol ({c.compared_by}, {c.file}:{c.line}); "
                               f"flopwatch's {dtype} default is {default!r}"]


def _inline(values: dict) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in values.items()) + " }"


def _table(inputs: Inputs) -> tuple[dict, list[str], str, str]:
    """(sizes, one inline table per input, the job's dtype, why a part is a guess)."""
    sizes: dict[str, int] = {}
    by_value: dict[int, str] = {}
    rows, why = [], ""
    dtypes = [a.dtype for a in inputs.args if a.tensor and a.dtype in ("fp32", "fp16", "bf16")]
    for a in inputs.args:
        for k, v in a.sizes.items():
            sizes.setdefault(k, v)
    for i, (n, a) in enumerate(zip(inputs.names, inputs.args)):
        if a.tensor:  # shape [] is a 0-d tensor
            shape = []
            for d in a.shape:
                if isinstance(d, str) and d in sizes:
                    shape.append(d)
                    continue
                if not (type(d) is int):
                    why = why or f"{n}'s dimension {d!r} is not a size the test names"
                    d = _GUESSED_SIZE
                if d not in by_value:  # a number the test writes: a size of its own, shared by equal ones
                    size = next(s for s in _SIZE_NAMES + tuple(f"N{j}" for j in range(64))
                                if s not in sizes)
                    sizes[size] = d
                    by_value[d] = size
                shape.append(by_value[d])
            fields = [f'name = "{n}"', f"shape = {json.dumps(shape)}"]
            if a.dtype in REFERENCE_FLOAT_DTYPES and dtypes and a.dtype != dtypes[0]:
                fields.append(f'dtype = "{a.dtype}"')  # the test makes it so, whatever the others' dtype
            if a.dtype in REFERENCE_INT_DTYPES:
                fields.append(f'dtype = "{a.dtype}"')
                if a.dtype != "bool":
                    fields.append(f"high = {min((v for v in sizes.values() if v >= 2), default=2)}")
            if i == inputs.output:
                fields.append("output = true")
            rows.append("{ " + ", ".join(fields) + " }")
        elif a.value is not None and isinstance(a.value, (bool, int, float, str)):
            rows.append("{ " + f'name = "{n}", value = {json.dumps(a.value)}' + " }")
        elif _SCALAR.match(n):  # `padding=K // 2`: a scalar the test computes
            why = why or f"{n} ({a.text}) is not a constant flopwatch can read in the test"
            rows.append("{ " + f'name = "{n}", value = {1e-6 if "eps" in n else 1}' + " }")
        else:
            why = why or f"{n} ({a.text}) is not a tensor or constant flopwatch can read in the test"
            sizes.setdefault("M", _GUESSED_SIZE)
            sizes.setdefault("N", _GUESSED_SIZE)
            rows.append("{ " + f'name = "{n}", shape = ["M", "N"]' + (", output = true" if i == inputs.output else "")
                        + " }")
    return sizes, rows, (dtypes[0] if dtypes else ""), why


def package_of(rel: str, root: str) -> str:
    """The top folder of the package a module belongs to (`src/liger_kernel`), or its folder."""
    if not root:
        return str(PurePosixPath(rel).parent) if "/" in rel else ""
    inner = PurePosixPath(rel).relative_to(root).parts if root != "." else PurePosixPath(rel).parts
    return f"{root}/{inner[0]}" if root != "." else inner[0]


# -- one module ------------------------------------------------------------------------------------

def module_drafts(rel: str, repo: drafting_python.Repo, out_dir: str, taken: set[str], functional: bool = True,
                  skipped: list | None = None) -> tuple[list[drafting.Draft], list[str]]:
    """The drafts of one Python file: its problem, solution or extensions
    (`drafting_python.drafts_for`), else (`functional`) every public function as an entry."""
    drafts, notes = drafting_python.drafts_for(rel, repo, out_dir, taken, draft_library_wrapper)
    text = repo.texts.get(rel, "")
    if drafts or notes or not functional:
        return drafts, notes
    return function_drafts(rel, text, repo, out_dir, taken, skipped)


def draft_library_wrapper(op, spec, entry: str, where: str, wrapper: ast.FunctionDef, repo: drafting_python.Repo,
                          out_dir: str, taken: set[str]) -> drafting.Draft | None:
    """A TORCH_LIBRARY operator's Python wrapper drafted as the repository's other entries are
    (`drafting_python.library_op_draft` asks): with the reference and inputs of a test that
    calls it, the operator's devices and extension; None where no test tells its inputs."""
    rel = where.rsplit(":", 1)[0]
    root = drafting_python.import_root(rel, repo.files)[0]
    tree = drafting_python._tree(repo.texts[rel])
    prefix = references.common_prefix([f.name for f in public_functions(tree, repo.texts)[0]])
    at = Where(rel=rel, entry=entry, backend="torch", devices=tuple(op.devices) or ("cuda",),
               include_dir="", extension_from=spec.origin.rsplit(":", 1)[0])
    drafted = draft_entry(wrapper, prefix, at, repo.texts, package_of(rel, root), out_dir, taken)
    if "reference.inputs" not in drafted.guessed:
        return drafted  # a test calls it: its inputs and sizes, and the reference it trusts
    taken.discard(drafted.name)
    return None


def function_drafts(rel: str, text: str, repo: drafting_python.Repo, out_dir: str, taken: set[str],
                    skipped: list | None = None) -> tuple[list[drafting.Draft], list[str]]:
    """Every public top-level function of a module as an entry, each with the reference the
    repository trusts (`pipeline.onboarding.entries`); `skipped` gets an `entries.Skipped` for
    each public function not drafted."""
    tree = drafting_python._tree(text)
    if tree is None:
        return [], []
    root, dotted = drafting_python.import_root(rel, repo.files)
    found, passed_over = public_functions(tree, repo.texts)
    if skipped is not None:
        skipped += passed_over
    public = [s.entry for s in passed_over if s.reason not in ("not public", "not in the module's __all__")]
    prefix = references.common_prefix([fn.name for fn in found] + public)  # the names the module exports
    triton = drafting_python.uses_triton(text) or drafting_python._package_uses_triton(rel, root, repo)
    package = package_of(rel, root)
    drafts = []
    # a public function that is another's reference by name (`selective_scan_ref`) is that
    # entry's check, not an entry of its own
    refs: dict[str, str] = {}
    for fn in found:
        ref = references.by_convention(fn.name, prefix, rel, repo.texts, package)
        if ref is not None and ref.kind == "convention" and ref.file == rel and ref.name != fn.name:
            refs.setdefault(ref.name, fn.name)
    for fn in found:
        if fn.name in refs:
            if skipped is not None:
                skipped.append(Skipped(fn.name, f"the reference of {refs[fn.name]} (by name)"))
            continue
        folder = f"{out_dir}/{drafting.variant_name(None, set(taken), fn.name)}"
        where = Where(rel=rel, entry=f"{dotted}:{fn.name}" if dotted else f"{drafting_python.from_folder(folder, rel)}:{fn.name}",
                              backend="triton" if triton else "python",
                              devices=("cpu", "cuda") if drafting_python.runs_on_cpu(text) and not _gpu_only(text)
                              else ("cuda",),
                              include_dir=root if root not in (".", "") else "",
                              extension_from=_extension_loaded(rel, root, repo))
        if where.extension_from:
            where = dataclasses.replace(where, backend="torch")
        drafts.append(draft_entry(fn, prefix, where, repo.texts, package, out_dir, taken,
                                  references.module_imports(tree)))
    return drafts, []


def _gpu_only(text: str) -> bool:
    """A module importing what runs on NVIDIA GPUs only (cupy, pycuda, cuda-python)."""
    return bool(re.search(r"^\s*(import|from)\s+(cupy|pycuda|cuda\b|cuda\.)", text, re.MULTILINE))


def _extension_loaded(rel: str, root: str, repo: drafting_python.Repo) -> str:
    """The setup.py building the compiled module a package loads (`from . import _C` in its
    __init__: the functions call `torch.ops.<ns>.<op>`, which exist only once it is built), or ""."""
    if not root:
        return ""
    package = PurePosixPath(rel).parent
    init = repo.texts.get(f"{package}/__init__.py", "")
    if not re.search(r"from\s+\.\s+import\s+[^\n]*\b_C\b|import\s+\w+\._C\b", init):
        return ""
    for candidate in ("setup.py", f"{root}/setup.py" if root != "." else "setup.py"):
        if re.search(r"\b(CUDAExtension|CppExtension)\b", repo.texts.get(candidate, "")):
            return candidate
    return ""


