"""The draft of one kernel or pybind11 module function: its `variant.toml` from the decided op,
dtype, layout, sizes and launch geometry, and a two-line source that includes the kernel's file
unchanged (through the header the repository itself includes it by) and instantiates a template
kernel at the launch's arguments; the kernel's folder becomes a shared include folder of
`flopwatch.toml`, so nothing of the user's code is copied."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from pipeline.onboarding.decide.evidence import DEFAULT_ARCH, kernel_backend
from pipeline.onboarding.decide.geometry import launch_geometry, template_args
from pipeline.onboarding.decide.ops import guess_op
from pipeline.onboarding.decide.sizes import DEFAULT_SHAPES, script_shapes
from pipeline.onboarding.source.records import Draft, Evidence, Kernel, Launch, PyLaunch
from pipeline.onboarding.write.manifest import draft, drafted_by, field, one_line, safe_file, variant_name
from workers.ops import OPS


def kernel_draft(kernel: Kernel, launch: Launch | PyLaunch | None, file_text: str, out_dir: str, taken: set[str],
                 constants: dict | None = None, include: str = "", evidence: Evidence | None = None,
                 base: str = "") -> Draft:
    """The variant folder for one kernel: `variant.toml` and the source that includes it
    (`include`: the repository-relative file to include, the kernel's own by default; `base`:
    the name to start from, `base_names`; `evidence`: what scripts and other files say)."""
    constants = constants or {}
    evidence = evidence or Evidence()
    include = include or kernel.file
    backend = kernel_backend(kernel, file_text, launch, evidence)
    name = variant_name(kernel, taken, base)
    folder = f"{out_dir.rstrip('/')}/{name}"
    src_dir = str(PurePosixPath(include).parent)
    guess = guess_op(kernel, file_text, evidence)
    op, module = guess.op, OPS[guess.op]
    todo = list(guess.notes)
    guesses = dict(guess.guesses)
    if src_dir in ("", "."):
        todo.append(f"{include} is at the repository root: move it into a folder (shared include folders are "
                    f"shipped to the build node, the whole repository is not)")
    ext = ".cu" if backend == "cuda" else ".hip"
    wrapper = f"{safe_file(name)}{ext}"
    if wrapper == PurePosixPath(include).name:  # a quoted include would find the wrapper itself
        wrapper = f"{safe_file(name)}_draft{ext}"
    shapes = script_shapes(op, kernel, guess.per_param, guess.layout, evidence)
    lines = [drafted_by(f"{kernel.file}:{kernel.line} ({kernel.name})"),
             f'name = "{name}"',
             field("op", f'"{op}"', guesses.get("op", "")),
             f'backend = "{backend}"', f'sources = ["{wrapper}"]']
    if len(module.LAYOUTS) > 1:
        lines.append(field("layout", f'"{guess.layout}"', guesses.get("layout", "")))
    if "alpha" in guess.args and "beta" in guess.args:
        lines.append("alpha_beta = true")
    dtypes = field("dtypes", f'["{guess.dtype}"]', guesses.get("dtypes", ""))
    lines.append(dtypes if "dtypes" in guesses or not guess.dtype_origin else f"{dtypes}  # {guess.dtype_origin}")
    if guess.output_dtype:
        lines.append(f'output_dtype = "{guess.output_dtype}"')
    origin = f"the sizes {evidence.script} uses" if shapes else "sizes to measure"
    lines.append(f"shapes = {json.dumps(shapes or DEFAULT_SHAPES[op])}  # {origin}: {list(module.DIMS)}")
    lines.append(f'arches = ["{DEFAULT_ARCH[backend]}"]')
    targs, tnote = template_args(launch, constants)
    if tnote:
        todo.append(tnote)
    if kernel.template and not targs:
        todo.append(f"template <{kernel.template}>: no launch gives its arguments; write them in {wrapper}")
    lines += ["", "[binding]"]
    table: dict = {}
    if kernel.kind == "pybind11":
        module_name = kernel.module if kernel.module != "TORCH_EXTENSION_NAME" else (evidence.module or safe_file(name))
        entry = kernel.entry
        lines += ['kind = "pybind11"', f'module = "{module_name}"', f'entry = "{entry}"']
        if guess.returns:
            lines.append("returns = true")
        if guess.explicit_args or "binding.args" in guesses:
            lines.append(field("args", json.dumps(list(guess.args)), guesses.get("binding.args", "")))
    else:
        entry = kernel.name
        lines += ['kind = "raw"', f'entry = "{entry}"',
                  field("args", json.dumps(list(guess.args)), guesses.get("binding.args", ""))]
        grid, block, table, gwhy = launch_geometry(launch, kernel, guess.per_param, module.DIMS, constants, op,
                                                   guess.layout)
        if gwhy:
            guesses["binding.grid"] = guesses["binding.block"] = gwhy
        lines += [field("grid", json.dumps(grid), gwhy), field("block", json.dumps(block), gwhy)]
        if launch is not None:
            lines.insert(1, f"# Launch geometry from {launch.file}:{launch.line}.")
    if table:
        # one name per back end: AMD calls shared memory LDS
        if backend == "hip" and "dynamic_smem_bytes" in table:
            table["dynamic_lds_bytes"] = table.pop("dynamic_smem_bytes")
        lines += ["", "[launch]", *(f"{k} = {v}" for k, v in table.items())]
    guessed = tuple(dict.fromkeys(guesses))
    todo = [f"{key} (guess): {one_line(why)}" for key, why in _unique_reasons(guesses)] + todo
    extra_dirs = tuple(str(PurePosixPath(f).parent) for f in evidence.includes)
    return draft(name, folder, lines, op, todo, guessed, src_dir, entry=entry,
                 files={wrapper: _wrapper_text(kernel, targs, include, evidence.includes)},
                 extra_include_dirs=extra_dirs)


def _unique_reasons(guesses: dict[str, str]) -> list[tuple[str, str]]:
    """(fields, why) with fields sharing one reason joined: `binding.grid, binding.block`."""
    by_reason: dict[str, list[str]] = {}
    for key, why in guesses.items():
        by_reason.setdefault(why, []).append(key)
    return [(", ".join(keys), why) for why, keys in by_reason.items()]


def _wrapper_text(kernel: Kernel, targs: list[str], include: str, more: tuple[str, ...] = ()) -> str:
    path = PurePosixPath(include)
    via = f" through {include}" if include != kernel.file else ""
    folder = str(path.parent) if str(path.parent) != "." else "the repository root"
    text = [f"// Drafted by `flopwatch new`: builds {kernel.name} from {kernel.file}{via}, unchanged;",
            f"// {folder} is a shared include folder of flopwatch.toml.",
            f'#include "{path.name}"']
    for extra in more:  # the file defining a function the module only declares
        text.append(f'#include "{PurePosixPath(extra).name}"  // defines {kernel.name} ({extra})')
    if kernel.template:
        types = ", ".join(p.type for p in kernel.params)
        args = ", ".join(targs) if targs else f"/* TODO: template arguments for <{kernel.template}> */"
        text += ["", "// The instantiation the launch in the repository's host code uses.",
                 f"template __global__ void {kernel.name}<{args}>({types});"]
    return "\n".join(text) + "\n"
