"""The drafts of a Python module's entries, each checked against the reference the repository
already trusts (`decide.references`), and why each public function not drafted is not.

A built-in op's draft is the op's (`op = "layer_norm"`, its inputs and peer). Any other entry
is an op of its own, named after the variant, with a `[reference]` table (docs/variants.md):
the callable to compare with (`call`, how it was `found`, `where`), the sizes and the inputs of
one call — from the test that calls the entry where there is one, else a marked guess — or
`check = "none"` where the repository has no reference: measured as `unchecked`, its output
kept per commit. The draft's first line names the reference it took."""

from __future__ import annotations

import json
import re

from pipeline.onboarding.conventions import module_entries
from pipeline.onboarding.conventions.ref_names import common_prefix
from pipeline.onboarding.decide import references
from pipeline.onboarding.decide.arguments import default_order, leading
from pipeline.onboarding.decide.devices import entry_placement
from pipeline.onboarding.decide.dtypes import default_dtype
from pipeline.onboarding.decide.inputs import keywords, looser_rtol, table
from pipeline.onboarding.decide.ops import builtin
from pipeline.onboarding.decide.sizes import builtin_sizes
from pipeline.onboarding.decide.sliced_reference import REFERENCE_FILE, REFERENCE_FUNCTION
from pipeline.onboarding.source.records import Draft, Entry, Inputs, LibraryOp, Reference, Skipped, Where
from pipeline.onboarding.write.manifest import (
    CHECK_NONE,
    GUESS,
    binding,
    draft,
    drafted_by,
    extensions,
    first_line,
    from_folder,
    inline,
    input_row,
    reference_label,
    variant_name,
)
from workers.ops import OPS


def module_drafts(repo, rel: str, out_dir: str, taken: set[str], skipped: list | None = None) -> list[Draft]:
    """Every public top-level function of a module as an entry, each with the reference the
    repository trusts; `skipped` gets a `Skipped` for each public function not drafted."""
    if repo.tree(rel) is None:
        return []
    root, dotted = repo.import_root(rel)
    found, passed_over = module_entries.public_functions(repo, rel)
    if skipped is not None:
        skipped += passed_over
    public = [s.entry for s in passed_over if s.reason not in ("not public", "not in the module's __all__")]
    prefix = common_prefix([e.name for e in found] + public)  # the names the module exports
    package = repo.package_of(rel)
    backend, devices, extension = entry_placement(repo, rel)
    imports = module_entries.module_imports(repo.tree(rel))
    drafts = []
    # a public function that is another's reference by name (`selective_scan_ref`) is that
    # entry's check, not an entry of its own
    refs = references.references_beside(repo, rel, [e.name for e in found], prefix, package)
    for entry in found:
        if entry.name in refs:
            if skipped is not None:
                skipped.append(Skipped(entry.name, f"the reference of {refs[entry.name]} (by name)"))
            continue
        folder = f"{out_dir}/{variant_name(None, set(taken), entry.name)}"
        where = Where(rel=rel, entry=f"{dotted}:{entry.name}" if dotted else f"{from_folder(folder, rel)}:{entry.name}",
                      backend=backend, devices=devices, include_dir=root if root not in (".", "") else "",
                      extension_from=extension)
        drafts.append(entry_draft(repo, entry, prefix, where, package, out_dir, taken, imports))
    return drafts


def wrapper_draft(repo, op: LibraryOp, spec, entry: str, where: str, wrapper: Entry, out_dir: str,
                  taken: set[str]) -> Draft | None:
    """A TORCH_LIBRARY operator's Python wrapper drafted as the repository's other entries are:
    with the reference and inputs of a test that calls it, the operator's devices and extension;
    None where no test tells its inputs (the schema then tells their kinds better)."""
    rel = where.rsplit(":", 1)[0]
    prefix = common_prefix([e.name for e in module_entries.public_functions(repo, rel)[0]])
    at = Where(rel=rel, entry=entry, backend="torch", devices=tuple(op.devices) or ("cuda",),
               include_dir="", extension_from=spec.origin.rsplit(":", 1)[0])
    drafted = entry_draft(repo, wrapper, prefix, at, repo.package_of(rel), out_dir, taken)
    if "reference.inputs" not in drafted.guessed:
        return drafted  # a test calls it: its inputs and sizes, and the reference it trusts
    taken.discard(drafted.name)
    return None


def entry_draft(repo, entry: Entry, prefix: str, where: Where, package: str, out_dir: str, taken: set[str],
                imports: dict[str, str] | None = None) -> Draft:
    """One entry's draft with the first reference found (built-in op → by name → test → the
    test's own statements → none)."""
    name = variant_name(None, taken, entry.name)
    folder = f"{out_dir}/{name}"
    module = where.entry.split(":")[0] if ":" in where.entry and "/" not in where.entry else ""
    same_as = references.equivalents(repo, entry, package, imports, module)
    ref = builtin(entry.name, prefix, list(entry.params), entry.required, entry.returns)
    if ref is not None:
        calls = references.calls_in_tests(repo, same_as)
        return _builtin_draft(repo, entry, ref, where, name, folder, same_as, calls)
    chosen, inputs = references.choose(repo, entry, where, prefix, package, same_as)
    return _reference_draft(entry, chosen, inputs, where, name, folder)


