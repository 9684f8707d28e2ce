"""The drafts of kernels that live behind Python, as the PyTorch world writes them:

- a KernelBench problem (`class Model` + `get_inputs()`): its Model measured as the peer of its
  op (`[problem]`); a solution (`class ModelNew`) measured against the problem it answers, with
  its load_inline extensions or Triton kernels;
- a torch extension the repository builds with `torch.utils.cpp_extension`: one `backend =
  "torch"` draft per function its module exports, called as the authors call it (`O =
  minimal_attn.forward(q, k, v)`: `returns = true`), and one per TORCH_LIBRARY operator it
  registers (through the package's wrapper where a test tells its inputs, else from the schema).

Every draft is a valid manifest: what cannot be told is a best guess on a line marked
`# TODO (guess)`, listed in the draft's `todo` and `guessed`."""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

from pipeline.onboarding.conventions import torch_extension, torch_library
from pipeline.onboarding.conventions.ref_names import defined_anywhere
from pipeline.onboarding.decide.arguments import default_order, leading
from pipeline.onboarding.decide.devices import runs_on_cpu, solution_backend
from pipeline.onboarding.decide.dtypes import dtype_of, kind_of, pointer_dtype
from pipeline.onboarding.decide.evidence import tensors_passed
from pipeline.onboarding.decide.ops import builtin_for_operator, op_from_params
from pipeline.onboarding.decide.sizes import DEFAULT_SHAPES, shape_of
from pipeline.onboarding.source.records import Draft, Exported, Extensions, LibraryOp, Problem
from pipeline.onboarding.write.entry_drafts import wrapper_draft
from pipeline.onboarding.write.manifest import (
    CHECK_NONE,
    GUESS,
    binding,
    common_lines,
    devices_line,
    draft,
    extensions,
    first_line,
    from_folder,
    variant_name,
)
from workers.ops import OPS

# The rule a problem's rows are judged by (`workers.ops.kernelbench`), written commented in the
# drafts so that a user coming from KernelBench sees the choice.
RULE_LINE = ('# rule = "fp64"  # how rows are judged: "fp64" (default: the Model in fp64, the problem\'s tolerances),\n'
             '#   "kernelbench" (KernelBench today: allclose to the Model in the job\'s dtype, atol=rtol=1e-4 fp32,\n'
             '#   1e-2 fp16/bf16) or "kernelbench-v0" (1e-2 for all)')
_SCALAR_TYPES = {"float": 0.5, "int": 2, "SymInt": 2, "bool": True, "Scalar": 0.5}


def problem_draft(repo, problem: Problem, out_dir: str, taken: set[str]) -> Draft:
    """A KernelBench problem: its Model measured as the op's peer, with its own inputs."""
    rel = problem.file
    name = variant_name(None, taken, PurePosixPath(rel).stem)
    folder = f"{out_dir}/{name}"
    entry = f"{from_folder(folder, rel)}:Model"
    lines = common_lines(name, problem.op, "python", f"{rel} (a problem: class Model, get_inputs())")
    lines += ['dtypes = ["fp32"]', devices_line(runs_on_cpu(repo.text(rel))),
              "peer = true  # the problem's Model: the reference every solution is compared with", "",
              "[problem]", f'file = "{from_folder(folder, rel)}"', RULE_LINE, *binding("python", entry)]
    return draft(name, folder, lines, problem.op, entry=entry)


def solution_draft(repo, rel: str, problem: Problem, guessed_problem: bool, out_dir: str, taken: set[str]) -> Draft:
    """A KernelBench solution (`class ModelNew`) measured against its problem's Model."""
    name = variant_name(None, taken, PurePosixPath(rel).stem)
    folder = f"{out_dir}/{name}"
    text = repo.text(rel)
    specs = torch_extension.extensions(repo, rel).specs
    backend = solution_backend(text, specs)
    todo, guessed = [], []
    lines = common_lines(name, problem.op, backend, f"{rel} (a solution: class ModelNew)")
    # The problem's Model runs beside the solution (reference, peer): both must run on a device.
    lines += ['dtypes = ["fp32"]', devices_line(runs_on_cpu(text, repo.text(problem.file), specs=specs)), "",
              "[problem]", f'file = "{from_folder(folder, problem.file)}"'
              + (f"  {GUESS}: the problem this solution answers" if guessed_problem else ""), RULE_LINE]
    if guessed_problem:
        todo.append(f"problem.file: {problem.file} is a guess (no problem file named after {rel})")
        guessed.append("problem.file")
    entry = f"{from_folder(folder, rel)}:ModelNew"
    lines += binding("triton" if backend == "triton" else "python", entry)
    if specs:
        lines += extensions(from_folder(folder, rel), ", ".join(s.name for s in specs))
    return draft(name, folder, lines, problem.op, todo, guessed, entry=entry)


