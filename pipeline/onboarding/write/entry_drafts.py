"""The drafts of a Python module's entries, each checked against the reference the repository
already trusts (`decide.references`: its own first, a built-in op its name says then its peer
where they agree), timed at the sizes the repository benchmarks it at (`decide.bench_sizes`,
`decide.scaling`; a `# sizes:` line says where from, the test's own size a `[[check]]`), and why
each public function not drafted is not.

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
from pipeline.onboarding.decide.bench_sizes import for_reference, static_sweeps
from pipeline.onboarding.decide.devices import entry_placement
from pipeline.onboarding.decide.dtypes import default_dtype
from pipeline.onboarding.decide.inputs import keywords, looser_rtol, table
from pipeline.onboarding.decide.ops import builtin
from pipeline.onboarding.decide.passes import FORWARD_ONLY, Passes, passes
from pipeline.onboarding.decide.peer import agreement, peer_inputs
from pipeline.onboarding.decide.scaling import local_gpu, scaled_reference, target
from pipeline.onboarding.decide.sizes import Sized, builtin_sizes
from pipeline.onboarding.decide.sliced_reference import REFERENCE_FILE, REFERENCE_FUNCTION, function_alone
from pipeline.onboarding.source.records import (
    Draft,
    Entry,
    Inputs,
    LibraryOp,
    Reference,
    RunSizes,
    Skipped,
    Where,
)
from pipeline.onboarding.source.repo import is_test
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
    one_line,
    reference_label,
    variant_name,
)
from workers.ops import OPS


def module_drafts(repo, rel: str, out_dir: str, taken: set[str], skipped: list | None = None,
                  record=None) -> list[Draft]:
    """Every public top-level function of a module as an entry, each with the reference the
    repository trusts; `skipped` gets a `Skipped` for each public function not drafted.
    `record(repo, rel, where, entries, same_as) -> {entry: RunSizes}`: the run stage that runs
    the benchmark scripts reaching the entries under the recorder (`pipeline.onboarding.bench_runs`),
    where the driver hands it in."""
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
    # a public function that is another's reference by name (`selective_scan_ref`) is that
    # entry's check, not an entry of its own
    refs = references.references_beside(repo, rel, [e.name for e in found], prefix, package)
    entries = [e for e in found if e.name not in refs]
    module = dotted if dotted else ""
    same = {e.name: references.equivalents(repo, e, package, imports, module) for e in entries}
    at = Where(rel=rel, entry="", backend=backend, devices=devices, include_dir=root if root not in (".", "") else "",
               extension_from=extension)
    runs = record(repo, rel, at, entries, same) if record is not None else {}
    drafts = []
    for entry in entries:
        folder = f"{out_dir}/{variant_name(None, set(taken), entry.name)}"
        where = Where(rel=rel, entry=f"{dotted}:{entry.name}" if dotted else f"{from_folder(folder, rel)}:{entry.name}",
                      backend=backend, devices=devices, include_dir=at.include_dir, extension_from=extension)
        drafts.append(entry_draft(repo, entry, prefix, where, package, out_dir, taken, imports,
                                  runs.get(entry.name), same[entry.name]))
    if skipped is not None:
        peers = {d.entry.rsplit(":", 1)[-1]: d.peer for d in drafts}
        for ref, entry in refs.items():
            peer = peers.get(entry, "")
            skipped.append(Skipped(ref, f"the check of {entry} (its [reference], by name)" +
                                   (f"; the built-in op {peer} is {entry}'s peer" if peer else "")))
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
                imports: dict[str, str] | None = None, runs: RunSizes | None = None,
                same_as: list | None = None) -> Draft:
    """One entry's draft with the first reference found: the repository's own (by name, or a
    test comparing it with a callable of the repository) → a built-in op its name says → a
    test's comparison → the test's own statements → none. A built-in op the name says, where
    the repository's own reference is the check, may be timed as its peer (`decide.peer`)."""
    name = variant_name(None, taken, entry.name)
    folder = f"{out_dir}/{name}"
    module = where.entry.split(":")[0] if ":" in where.entry and "/" not in where.entry else ""
    if same_as is None:
        same_as = references.equivalents(repo, entry, package, imports, module)
    sweeps = [*static_sweeps(repo, same_as), *(runs.sweeps if runs else ())]
    ref = builtin(entry.name, prefix, list(entry.params), entry.required, entry.returns)
    if ref is not None and not references.repository_reference(repo, entry, where, prefix, package, same_as):
        calls = references.calls_in_tests(repo, same_as)
        return _builtin_draft(repo, entry, ref, where, name, folder, same_as, calls, sweeps, runs,
                              passes(repo, entry, package, same_as))
    chosen, inputs = references.choose(repo, entry, where, prefix, package, same_as)
    return _reference_draft(repo, entry, chosen, inputs, where, name, folder, same_as, sweeps, runs, ref,
                            passes(repo, entry, package, same_as))


