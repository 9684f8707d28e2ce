"""Which op a kernel, a module function or an entry computes: from a kernel's name and
signature (parameter names and kinds matched against each op's arguments, in any order; the
best match, marked a guess, where none fits), a pybind11 function's tensors, a Python entry's
parameters, an entry's name (`liger_layer_norm` is layer_norm), a TORCH_LIBRARY schema; and
gemm's layout from how the kernel indexes B. Decisions over records."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from pipeline.onboarding.conventions.ref_names import squash, stems
from pipeline.onboarding.decide.arguments import ALIASES, NAME_HINTS, args_per_param, norm_name
from pipeline.onboarding.decide.dtypes import DTYPE_OF, element_of, kernel_dtypes, kind_of, module_dtype
from pipeline.onboarding.decide.sizes import DEFAULT_SHAPES
from pipeline.onboarding.source.records import Evidence, Guess, Kernel, LibraryOp, Reference
from workers.ops import OPS, op_for_entry_name


def _wanted(op: str, returns: bool = False) -> dict[str, list[str]]:
    module = OPS[op]
    tensors = [*module.INPUTS, *(() if returns else (module.OUTPUT,))]
    scalars = [*getattr(module, "SCALARS", ()), *(("alpha", "beta") if op == "gemm" else ())]
    return {"tensor": tensors, "int": list(module.DIMS), "float": scalars}


def map_params(kernel: Kernel, op: str) -> tuple[tuple[str, ...] | None, str]:
    """(op argument per parameter, "") if the signature fits `op`, else (None, why)."""
    module = OPS[op]
    aliases = ALIASES[op]
    wanted = _wanted(op)
    tensors, dims = wanted["tensor"], wanted["int"]
    out: list[str | None] = []
    taken: set[str] = set()
    for p in kernel.params:
        kind = kind_of(p)
        if kind not in wanted:
            return None, f"parameter {p.type} {p.name} is not a pointer, size or scalar"
        name = norm_name(p.name)
        hit = next((a for a in wanted[kind] if a not in taken and name in aliases.get(a, ())), None)
        out.append(hit)
        if hit:
            taken.add(hit)
    # unnamed or unusually named parameters: in the op's order, inputs before the output
    for i, p in enumerate(kernel.params):
        if out[i] is None:
            kind = kind_of(p)
            free = [a for a in wanted[kind] if a not in taken]
            if kind == "tensor" and "const" not in p.type:  # written: the output if it is still free
                free = [a for a in free if a == module.OUTPUT] or free
            if kind == "float" or not free:
                return None, f"parameter {p.type} {p.name} has no {op} argument to be"
            out[i] = free[0]
            taken.add(free[0])
    missing_tensors = [t for t in tensors if t not in taken]
    if missing_tensors:
        return None, f"no parameter for {missing_tensors}"
    if not any(d in taken for d in dims):
        return None, f"no size parameter among {dims}"
    return tuple(out), ""  # type: ignore[arg-type]


def guess_op(kernel: Kernel, file_text: str = "", evidence: Evidence | None = None) -> Guess:
    """The op a kernel computes, from its name and signature (pybind11 functions take tensors:
    their order is the op's `tensor_args`); when none fits exactly, the best guess with why."""
    evidence = evidence or Evidence()
    lowered = kernel.name.lower() + " " + (kernel.entry or "").lower()
    if kernel.kind == "pybind11":  # a module function's file and the kernels it launches name the op too
        lowered += " " + " ".join([PurePosixPath(kernel.file).stem.lower(), *(k.name.lower() for k in evidence.launched)])
    hinted = [op for op, words in NAME_HINTS if any(w in lowered for w in words)]
    if kernel.kind == "pybind11":
        return _guess_pybind(kernel, hinted, file_text, evidence)
    fits, why = {}, {}
    for op in ALIASES:
        mapped, reason = map_params(kernel, op)
        if mapped:
            fits[op] = mapped
        else:
            why[op] = reason
    elements = {element_of(p, evidence) for p in kernel.params if p.pointer}
    if not fits:
        hint = f" (its name suggests {hinted[0]}: {why.get(hinted[0])})" if hinted else ""
        return _best_guess(kernel, hinted, file_text, evidence, f"the signature fits no op{hint}")
    if not hinted and elements and not elements & set(DTYPE_OF):
        return _best_guess(kernel, hinted, file_text, evidence,
                           f"its pointers are {sorted(elements)}, no floating-point data, and its name names no op")
    op = next((o for o in hinted if o in fits), None)
    if op is None:
        if "attention_causal" in fits and "attention" in fits:
            fits.pop("attention_causal")
        if len(fits) > 1:
            by_size = sorted(fits, key=lambda o: (-len(OPS[o].INPUTS), o))
            op = by_size[0]
        else:
            op = next(iter(fits))
    return _finish(kernel, op, fits[op], file_text, evidence)


def _finish(kernel: Kernel, op: str, mapped: tuple[str | None, ...], file_text: str, evidence: Evidence,
            guesses: tuple[tuple[str, str], ...] = (), reason: str = "") -> Guess:
    """The dtype and layout of a kernel whose op and arguments (`mapped`: per parameter) are
    settled (or guessed)."""
    args = tuple(a for a in mapped if a)
    notes = []
    guesses = list(guesses)
    absent = [d for d in OPS[op].DIMS if d not in args]
    if absent and not reason:
        notes.append(f"the kernel takes no {', '.join(absent)}: only shapes where they equal the sizes it does take "
                     f"are valid")
    dtype, output_dtype, origin, dguess = kernel_dtypes(kernel, mapped, OPS[op], file_text, evidence)
    if dguess:
        guesses.append(("dtypes", dguess))
    layout = OPS[op].LAYOUTS[0]
    if op == "gemm":
        layout, lnote = gemm_layout(kernel, mapped)
        if lnote:
            guesses.append(("layout", lnote))
    return Guess(op, args, dtype, output_dtype, layout, reason=reason, notes=tuple(notes),
                 guesses=tuple(guesses), dtype_origin=origin, per_param=tuple(mapped))


def _partial_map(kernel: Kernel, op: str, returns: bool = False) -> list[str | None]:
    """Per parameter the op argument its name and kind make it, else None; pointers left over
    fill the op's free tensors by constness (read: an input, written: the output)."""
    aliases, wanted = ALIASES[op], _wanted(op, returns)
    out: list[str | None] = []
    taken: set[str] = set()
    for p in kernel.params:
        name = norm_name(p.name)
        hit = next((a for a in wanted.get(kind_of(p), []) if a not in taken and name in aliases.get(a, ())), None)
        out.append(hit)
        if hit:
            taken.add(hit)
    output = OPS[op].OUTPUT
    for i, p in enumerate(kernel.params):
        if out[i] is None and kind_of(p) == "tensor":
            free = [t for t in wanted["tensor"] if t not in taken]
            written = "const" not in p.type and kernel.kind != "pybind11"
            pick = next((t for t in free if (t == output) == written), None)
            if pick:
                out[i] = pick
                taken.add(pick)
    return out


def _best_guess(kernel: Kernel, hinted: list[str], file_text: str, evidence: Evidence, reason: str) -> Guess:
    """The op whose arguments the parameters match best: the name's hint first, then how many
    parameters match an argument by name, then how close the pointer count is to the op's
    tensor count; with no name matching at all, the kernel's pointers as a copy."""
    pointers = [p for p in kernel.params if kind_of(p) == "tensor"]

    def score(op: str) -> tuple:
        mapped = _partial_map(kernel, op)
        by_name = sum(1 for p, a in zip(kernel.params, mapped) if a and norm_name(p.name) in ALIASES[op].get(a, ()))
        tensors = len(OPS[op].INPUTS) + 1
        return (op in hinted, by_name, -abs(len(pointers) - tensors), -len(OPS[op].DIMS), op == "copy")

    ranked = sorted(ALIASES, key=score, reverse=True)
    op = ranked[0]
    best = score(op)
    mapped = _partial_map(kernel, op)
    if not best[0] and not best[1]:
        op = "copy"
        mapped = _partial_map(kernel, op)
        why_op = f"{reason}; nothing in its name or parameters points to an op: its pointers are drafted as a copy"
    else:
        matched = ", ".join(f"{p.name}→{a}" for p, a in zip(kernel.params, mapped) if a)
        why_op = f"{reason}; {op}'s arguments match best ({matched})"
    left = [p.name or p.type for p, a in zip(kernel.params, mapped) if a is None]
    guesses = [("op", why_op)]
    if left:
        guesses.append(("binding.args", _not_arguments(left, op, f"flopwatch cannot launch {kernel.name} as it is (a "
                                                                 "host wrapper taking the op's arguments, or an op.py "
                                                                 "of the repository, would measure it)")))
    return _finish(kernel, op, tuple(mapped), file_text, evidence, tuple(guesses), reason=why_op)


def _not_arguments(left: list[str], op: str, consequence: str) -> str:
    return f"{', '.join(left)} {'is' if len(left) == 1 else 'are'} no {op} argument: {consequence}"


def _returns_tensor(returns: str) -> bool:
    return "Tensor" in returns or "py::object" in returns


def _guess_pybind(kernel: Kernel, hinted: list[str], file_text: str, evidence: Evidence) -> Guess:
    """A module function: the op from its tensors (names, count; a function returning a tensor
    takes the op's inputs only), its other parameters mapped to sizes and scalars by name."""
    returns = _returns_tensor(kernel.returns)
    tensors = [p for p in kernel.params if kind_of(p) == "tensor"]
    guesses: list[tuple[str, str]] = []
    signature = f"{kernel.entry}({', '.join(p.type for p in kernel.params)})"

    def wanted(op: str) -> int:
        return len(OPS[op].INPUTS) + (0 if returns else 1)

    def by_name(op: str) -> int:
        mapped = _partial_map(kernel, op, returns)
        return sum(1 for p, a in zip(kernel.params, mapped) if a and kind_of(p) == "tensor"
                   and norm_name(p.name) in ALIASES[op].get(a, ()))

    counted = [op for op in ALIASES if wanted(op) == len(tensors) and op != "attention_causal"]
    op = next((o for o in hinted if o in counted), None)
    if op is None and counted:
        default = ({3: "gemm", 4: "attention", 2: "softmax"} if not returns else
                   {3: "attention", 2: "gemm", 1: "softmax"}).get(len(tensors))
        op = max(counted, key=lambda o: (by_name(o), o == default, -len(OPS[o].DIMS)))
    if op is None:
        op = next((o for o in hinted if o in ALIASES), None) or ("attention" if len(tensors) >= 3 else "gemm")
        if not kernel.params:
            why = f"the parameters of {kernel.name} were not found (declare it in the module's file)"
        else:
            why = f"{signature} takes {len(tensors)} tensor(s), no op takes that many"
        guesses.append(("op", f"{why}; {op} assumed"))
    mapped = _partial_map(kernel, op, returns)
    order = [*OPS[op].INPUTS, *(() if returns else (OPS[op].OUTPUT,))]
    tensor_names = [a for p, a in zip(kernel.params, mapped) if kind_of(p) == "tensor"]
    if not all(norm_name(p.name) in ALIASES[op].get(a or "", ()) for p, a in zip(kernel.params, mapped)
               if kind_of(p) == "tensor"):
        # names do not tell: the op's own order, as flopwatch calls module functions by default
        positional = iter(order)
        mapped = [next(positional, None) if kind_of(p) == "tensor" else a for p, a in zip(kernel.params, mapped)]
        tensor_names = [a for p, a in zip(kernel.params, mapped) if kind_of(p) == "tensor"]
    left = [p.name or p.type for p, a in zip(kernel.params, mapped) if a is None]
    if left:
        guesses.append(("binding.args", _not_arguments(left, op, f"flopwatch cannot call {kernel.entry} as it is")))
    args = tuple(a for a in mapped if a)
    explicit = returns or len(args) != len(tensor_names) or list(args) != order[:len(args)]
    dtype, output_dtype, origin, dguess = module_dtype(kernel, file_text, evidence)
    if dguess:
        guesses.append(("dtypes", dguess))
    layout = OPS[op].LAYOUTS[0]
    if op == "gemm":
        layout = "nt" if re.search(r"B\s*\^\s*T|B\.T|Bᵀ|transpose", kernel.doc + file_text) else "nn"
        guesses.append(("layout", f"layout {layout!r} read from the module's comments (nt: B is stored N×K)"))
    return Guess(op, args, dtype, output_dtype, layout, guesses=tuple(guesses), returns=returns,
                 explicit_args=explicit, dtype_origin=origin, per_param=tuple(mapped))


def gemm_layout(kernel: Kernel, args: tuple[str | None, ...]) -> tuple[str, str]:
    """`nn` when B is indexed with a stride of N (B is K×N), `nt` with a stride of K (B stored
    N×K); the tutorial layout `nn` with a note when the body does not tell."""
    names = {a: p.name for a, p in zip(args_per_param(kernel, args), kernel.params) if a}
    b, n, k = names.get("B"), names.get("N"), names.get("K")
    if b and kernel.body:
        indexes = " ".join(re.findall(rf"\b{re.escape(b)}\s*\[([^\]]*)\]", kernel.body))
        uses = {dim for dim, name in (("N", n), ("K", k))
                if name and re.search(rf"(\*\s*{re.escape(name)}\b|\b{re.escape(name)}\s*\*)", indexes)}
        if uses == {"N"}:
            return "nn", ""
        if uses == {"K"}:
            return "nt", ""
    return "nn", "layout 'nn' assumed (A is M×K, B is K×N, row-major); write layout = \"nt\" if B is stored N×K"


def op_from_params(name: str, params: list[str], returns: bool, kinds: list[str] | None = None,
                   only: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """(op, the op argument of each parameter in order; "" for one the op does not take) where
    the names fit an op (name hints first), or ("", []) (pure). `kinds`: "tensor" / "int" /
    "float" per parameter where known (a C++ signature); `only`: the ops to try (the one an
    entry's name says), in order."""
    lowered = name.lower()
    hinted = [op for op, words in NAME_HINTS if any(w in lowered for w in words)]
    order = [op for op in only if op in OPS] if only else hinted + [op for op in OPS if op not in hinted]
    for op in order:
        module = OPS[op]
        wanted = [*module.INPUTS] + ([] if returns else [module.OUTPUT])
        aliases = ALIASES.get(op, {})
        mapped: list[str] = []
        taken: set[str] = set()
        for i, p in enumerate(params):
            kind = (kinds or [""] * len(params))[i]
            names = [*wanted, *module.DIMS, *getattr(module, "SCALARS", ())]
            hit = next((a for a in names if a not in taken and norm_name(p) in aliases.get(a, ())
                        and (not kind or (kind == "tensor") == (a in wanted))), "")
            mapped.append(hit)
            if hit:
                taken.add(hit)
        if all(a in taken for a in wanted):
            return op, mapped
        tensors = [i for i, k in enumerate(kinds or []) if k == "tensor"]
        if kinds and op in hinted and len(tensors) == len(wanted):  # names differ, count and name fit
            mapped = ["" for _ in params]
            for i, a in zip(tensors, wanted):
                mapped[i] = a
            return op, mapped
    return "", []


def builtin_for_operator(op: LibraryOp, returns: bool) -> str:
    """The built-in op a TORCH_LIBRARY operator computes, by its name (`mymul` is mul) and its
    schema: as many tensors as the op's inputs, nothing else, one tensor returned."""
    builtin = op_for_entry_name(op.name)
    if not builtin or not returns or builtin not in DEFAULT_SHAPES:
        return ""
    tensors = [a for a in op.args if a.tensor]
    fits = len(tensors) == len(op.args) == len(OPS[builtin].INPUTS) and not getattr(OPS[builtin], "SCALARS", ())
    return builtin if fits else ""


def op_by_name(name: str, prefix: str) -> str:
    """The built-in op an entry's name says, or "". Through the ops' ENTRY_NAMES where they have
    them (`workers.ops.op_for_entry_name`), else the op's own name."""
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
            if squash(n) == squash(op):
                return op
    return ""


def builtin(name: str, prefix: str, params: list[str], required: int, returns: bool) -> Reference | None:
    """The built-in op this entry computes, where its name says which and its parameters give the
    op's inputs (by name, else in order: ops follow the functional signatures of the libraries
    they come from, inputs then scalars)."""
    op = op_by_name(name, prefix)
    if not op:
        return None
    found, mapped = op_from_params(name, params, returns, only=(op,))
    if found and all(mapped[:required]):
        return Reference("builtin", op=op, mapped=tuple(mapped))
    module = OPS[op]
    order = [*module.INPUTS, *getattr(module, "SCALARS", ())] + ([] if returns else [module.OUTPUT])
    if op not in ALIASES and required <= len(order):
        positional = order[:len(params)] + [""] * max(0, len(params) - len(order))
        return Reference("builtin", op=op, mapped=tuple(positional))
    return None