def extension_drafts(repo, found: Extensions, out_dir: str, taken: set[str],
                     wrapped: dict[str, str] | None = None) -> tuple[list[Draft], list[str]]:
    """One `backend = "torch"` draft per function each extension built in the file exports (a
    load() / setup.py extension's PYBIND11_MODULE, or load_inline's `functions`) and per
    TORCH_LIBRARY operator it registers; notes for what could not be read. A function a drafted
    Python entry's package calls (`wrapped`: `module.function` → where) is measured through that
    entry and not drafted again on its own (causal-conv1d's `causal_conv1d_cuda.causal_conv1d_fwd`
    beside `causal_conv1d_fn`)."""
    if found.error:
        return [], [found.error]
    drafts: list[Draft] = []
    notes: list[str] = []
    for spec in found.specs:
        for op in torch_library.library_ops(repo, spec.sources):
            drafts.append(library_op_draft(repo, op, spec, out_dir, taken))
        for fn in torch_extension.exported(repo, spec):
            called = (wrapped or {}).get(f"{spec.module.rsplit('.', 1)[-1]}.{fn.py_name}")
            if called:
                notes.append(f"{spec.module}.{fn.py_name}: called by the drafted entries' package ({called}): "
                             f"measured through those entries, not drafted on its own")
                continue
            drafts.append(_function_draft(repo, spec, fn, out_dir, taken))
    return drafts, notes


def _function_draft(repo, spec, fn: Exported, out_dir: str, taken: set[str]) -> Draft:
    name = variant_name(None, taken, f"{spec.name}_{fn.py_name}" if fn.py_name not in ("forward", "run", "main")
                        else spec.name)
    folder = f"{out_dir}/{name}"
    kinds = ["tensor" if torch_extension.returns_tensor(p.type) else kind_of(p) for p in fn.params]
    op, mapped = op_from_params(fn.py_name + " " + spec.name, [p.name for p in fn.params], fn.returns, kinds)
    if not op or not all(mapped):  # a parameter the op does not take: it computes something else
        return _unchecked_function_draft(repo, spec, fn, name, folder, kinds)
    todo: list[str] = []
    guessed: list[str] = []
    lines = common_lines(name, op, "torch", f"{spec.origin} ({spec.kind} of extension {spec.name!r}, "
                                            f"function {fn.py_name})")
    made = tensors_passed(repo, (f".{fn.py_name}", fn.py_name), len(OPS[op].INPUTS))
    dtype = pointer_dtype(fn.body_text) or dtype_of(made)[0]
    if not dtype:
        dtype = "fp32"
        guessed.append("dtypes")
        todo.append("dtypes: neither the kernels' pointer types nor the repository's scripts tell the dtype")
    lines.append(f'dtypes = ["{dtype}"]' + (f"  {GUESS}" if "dtypes" in guessed else ""))
    shapes = shape_of(made, op)
    if shapes:
        lines.append(f"shapes = {json.dumps(shapes)}  # from the tensors the repository's scripts pass")
    else:
        lines.append(f"shapes = {json.dumps(DEFAULT_SHAPES[op])}  {GUESS}: sizes {list(OPS[op].DIMS)}")
        guessed.append("shapes")
    if not spec.cuda:
        lines.append('devices = ["cpu"]  # a C++ extension')
    lines += ["", "[binding]", 'kind = "pybind11"', f'module = "{spec.module}"', f'entry = "{fn.py_name}"']
    if fn.returns:
        lines.append("returns = true")
    passed = leading(mapped)
    if mapped and len(passed) < len(mapped):
        todo.append(f"binding.args: {fn.py_name}'s parameters {[p.name for p, m in zip(fn.params, mapped) if not m]} "
                    f"are no {op} arguments: the call needs a hand (a wrapper, or an op.py of your own)")
        guessed.append("binding.args")
    if mapped and passed != default_order(op, fn.returns):
        lines.append(f"args = {json.dumps(passed)}")
    lines += extensions(from_folder(folder, spec.origin.rsplit(":", 1)[0]), name=spec.name)
    return draft(name, folder, lines, op, todo, guessed, entry=fn.py_name)