def _goal(where: Where, dtype: str):
    """The device the test's sizes are scaled for: this node's GPU, else the draft's GPU kinds
    (a Triton draft runs on both vendors' GPUs)."""
    devices = ("cuda", "rocm") if where.backend == "triton" else where.devices
    return target(devices, dtype, local_gpu())


def _sizes_lines(label: str, shapes: list) -> list[str]:
    """The timed `shapes`, with the line saying where they come from above them."""
    return [f"# sizes: {one_line(label)}", f"shapes = {_shapes_text(shapes)}"]


def _check_lines(check: list, where: str, rtol: list[str] = ()) -> list[str]:
    """The test's own size, only checked (`[[check]]`), at the test's own rtol where it allows
    more than the dtype's default (flopwatch's rtol is a relative Frobenius error: a test's
    tighter elementwise bound is no tighter one); the timed sizes are checked at the dtype's."""
    if not check:
        return []
    return ["", "[[check]]", f"shapes = {_shapes_text(check)}  # the test's own size ({where}): checked, not timed",
            *rtol]


def _shapes_text(shapes: list) -> str:
    return "[" + ", ".join(json.dumps(s) if isinstance(s, list) else inline(s) for s in shapes) + "]"


def _builtin_draft(repo, entry: Entry, ref: Reference, where: Where, name: str, folder: str, same_as,
                   calls, sweeps: list, runs: RunSizes | None, measured: Passes = FORWARD_ONLY) -> Draft:
    op = ref.op
    dtype_hint = next((a.dtype for c in calls for a in (*c.args, *c.kwargs.values()) if a.dtype), "")
    sized = builtin_sizes(repo, entry, ref, same_as, calls, where.backend, sweeps,
                          _goal(where, dtype_hint or default_dtype(where.backend)), runs.note if runs else "")
    shapes, dtype, guessed = sized.shapes, sized.dtype, sized.guessed
    label = reference_label(ref)
    lines = _header(label, where, entry, name, op)
    lines.append(f'dtypes = ["{dtype}"]' + (f"  {GUESS}" if "dtypes" in guessed else ""))
    if "shapes" in guessed:
        lines.append(f"shapes = {json.dumps(shapes)}  {GUESS}: sizes {list(OPS[op].DIMS)}")
    else:
        lines += _sizes_lines(sized.label, shapes)
    lines += _devices(where)
    lines += _modes(measured)
    lines += _binding(where, entry.returns)
    passed = leading(list(ref.mapped))
    if passed != default_order(op, entry.returns):
        lines.append(f"args = {json.dumps(passed)}")
    lines += _extensions(where, folder)
    lines += _check_lines(sized.check, sized.check_where)
    todo = [(f"{', '.join(guessed)}: no script or test of the repository calls {entry.name} with tensors "
             f"flopwatch can read")] if guessed else []
    return draft(name, folder, lines, op, todo, guessed, where.include_dir, entry=where.entry, reference=label,
                 sizes=sized.label if "shapes" not in guessed else "a guess: " + sized.label)