def _builtin_draft(repo, entry: Entry, ref: Reference, where: Where, name: str, folder: str, same_as,
                   calls) -> Draft:
    op = ref.op
    shapes, dtype, guessed = builtin_sizes(repo, entry, ref, same_as, calls, where.backend)
    label = reference_label(ref)
    lines = _header(label, where, entry, name, op)
    lines.append(f'dtypes = ["{dtype}"]' + (f"  {GUESS}" if "dtypes" in guessed else ""))
    lines.append(f"shapes = {json.dumps(shapes)}" + (f"  {GUESS}: sizes {list(OPS[op].DIMS)}"
                                                      if "shapes" in guessed else ""))
    lines += _devices(where)
    lines += _binding(where, entry.returns)
    passed = leading(list(ref.mapped))
    if passed != default_order(op, entry.returns):
        lines.append(f"args = {json.dumps(passed)}")
    lines += _extensions(where, folder)
    todo = [f"{', '.join(guessed)}: no script or test of the repository calls {entry.name} with tensors flopwatch "
            f"can read"] if guessed else []
    return draft(name, folder, lines, op, todo, guessed, where.include_dir, entry=where.entry, reference=label)


def _reference_draft(entry: Entry, ref: Reference, inputs: Inputs, where: Where, name: str, folder: str) -> Draft:
    op = re.sub(r"[^a-z0-9_]", "_", name.lower())
    todo: list[str] = []
    guessed: list[str] = []
    sizes, rows, dtype, guess_why = table(inputs)
    if inputs.guessed or guess_why:
        guessed.append("reference.inputs")
        todo.append(f"reference.inputs: {guess_why or f'no test of the repository calls {entry.name}; its parameters'} "
                    f"— the shapes are a guess")
    label = reference_label(ref)
    lines = _header(label, where, entry, name, op)
    dtype_guess = not dtype
    lines.append(f'dtypes = ["{dtype or default_dtype(where.backend)}"]' + (f"  {GUESS}" if dtype_guess else ""))
    if dtype_guess:
        guessed.append("dtypes")
    lines += _devices(where)
    lines += _binding(where, entry.returns)
    entry_kwargs, reference_kwargs = keywords(entry, ref, inputs)
    if entry_kwargs:
        lines.append(f"kwargs = {inline(entry_kwargs)}  # as the test calls it")
    lines += _extensions(where, folder)
    lines += ["", "[reference]"]
    if ref.kind == "none":
        lines.append(CHECK_NONE)
        todo.append(f"reference: none found for {entry.name}; name one (call = \"file.py:fn\") to check it"
                    + "".join(f"; {n}" for n in ref.notes))
    else:
        lines.append(f'call = "{_call_text(ref, folder)}"')
        lines.append(f'found = "{ref.kind}"')
        lines.append(f'where = "{ref.file}:{ref.line}"')
        if reference_kwargs:
            lines.append(f"kwargs = {inline(reference_kwargs)}  # as the test calls it")
    if sizes:
        lines.append("sizes = { " + ", ".join(f"{k} = {v}" for k, v in sizes.items()) + " }"
                     + (f"  {GUESS}" if "reference.inputs" in guessed else ""))
    lines.append("inputs = [" + (f"  {GUESS}" if "reference.inputs" in guessed else ""))
    lines += [f"  {input_row(r)}," for r in rows]
    lines.append("]")
    dtype = dtype or default_dtype(where.backend)
    looser = looser_rtol(ref, dtype)
    if looser is not None:
        c = ref.comparison
        lines += ["", "[tolerance]", f"rtol = {looser[0]!r}  # the test's own rtol ({c.compared_by}, {c.file}:{c.line}); "
                                     f"flopwatch's {dtype} default is {looser[1]!r}"]
    files = {REFERENCE_FILE: ref.sliced} if ref.sliced else {}
    return draft(name, folder, lines, op, todo, guessed, where.include_dir, entry=where.entry, reference=label,
                 files=files)


def _header(label: str, where: Where, entry: Entry, name: str, op: str) -> list[str]:
    return [first_line(label), drafted_by(f"{where.rel} (function {entry.name})"),
            f'name = "{name}"', f'op = "{op}"', f'backend = "{where.backend}"']


def _binding(where: Where, returns: bool) -> list[str]:
    return binding("triton" if where.backend == "triton" else "python", where.entry, returns)


def _devices(where: Where) -> list[str]:
    if where.backend == "triton":
        return []  # Triton's default: the GPUs (cuda, rocm)
    why = ("its extension builds for the CPU and for GPUs" if where.extension_from else
           "plain torch: runs on the CPU too") if "cpu" in where.devices else "imports GPU-only code"
    return [f"devices = {json.dumps(list(where.devices))}  # {why}"]


def _extensions(where: Where, folder: str) -> list[str]:
    if not where.extension_from:
        return []
    return extensions(from_folder(folder, where.extension_from),
                      "the extension the package loads (its TORCH_LIBRARY ops)")


def _call_text(ref: Reference, folder: str) -> str:
    if ref.kind == "convention":
        return f"{ref.module}:{ref.name}" if ref.module else f"{from_folder(folder, ref.file)}:{ref.name}"
    c = ref.comparison
    if ref.sliced:
        return f"{REFERENCE_FILE}:{REFERENCE_FUNCTION}"
    if c.other_local:
        return f"{from_folder(folder, c.file)}:{c.other}"
    module, _, last = c.other.rpartition(".")
    if module == "torch":
        return c.other  # "torch.add": a torch function, as the contract writes it
    return f"{module}:{last}" if module else c.other