def _unchecked_function_draft(repo, spec, fn: Exported, name: str, folder: str, kinds: list[str]) -> Draft:
    """An extension function whose signature fits no op: an op of its own, measured unchecked
    (its output kept per commit), its tensors of guessed sizes — never a guessed built-in op,
    whose check would condemn it."""
    signature = f"{fn.py_name}({', '.join(p.name for p in fn.params)})"
    dtype = pointer_dtype(fn.body_text) or "fp32"
    lines = [first_line("none found — measured as unchecked"),
             *common_lines(name, re.sub(r"[^a-z0-9_]", "_", name.lower()), "torch",
                           f"{spec.origin} ({spec.kind} of extension {spec.name!r}, function {fn.py_name})")]
    lines.append(f'dtypes = ["{dtype}"]' + ("" if pointer_dtype(fn.body_text) else f"  {GUESS}"))
    if not spec.cuda:
        lines.append('devices = ["cpu"]  # a C++ extension')
    lines += ["", "[binding]", 'kind = "pybind11"', f'module = "{spec.module}"', f'entry = "{fn.py_name}"']
    if fn.returns:
        lines.append("returns = true")
    lines += extensions(from_folder(folder, spec.origin.rsplit(":", 1)[0]), name=spec.name)
    lines += ["", "[reference]", CHECK_NONE, f"sizes = {{ M = 1024, N = 1024 }}  {GUESS}: {signature} fits no op",
              "inputs = ["]
    # where it returns nothing it writes into a tensor it is handed: one named as an output is, else
    # the last one it may write (C functions take their output last)
    tensors = [p for p, kind in zip(fn.params, kinds) if kind == "tensor"]
    writable = [p for p in tensors if "const" not in p.type]
    output = None if fn.returns else next((p for p in tensors if re.search(r"^(out|output|dst|result|y|c)$|_out$",
                                                                            p.name, re.IGNORECASE)),
                                          writable[-1] if writable else None)
    for p, kind in zip(fn.params, kinds):
        if kind == "tensor":
            lines.append(f'  {{ name = "{p.name}", shape = ["M", "N"]' + (", output = true" if p is output else "")
                         + " },")
        else:
            lines.append(f'  {{ name = "{p.name}", value = {1.0 if kind == "float" else 1} }},  {GUESS}: a {p.type}')
    lines.append("]")
    todo = [(f"op: {signature} fits no op as flopwatch reads it: measured unchecked on guessed inputs; name its "
             f"reference ([reference] call) and its inputs to check it")]
    guessed = ["reference.inputs"] + ([] if pointer_dtype(fn.body_text) else ["dtypes"])
    return draft(name, folder, lines, re.sub(r"[^a-z0-9_]", "_", name.lower()), todo, guessed, entry=fn.py_name,
                 reference="none found — measured as unchecked")