def _reference_draft(repo, entry: Entry, ref: Reference, inputs: Inputs, where: Where, name: str, folder: str,
                     same_as, sweeps: list, runs: RunSizes | None, builtin_op: Reference | None,
                     measured: Passes = FORWARD_ONLY) -> Draft:
    op = re.sub(r"[^a-z0-9_]", "_", name.lower())
    todo: list[str] = []
    guessed: list[str] = []
    sizes, rows, dtype, guess_why = table(inputs)
    if inputs.guessed or guess_why:
        guessed.append("reference.inputs")
        todo.append(f"reference.inputs: {guess_why or f'no test of the repository calls {entry.name}; its parameters'} "
                    f"— the shapes are a guess")
    shapes, check, sized = _reference_sizes(inputs, bool(guess_why), rows, sizes, dtype, where, same_as, sweeps,
                                            runs)
    dtype = (sized.dtype if sized is not None and sized.dtype else dtype)
    files: dict[str, str] = {REFERENCE_FILE: ref.sliced} if ref.sliced else {}
    alone, needs = _taken_alone(repo, ref)
    if alone:
        files[REFERENCE_FILE] = alone
    label = reference_label(ref) + (f", taken alone into {REFERENCE_FILE}" if alone else "")
    lines = _header(label, where, entry, name, op)
    dtype_guess = not dtype
    lines.append(f'dtypes = ["{dtype or default_dtype(where.backend)}"]' + (f"  {GUESS}" if dtype_guess else ""))
    if dtype_guess:
        guessed.append("dtypes")
    if shapes:
        lines += _sizes_lines(sized.label, shapes)
    lines += _devices(where)
    lines += _modes(measured)
    lines += _binding(where, entry.returns)
    entry_kwargs, reference_kwargs = keywords(entry, ref, inputs)
    if entry_kwargs:
        lines.append(f"kwargs = {inline(entry_kwargs)}  # as the test calls it")
    lines += _extensions(where, folder)
    lines += ["", "[reference]"]
    peer = ""
    if ref.kind == "none":
        lines.append(CHECK_NONE)
        todo.append(f"reference: none found for {entry.name}; name one (call = \"file.py:fn\") to check it"
                    + "".join(f"; {n}" for n in ref.notes))
    else:
        lines.append(f'call = "{f"{REFERENCE_FILE}:{ref.name}" if alone else _call_text(ref, folder)}"'
                     + (f"  # needs the test-only package {needs}: pip install {needs}" if needs else ""))
        lines.append(f'found = "{ref.kind}"')
        lines.append(f'where = "{ref.file}:{ref.line}"')
        if reference_kwargs:
            lines.append(f"kwargs = {inline(reference_kwargs)}  # as the test calls it")
        if needs:
            todo.append(f"reference: {ref.file} imports the test-only package {needs} and {ref.name} cannot be "
                        f"taken without it: pip install {needs} where the jobs run")
        if builtin_op is not None:
            peer_lines, peer = _peer(repo, ref, builtin_op, inputs, rows, sizes, folder, alone or ref.sliced,
                                     reference_kwargs)
            lines += peer_lines
    if sizes:
        lines.append("sizes = { " + ", ".join(f"{k} = {v}" for k, v in sizes.items()) + " }"
                     + (f"  {GUESS}" if "reference.inputs" in guessed else ""))
    lines.append("inputs = [" + (f"  {GUESS}" if "reference.inputs" in guessed else ""))
    lines += [f"  {input_row(r)}," for r in rows]
    lines.append("]")
    dtype = dtype or default_dtype(where.backend)
    looser = looser_rtol(ref, dtype)
    rtol = []
    if looser is not None:
        c = ref.comparison
        rtol = [(f"rtol = {looser[0]!r}  # the test's own rtol ({c.compared_by}, {c.file}:{c.line}); "
                 f"flopwatch's {dtype} default is {looser[1]!r}")]
    if ref.kind != "none" and check:
        # the test's size at the test's tolerance; the timed sizes at the dtype's
        lines += _check_lines(check, inputs.where, rtol)
    elif rtol:
        lines += ["", "[tolerance]", *rtol]
    return draft(name, folder, lines, op, todo, guessed, where.include_dir, entry=where.entry, reference=label,
                 files=files, sizes=sized.label if sized is not None else "", peer=peer)


def _reference_sizes(inputs: Inputs, guessed: bool, rows, sizes: dict, dtype: str, where: Where,
                     same_as, sweeps: list, runs: RunSizes | None) -> tuple[list, list, Sized | None]:
    """(timed size tables, the test's own to check, where they come from) of a `[reference]`
    draft: the sweeps that call the entry, else the test's sizes scaled by the rule, else
    nothing beyond `[reference] sizes` (inputs that are a guess are not scaled)."""
    note = f"{runs.note}; " if runs is not None and runs.note else ""
    taken = for_reference(rows, sizes, same_as, sweeps)
    if taken is not None:
        check = [sizes] if inputs.where and not (inputs.guessed or guessed) and sizes not in taken.shapes else []
        return list(taken.shapes), check, Sized(list(taken.shapes), taken.dtype, [], taken.label)
    if inputs.guessed or guessed or not inputs.where or not sizes:
        return [], [], None
    named = {n for a in inputs.args for n in a.sizes}
    varied = {n for a in inputs.args for n in a.varied}
    job = dtype or default_dtype(where.backend)
    grown, why, stop = scaled_reference(rows, sizes, job, _goal(where, job), named, varied)
    if grown == sizes:
        return [], [], Sized([], "", [], f"{note}the test's own sizes, {inputs.where} (not scaled: {stop})")
    return [grown], [sizes], Sized([grown], "", [], f"{note}scaled from {inputs.where}: {why}; {stop}")


def _taken_alone(repo, ref: Reference) -> tuple[str, str]:
    """(the text of a `reference.py` holding a reference by name that lives in a test module,
    with what it needs of that module, "") where that module imports a test-only package; ("",
    the package) where the reference itself needs one; ("", "") otherwise."""
    if ref.kind != "convention" or not is_test(ref.file) or ref.module or repo.tree(ref.file) is None:
        return "", ""
    return function_alone(repo.tree(ref.file), ref.name, ref.file)


def _peer(repo, ref: Reference, builtin_op: Reference, inputs: Inputs, rows, sizes: dict, folder: str,
          own_file: str, reference_kwargs: dict) -> tuple[list[str], str]:
    """The `[reference] peer` line of a built-in op the entry's name says, where it agrees with
    the repository's reference on the test's inputs (`decide.peer`): ([lines], the op), or a
    comment saying why it is not the peer."""
    mapping = peer_inputs(builtin_op, inputs, rows)
    if mapping is None:
        return [f"# not timed against the built-in {builtin_op.op}: its inputs are not among this entry's"], ""
    call = f"{REFERENCE_FILE}:{ref.name if not ref.sliced else REFERENCE_FUNCTION}" if own_file \
        else _call_text(ref, folder)
    verdict = agreement(repo, call, folder, own_file, rows, sizes, builtin_op.op, mapping, reference_kwargs)
    text = f"peer = {{ op = \"{builtin_op.op}\", inputs = {inline(mapping)} }}"
    if verdict.agrees is False:
        return [f"# not timed against the built-in {builtin_op.op}: {verdict.detail}"], ""
    if verdict.agrees is None:  # left to the user: a peer that cannot run beside the reference would fail its rows
        return [(f"# {text}  # the built-in {builtin_op.op} as its peer is unverified ({verdict.detail}): "
                 f"uncomment to time it beside the reference")], ""
    return [f"{text}  # timed as its peer: {verdict.detail}"], builtin_op.op


def _header(label: str, where: Where, entry: Entry, name: str, op: str) -> list[str]:
    return [first_line(label), drafted_by(f"{where.rel} (function {entry.name})"),
            f'name = "{name}"', f'op = "{op}"', f'backend = "{where.backend}"']


def _modes(measured: Passes) -> list[str]:
    """The `modes` line of an entry whose output carries an autograd graph, saying what says so;
    none for forward alone (the default)."""
    if not measured.differentiated:
        return []
    return [f"modes = {json.dumps(list(measured.modes))}  # {measured.why}"]


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