def library_op_draft(repo, op: LibraryOp, spec, out_dir: str, taken: set[str]) -> Draft:
    """A TORCH_LIBRARY operator as its own op (contract: the `[reference]` table): called
    through the package's wrapper where it has one and a test tells the wrapper's inputs (drafted
    as the repository's other Python entries are), else with inputs from the schema, devices
    from the TORCH_LIBRARY_IMPL blocks, checked against the repository's reference where one is
    found by name, else measured unchecked."""
    entry, where, wrapper = torch_library.wrapper_of(op, spec.module.split(".")[0], repo)
    if wrapper is not None:
        drafted = wrapper_draft(repo, op, spec, entry, where, wrapper, out_dir, taken)
        if drafted is not None:
            return drafted
    name = variant_name(None, taken, op.name)
    folder = f"{out_dir}/{name}"
    todo: list[str] = []
    guessed: list[str] = []
    written = [a for a in op.args if a.tensor and a.written]
    returns = op.returns.strip() not in ("()", "") and not written
    lines = common_lines(name, op.name, "torch", f"{op.origin} (TORCH_LIBRARY({op.ns}) operator "
                                                 f"{op.name}, built by {spec.origin})")
    dtype = pointer_dtype("\n".join(repo.text(s) for s in spec.sources)) or ""
    if not dtype:
        dtype = "fp32"
        guessed.append("dtypes")
        todo.append("dtypes: neither the kernels' pointer types nor the repository's scripts tell the dtype")
    lines.append(f'dtypes = ["{dtype}"]' + (f"  {GUESS}" if "dtypes" in guessed else ""))
    lines.append(f"devices = {json.dumps(list(op.devices) or ['cuda'])}  # the TORCH_LIBRARY_IMPL blocks with a "
                 f"kernel for {op.name}" if op.devices else
                 f'devices = ["cuda"]  {GUESS}: no TORCH_LIBRARY_IMPL block names {op.name}')
    if not op.devices:
        guessed.append("devices")
    called = entry or op.qualname
    lines += ["", "[binding]", 'kind = "python"', f'entry = "{called}"' + (f"  # {where}: calls {op.qualname}"
                                                                              if entry else "")]
    if returns:
        lines.append("returns = true")
    origin = from_folder(folder, spec.origin.rsplit(":", 1)[0])
    builtin = builtin_for_operator(op, returns)
    if builtin:
        # A built-in op first, as for every entry: its fp64 reference, its peer, its sizes.
        lines[lines.index(f'op = "{op.name}"')] = f'op = "{builtin}"'  # `common_lines`' op line
        label = f"built-in op {builtin} (by its name and its {len(OPS[builtin].INPUTS)} tensors)"
        lines.insert(0, first_line(label))
        lines.insert(lines.index("[binding]") - 1, f"shapes = {json.dumps(DEFAULT_SHAPES[builtin])}  "
                                                    f"{GUESS}: sizes {list(OPS[builtin].DIMS)}")
        guessed.append("shapes")
        lines += extensions(origin, name=spec.module)
        return draft(name, folder, lines, builtin, todo, guessed, entry=called, reference=label)
    lines += ["", "[reference]"]
    call, ref_where = defined_anywhere(repo, op.name)
    # the first line says what it is checked against, as the other entries' drafts do
    label = f"{call} (by name, {ref_where})" if call else "none found — measured as unchecked"
    lines.insert(0, first_line(label))
    if call:
        lines += [f'call = "{from_folder(folder, call.split(":")[0])}:{call.split(":")[1]}"', 'found = "convention"',
                  f'where = "{ref_where}"']
    else:
        lines.append(CHECK_NONE)
    lines.append(f"sizes = {{ N = 4096 }}  {GUESS}: a 1-D size for every tensor argument")
    guessed.append("reference.sizes")
    todo.append(f"reference.sizes: the schema of {op.name} gives no sizes; every tensor is guessed 1-D of N")
    inputs = []
    for a in op.args:
        if a.tensor:
            inputs.append(f'  {{ name = "{a.name}", shape = ["N"]' + (", output = true" if a.written else "") + " },")
        elif a.type.rstrip("?") in _SCALAR_TYPES:
            value = _SCALAR_TYPES[a.type.rstrip("?")]
            inputs.append(f'  {{ name = "{a.name}", value = {json.dumps(value)} }},  {GUESS}: a {a.type}')
        else:
            inputs.append(f'  {{ name = "{a.name}", value = 0 }},  {GUESS}: a {a.type} flopwatch cannot make')
            todo.append(f"reference.inputs: {a.name} is a {a.type}")
    lines += ["inputs = [", *inputs, "]"]
    lines += extensions(origin, name=spec.module)
    return draft(name, folder, lines, op.name, todo, guessed, entry=called, reference=label)
