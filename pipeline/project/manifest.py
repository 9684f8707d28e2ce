"""Load and validate a variant's `variant.toml` into a `Variant` record.

Structure and types are checked by the declared format (`pipeline.project.schema.VariantManifest`:
unknown keys, wrong types, out-of-range numbers); this module checks what a type cannot say:
the sources exist inside the folder, the binding fits the back end, the shapes have the op's
sizes. Every complaint names the file and the key, so a broken manifest becomes an `invalid`
result a developer can fix without reading flopwatch's code.
"""

from __future__ import annotations

import ast
import difflib
import re
import tomllib
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from pipeline.project.config import ProjectConfig
from pipeline.project.schema import BACKENDS, DEVICE_KINDS, VariantManifest, problems
from pipeline.project.shapes import ShapeError, check_points, resolve
from pipeline.project.sweep import SweepError, points_of, source_texts, unused_axes
from workers.bindings.python_entry import PYTHON_SIDE, REPOSITORY_ROOTS, entry_parts
from workers.core import untrusted
from workers.core.params import FORWARD
from workers.core.records import Binding, Shape, Variant
from workers.ops import OPS
from workers.ops.repo import RepoOp

__all__ = ["BACKENDS", "BINDINGS", "DEVICE_KINDS", "ManifestError", "load_variant"]

BINDINGS = {
    "cpp": ("c",),
    "cuda": ("c", "raw", "pybind11"),
    "hip": ("c", "raw", "pybind11"),
    "python": ("python",),
    "triton": ("triton",),
    "torch": ("pybind11", "python"),
}
_DEFAULT_DEVICES = {"cpp": ("cpu",), "cuda": ("cuda",), "hip": ("rocm",), "python": ("cpu",),
                    "triton": ("cuda", "rocm")}
# The one name of the launch's dynamic shared memory per back end (AMD calls it LDS).
_DYNAMIC_SHARED = {"hip": "dynamic_lds_bytes", "cuda": "dynamic_smem_bytes", "torch": "dynamic_smem_bytes"}


class ManifestError(ValueError):
    """A manifest is wrong; `str()` is `<file>: <key>: <what is wrong>`, and one more such line
    for each further mistake found with it (`more`: (key, message) pairs), so that a manifest
    with two mistakes is not fixed one run at a time."""

    def __init__(self, path: str, key: str, message: str, more: list[tuple[str, str]] = ()):
        self.path, self.key = path, key
        super().__init__("\n".join(f"{path}: {k}: {m}" for k, m in [(key, message), *more]))


def missing_file(given: str, path: Path) -> str:
    """`file 'x' does not exist`, and the nearest file of the folder it names: the line already
    starts with the manifest's path from the repository root, so the folder needs no naming."""
    try:
        siblings = sorted(p.name for p in path.parent.iterdir() if p.is_file())
    except OSError:
        siblings = []
    near = difflib.get_close_matches(path.name, siblings, n=1, cutoff=0.6)
    meant = (PurePosixPath(given).parent / near[0]).as_posix() if near else ""
    return f"file {given!r} does not exist" + (f"; did you mean {meant!r}?" if near else "")


def load_variant(repo_root: Path, manifest: Path, config: ProjectConfig,
                 repo_ops: dict[str, RepoOp] | None = None) -> Variant:
    """Parse `manifest` (a `variant.toml` below `repo_root`) into a validated `Variant`;
    `repo_ops` are the ops the repository declares (`pipeline.project.discovery.find_ops`)."""
    rel = manifest.relative_to(repo_root).as_posix()
    folder = manifest.parent
    try:
        data = tomllib.loads(manifest.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(rel, "(syntax)", f"not valid TOML: {exc}") from exc
    try:
        m = VariantManifest.model_validate(data)
    except ValidationError as exc:
        (key, message), *more = problems(exc, VariantManifest)
        raise ManifestError(rel, key, message, more) from None
    bad_name = untrusted.check_name(m.name)
    if bad_name:
        raise ManifestError(rel, "name", bad_name)
    folder_rel = folder.relative_to(repo_root).as_posix()
    extra_files: list[str] = []
    problem_op = None  # the variant's own op: a [problem] file's, a [reference] table's or a [challenge] folder's
    own = [t for t, v in (("[problem]", m.problem), ("[reference]", m.reference), ("[challenge]", m.challenge))
           if v is not None]
    if len(own) > 1:
        raise ManifestError(rel, own[1].strip("[]"), f"a variant has one of [problem] (a Model is the reference), "
                                                     f"[reference] or [challenge], not {' and '.join(own)}")
    table = own[0] if own else ""
    if own and m.op in (repo_ops or {}):
        raise ManifestError(rel, "op", f"{m.op!r} is declared by {repo_ops[m.op].path}; a {table} variant "
                                       "names an op of its own")
    if m.problem is not None:
        problem_op = _problem(rel, repo_root, folder_rel, m)
        extra_files.append(problem_op.path)
    elif m.challenge is not None:
        problem_op = _challenge(rel, repo_root, folder_rel, m)
        inside = (repo_root / folder_rel).resolve()
        extra_files += [f for f in (f"{problem_op.folder}/task.yml".lstrip("/"),
                                    *(mod["path"] for mod in problem_op.modules.values()))
                        if not (repo_root / f).resolve().is_relative_to(inside)]
    elif m.reference is not None:
        problem_op = _reference(rel, repo_root, folder_rel, m, config)
        if problem_op.path and not (repo_root / problem_op.path).resolve().is_relative_to(folder.resolve()):
            extra_files.append(problem_op.path)
        if problem_op.path:
            extra_files += _packages_imported(repo_root / problem_op.path, repo_root, folder_rel, config)
    ops = {**OPS, **(repo_ops or {}), **({m.op: problem_op} if problem_op is not None else {})}
    op = _op(rel, m.op, ops)
    points = _check_points(rel, m, op, config, problem_op)
    if not m.sources and m.backend not in PYTHON_SIDE:
        raise ManifestError(rel, "sources", "missing: list the files to compile")
    for src in m.sources:
        path = _check_inside(rel, "sources", repo_root, folder, src)
        if not path.is_file():
            why = _refused(repo_root).get(path.relative_to(repo_root).as_posix())
            raise ManifestError(rel, "sources", missing_file(src, path)
                                + (f" (not extracted from the commit: {why})" if why else ""))
        if not path.is_relative_to(folder.resolve()):
            extra_files.append(path.relative_to(repo_root.resolve()).as_posix())
    # A problem's Model returns its output, as does a [reference] without an output input.
    binding = _binding(rel, m, problem_op is not None
                       and not (m.reference is not None and any(i.output for i in m.reference.inputs)))
    if m.backend in PYTHON_SIDE and binding.kind != "pybind11":
        extra_files += _entry_file(rel, repo_root, folder, binding.entry)
    allowed = {*op.INPUTS, op.OUTPUT, *op.DIMS, *getattr(op, "SCALARS", ()), "alpha", "beta"}
    if binding.returns:
        allowed.discard(op.OUTPUT)
    unknown = [a for a in binding.args if a not in allowed]
    if unknown:
        raise ManifestError(rel, "binding.args", f"{unknown} are not {m.op} arguments (known: {sorted(allowed)})"
                            + (f"; {op.OUTPUT} is returned, not passed" if op.OUTPUT in unknown else ""))
    extensions = _extensions(rel, repo_root, folder_rel, m)
    for spec in extensions:
        extra_files += [*spec["sources"], *spec["include_dirs"]]
    if m.backend in PYTHON_SIDE and binding.kind != "pybind11":
        extra_files += _entry_importable(rel, repo_root, folder_rel, binding.entry, config, m, extensions)
    if m.backend == "torch" and not extensions:
        raise ManifestError(rel, "extensions", "missing: a torch variant names the extension(s) it builds: "
                                               "[[extensions]] from = \"setup.py\" (or the file calling load())")
    if m.backend == "torch" and binding.kind == "pybind11":
        names = {s["name"] for s in extensions} | {s["module"] for s in extensions}
        if binding.module not in names:
            raise ManifestError(rel, "binding.module", f"{binding.module!r} is none of the extensions "
                                                       f"({sorted(names)})")
    for key in m.launch.model_dump(exclude_none=True):
        wanted = _DYNAMIC_SHARED.get(m.backend)
        if key in _DYNAMIC_SHARED.values() and wanted and key != wanted:
            raise ManifestError(rel, f"launch.{key}", f"the {m.backend} back end's name for it is {wanted!r}")
    layout = m.layout if m.layout is not None else op.LAYOUTS[0]
    if layout not in op.LAYOUTS:
        raise ManifestError(rel, "layout", f"{layout!r} is not a {m.op} layout (known: {list(op.LAYOUTS)})")
    if m.op in (repo_ops or {}) and problem_op is None:
        for d in m.dtypes:
            if d not in repo_ops[m.op].tolerance:
                raise ManifestError(rel, "dtypes", f"op {m.op!r} ({repo_ops[m.op].path}) has no TOLERANCE for {d}")
    if m.problem is not None and problem_op.rule != "fp64" and m.tolerance.model_dump(exclude_none=True):
        # KernelBench's rules have fixed tolerances: a [tolerance] would silently not apply.
        raise ManifestError(rel, "tolerance", f"sets the fp64 check's limits, but [problem] rule = "
                                              f"{problem_op.rule!r} judges by KernelBench's own: remove one")
    for inc in m.build.include_dirs:
        _check_node_include(rel, inc)
    if m.triton is not None and m.backend != "triton":
        raise ManifestError(rel, "triton", f"only for backend = \"triton\", not {m.backend!r}")
    if extensions and m.backend != "torch":
        raise ManifestError(rel, "extensions", f"only for backend = \"torch\" (built with torch.utils.cpp_extension), "
                                               f"not {m.backend!r}")
    devices = tuple(m.devices) or _default_devices(m.backend, extensions)
    if m.backend == "triton" and "cpu" in devices:
        raise ManifestError(rel, "devices", "Triton kernels run on GPUs only (cuda, rocm)")
    sweep_points = _points(rel, repo_root, folder_rel, m, binding, tuple(dict.fromkeys(extra_files)))
    modes = _modes(rel, m, binding)
    return Variant(
        name=m.name,
        op=m.op,
        backend=m.backend,
        folder=folder.relative_to(repo_root).as_posix(),
        sources=tuple(m.sources),
        binding=binding,
        dtypes=tuple(m.dtypes),
        shapes=tuple(_shapes(rel, m, op.DIMS, config, problem_op)),
        layout=layout,
        alpha_beta=m.alpha_beta,
        arches=tuple(m.arches),
        flags=tuple(m.build.flags),
        include_dirs=tuple(m.build.include_dirs),
        openmp=m.build.openmp,
        peer=m.peer,
        devices=devices,
        timeout_s=float(m.timeout_s if m.timeout_s is not None else config.timeout_s),
        rtol=m.tolerance.rtol,
        atol=m.tolerance.atol,
        launch=m.launch.model_dump(exclude_none=True),
        makefile=m.build.makefile,
        description=m.description,
        triton=m.triton.model_dump(exclude_unset=True) if m.triton is not None else {},
        output_dtype=m.output_dtype or "",
        repo_op=(problem_op.to_dict() if problem_op is not None
                 else repo_ops[m.op].to_dict() if m.op in (repo_ops or {}) else {}),
        extensions=tuple(extensions),
        extra_files=tuple(dict.fromkeys(extra_files)),
        points=tuple(sweep_points),
        check_points=tuple(points),
        modes=modes,
    )


def _modes(rel: str, m: VariantManifest, binding: Binding) -> tuple[str, ...]:
    """The passes a manifest asks for (`modes`); () when it names none (forward only). A pass
    other than forward starts from what the entry returns."""
    modes = tuple(m.modes)
    repeated = sorted({x for x in modes if modes.count(x) > 1})
    if repeated:
        raise ManifestError(rel, "modes", f"{repeated[0]!r} is listed twice")
    passes = [x for x in modes if x != FORWARD]
    if passes and not binding.returns:
        raise ManifestError(rel, "modes", f"{passes[0]!r} needs an entry that returns its output "
                                          "(binding.returns = true): a backward pass starts from what the entry "
                                          "returned, and an output written into a buffer the harness hands in "
                                          "carries no autograd graph")
    return modes if modes != (FORWARD,) else ()


def _points(rel: str, repo_root: Path, folder_rel: str, m: VariantManifest, binding: Binding,
            extra_files: tuple[str, ...]) -> list[dict]:
    """The points of `[params]` / `[sweep]` (`pipeline.project.sweep`), each axis read by the sources."""
    try:
        points = points_of(dict(m.params), [dict(p) for p in m.sweep.points], [dict(t) for t in m.sweep.exclude])
    except SweepError as exc:
        raise ManifestError(rel, exc.key, str(exc)) from None
    if not points:
        return []
    axes = list(points[0])
    clash = sorted(set(axes) & set(binding.kwargs))
    if clash:
        raise ManifestError(rel, f"params.{clash[0]}", "is also a binding.kwargs key; give it in one place")
    if m.peer:
        raise ManifestError(rel, "params", "a peer is the one reference of its op; it has no axes")
    texts = source_texts(repo_root, folder_rel, extra_files) + [binding.entry]
    unused = unused_axes(axes, texts)
    if unused:
        raise ManifestError(rel, f"params.{unused[0]}", f"no source of the variant reads {unused[0]!r} (a misspelt "
                                                        "axis would sweep nothing: every point the same code)")
    return points


def _op(rel: str, name: str, ops: dict):
    """The op module (built-in) or record (the repository's `op.py`) a manifest names."""
    if name not in ops:
        hint = difflib.get_close_matches(name, sorted(ops), n=1)
        raise ManifestError(rel, "op", f"{name!r} is not one of {sorted(ops)}"
                            + (f"; did you mean {hint[0]!r}?" if hint else "")
                            + " (an op of the repository's own is declared in an op.py beside its kernels: docs/ops.md)")
    return ops[name]


# A node include folder is named through a variable the node's administrator sets (e.g.
# ${THUNDERKITTENS_ROOT}/include), never as a literal path: a manifest must not point the
# compiler at an arbitrary folder of the build node (its error messages quote what it reads).
_NODE_INCLUDE = re.compile(r"\$(?:\{[A-Z][A-Z0-9_]*_(?:ROOT|DIR|PATH)\}|[A-Z][A-Z0-9_]*_(?:ROOT|DIR|PATH)\b)"
                           r"(?:/[A-Za-z0-9_.+-]+)*/?")


def _check_node_include(rel: str, entry: str) -> None:
    if not _NODE_INCLUDE.fullmatch(entry) or ".." in entry.split("/"):
        raise ManifestError(rel, "build.include_dirs",
                            f"{untrusted.one_line(entry)[:120]!r} must be ${{SOMETHING_ROOT}}/sub/folder (a variable "
                            "ending in _ROOT, _DIR or _PATH set on the node, then plain folder names); shared "
                            "headers of the repository go into include_dirs of flopwatch.toml")


def _refused(repo_root: Path) -> dict[str, str]:
    from pipeline.project.checkout import refused_members

    return refused_members(repo_root)


def _check_inside(rel: str, key: str, repo_root: Path, folder: Path, src: str) -> Path:
    """A file a manifest names lies inside the repository (the variant folder, or up from it:
    `../../flash.cu`): what is hashed and shipped is the repository's, never a file of the
    machine (`/etc/passwd`, a link to ~/.ssh)."""
    p = PurePosixPath(src)
    if p.is_absolute():
        raise ManifestError(rel, key, f"{src!r} is an absolute path; name files from the variant folder")
    path = (folder / src).resolve()
    if not path.is_relative_to(repo_root.resolve()):
        raise ManifestError(rel, key, f"{src!r} points outside the repository")
    return path


def _binding(rel: str, m: VariantManifest, problem: bool = False) -> Binding:
    b = m.binding
    output = next((i.name for i in m.reference.inputs if i.output), None) if m.reference is not None else None
    if output and b.returns:
        raise ManifestError(rel, "binding.returns", f"the entry writes into [reference] input {output!r} "
                                                    "(output = true), so it does not return its output")
    if b.kind not in BINDINGS[m.backend]:
        raise ManifestError(rel, "binding.kind", f"{b.kind!r} is not a binding of the {m.backend} back end "
                                                 f"(known: {list(BINDINGS[m.backend])})")
    if b.kind == "raw" and not (b.grid and b.block):
        raise ManifestError(rel, "binding.grid", "a raw kernel needs grid and block expressions")
    if b.kind in ("c", "raw") and (b.returns or b.kwargs):
        raise ManifestError(rel, "binding.returns" if b.returns else "binding.kwargs",
                            f"a {b.kind} entry writes into the output it is given and takes no keyword arguments")
    if m.backend in PYTHON_SIDE and b.kind != "pybind11":
        try:
            entry_parts(b.entry)
        except ValueError as exc:
            raise ManifestError(rel, "binding.entry", str(exc).removeprefix("binding.entry ")) from None
    # A problem's Model returns its output, and so does the entry measured against it.
    return Binding(kind=b.kind, entry=b.entry, module=b.module, grid=tuple(b.grid), block=tuple(b.block),
                   args=tuple(b.args), returns=b.returns or problem, kwargs=dict(b.kwargs))


def _entry_file(rel: str, repo_root: Path, folder: Path, entry: str, key: str = "binding.entry") -> list[str]:
    """The entry's file, shipped with the variant when it lies outside its folder."""
    kind, where, _ = entry_parts(entry)
    if kind != "file":
        return []
    path = _check_inside(rel, key, repo_root, folder, where)
    if not path.is_file():
        raise ManifestError(rel, key, missing_file(where, path))
    return [] if path.is_relative_to(folder.resolve()) else [path.relative_to(repo_root.resolve()).as_posix()]


def import_roots(repo_root: Path, folder_rel: str, config: ProjectConfig) -> list[str]:
    """The folders a python-side entry imports from, repository-relative, in the job's order
    (`workers.backends.python.ship_tree`): shared folders, the variant's, the root and src/."""
    roots = [*config.include_dirs, folder_rel, *REPOSITORY_ROOTS]
    return [r for r in dict.fromkeys(PurePosixPath(r).as_posix() for r in roots) if (repo_root / r).is_dir()]


def _packages_imported(path: Path, repo_root: Path, folder_rel: str, config: ProjectConfig) -> list[str]:
    """The repository's own top packages a Python file imports (`from test.utils import ...` in
    a test that holds the reference: Liger-Kernel's `test/`), found below the import roots
    without running anything: they travel with the variant, so the file imports in a job as it
    does in the repository."""
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError):
        return []
    tops = {alias.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for alias in n.names}
    tops |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
    shipped = []
    for top in sorted(tops):
        for root in import_roots(repo_root, folder_rel, config):
            if (repo_root / root / top / "__init__.py").is_file():
                shipped.append((PurePosixPath(root) / top).as_posix())
                break
    return shipped


def _entry_importable(rel: str, repo_root: Path, folder_rel: str, entry: str, config: ProjectConfig,
                      m: VariantManifest, extensions: list[dict]) -> list[str]:
    """Whether the entry will import in a job, told now without running the repository's code:
    a `pkg.module` entry is a file or package below an import root (its top package is then
    shipped), or a module installed here (torch's own); a `torch.ops.ns.op` entry has a source
    or extension that registers `ns`. Anything else would crash every job with
    ModuleNotFoundError / "operator does not exist": it is invalid here, with the fix."""
    kind, where, _ = entry_parts(entry)
    if kind == "module":
        parts = where.split(".")
        for root in import_roots(repo_root, folder_rel, config):
            base = repo_root / root
            if (base.joinpath(*parts).with_suffix(".py").is_file() or (base.joinpath(*parts) / "__init__.py").is_file()
                    or any(base.joinpath(*parts[:-1]).glob(f"{parts[-1]}.*.so"))):
                top = (PurePosixPath(root) / parts[0]).as_posix()
                return [top if (base / parts[0]).is_dir() else f"{top}.py"]
        import importlib.util

        try:
            if importlib.util.find_spec(parts[0]) is not None:  # finds the top package without importing it
                return []
        except (ImportError, ValueError):
            pass
        holders = sorted(p.parent.parent.relative_to(repo_root).as_posix() or "." for p in repo_root.rglob(f"{parts[0]}/__init__.py")
                         if ".git" not in p.parts and ".flopwatch" not in p.parts)
        fix = (f"add the folder holding package {parts[0]} ({holders[0]}) to include_dirs in flopwatch.toml"
               if holders else f"no package {parts[0]} in the repository or installed here: check the name")
        raise ManifestError(rel, "binding.entry", f"{where} cannot be imported: not under the import roots "
                                                  f"{import_roots(repo_root, folder_rel, config)}; {fix}")
    if kind == "torch_op":
        ns = where.split(".")[2]
        registers = re.compile(rf"TORCH_LIBRARY(?:_FRAGMENT)?\s*\(\s*{re.escape(ns)}\s*,|[\"']{re.escape(ns)}(?:::|[\"'])")
        files = [*(repo_root / folder_rel / src for src in m.sources),
                 *(repo_root / f for spec in extensions for f in spec["sources"])]
        texts = [f.read_text(errors="replace") for f in files if f.is_file()]
        texts += [t for spec in extensions for t in (*spec.get("cpp_sources", ()), *spec.get("cuda_sources", ()))]
        if not any(registers.search(t) for t in texts):
            raise ManifestError(rel, "binding.entry", f"{where}: nothing of the variant registers namespace {ns!r} "
                                                      f"(TORCH_LIBRARY({ns}, m) or torch.library): name the extension "
                                                      f"that does ([[extensions]] from = \"setup.py\") or the .py file "
                                                      f"that does in sources")
    return []


def _problem(rel: str, repo_root: Path, folder_rel: str, m: VariantManifest):
    """The problem file of `[problem]`, read without running it (`workers.ops.problem`)."""
    from workers.ops.problem import parse_problem
    from workers.ops.repo import OpDefinitionError

    path = _check_inside(rel, "problem.file", repo_root, repo_root / folder_rel, m.problem.file)
    if not path.is_file():
        raise ManifestError(rel, "problem.file", missing_file(m.problem.file, path))
    if m.op in OPS:
        raise ManifestError(rel, "op", f"{m.op!r} is a built-in op; a [problem] variant names its problem's own op "
                                       f"(e.g. {path.stem!r})")
    try:
        return parse_problem(path.relative_to(repo_root.resolve()).as_posix(), path.read_text(errors="replace"),
                             m.op, m.problem.flops or "", m.problem.rule)
    except OpDefinitionError as exc:
        raise ManifestError(rel, "problem.file", str(exc)) from None


def _challenge(rel: str, repo_root: Path, folder_rel: str, m: VariantManifest):
    """The problem folder of `[challenge]`, read without running it (`pipeline.project.challenge`)."""
    from pipeline.project import challenge
    from workers.ops.repo import OpDefinitionError

    folder = _check_inside(rel, "challenge.folder", repo_root, repo_root / folder_rel, m.challenge.folder)
    if not folder.is_dir():
        raise ManifestError(rel, "challenge.folder", f"folder {m.challenge.folder!r} does not exist")
    if m.op in OPS:
        raise ManifestError(rel, "op", f"{m.op!r} is a built-in op; a [challenge] variant names its problem's own op "
                                       f"(e.g. {folder.name!r})")
    entry = None
    if m.backend in PYTHON_SIDE and m.binding.kind != "pybind11":
        try:
            kind, where, _ = entry_parts(m.binding.entry)
        except ValueError:
            kind = ""
        if kind == "file":
            entry = (repo_root / folder_rel / where).resolve()
    try:
        return challenge.read(repo_root, folder, m.op, entry, m.challenge.flops or "")
    except OpDefinitionError as exc:
        raise ManifestError(rel, "challenge.folder", str(exc)) from None


def _reference(rel: str, repo_root: Path, folder_rel: str, m: VariantManifest, config: ProjectConfig):
    """The `[reference]` table, checked without running anything (`workers.ops.reference`)."""
    from workers.core.formula import ExpressionError, evaluate
    from workers.ops.reference import ReferenceOp

    t = m.reference
    if m.op in OPS:
        raise ManifestError(rel, "op", f"{m.op!r} is a built-in op, checked against its own reference; a "
                                       f"[reference] variant names an op of its own (e.g. {m.name!r})")
    if t.check == "none" and t.call:
        raise ManifestError(rel, "reference.call", 'check = "none" says there is no reference: no call')
    if t.check != "none" and not t.call:
        raise ManifestError(rel, "reference.call", 'missing: the callable the output is checked against '
                                                   '("file.py:name", "package.module:name", "torch.add"), or '
                                                   'check = "none"')
    seen: dict[str, int] = {}
    output = None
    for i, item in enumerate(t.inputs):
        key = f"reference.inputs[{i}]"
        if item.name in seen:
            raise ManifestError(rel, f"{key}.name", f"{item.name!r} is also inputs[{seen[item.name]}]")
        seen[item.name] = i
        if item.value is not None and (item.shape or item.dtype or item.high or item.output):
            raise ManifestError(rel, key, "a constant (value) has no shape, dtype, high or output")
        if item.high is not None and item.dtype is None:
            raise ManifestError(rel, f"{key}.high", 'only for integer inputs (dtype = "int64", "int32", "bool")')
        if item.output:
            if output is not None:
                raise ManifestError(rel, f"{key}.output", f"only one input is the output (inputs[{output}] is)")
            if item.dtype:
                raise ManifestError(rel, f"{key}.dtype", "the output buffer is of the job's floating dtype")
            output = i
    named = [d for item in t.inputs for d in item.shape if isinstance(d, str)]
    dims = tuple(dict.fromkeys([*named, *t.sizes]))
    if m.shapes is None:
        for i, item in enumerate(t.inputs):
            missing = [d for d in item.shape if isinstance(d, str) and d not in t.sizes]
            if missing:
                hint = difflib.get_close_matches(missing[0], sorted(t.sizes), n=1)
                raise ManifestError(rel, f"reference.inputs[{i}].shape",
                                    f"size {missing[0]!r} has no value: give it in [reference] sizes or in every "
                                    f"shape" + (f"; did you mean {hint[0]!r}?" if hint else "")
                                    + f" (sizes: {sorted(t.sizes) or 'none'})")
    if t.flops:
        try:
            evaluate(t.flops, {d: t.sizes.get(d, 1) for d in dims})
        except (ExpressionError, ZeroDivisionError) as exc:
            raise ManifestError(rel, "reference.flops", f"{exc} (sizes: {list(dims)})") from None
    path, source = "", ""
    if t.call:
        try:
            kind, where, attr = entry_parts(t.call)
        except ValueError as exc:
            raise ManifestError(rel, "reference.call", str(exc).removeprefix("binding.entry ")) from None
        folder = repo_root / folder_rel
        if kind == "file":
            _entry_file(rel, repo_root, folder, t.call, "reference.call")
            file = (folder / where).resolve()
            source = file.read_text(errors="replace")
            _check_defined(rel, file, source, attr.split(".")[0])
            path = file.relative_to(repo_root.resolve()).as_posix()
        elif kind == "module":
            path = _module_file(repo_root, where, [*config.include_dirs, folder_rel, "", "src"])
            source = (repo_root / path).read_text(errors="replace") if path else ""
    peer_name = t.call + (f" ({t.where or path})" if t.where or path else "")
    if t.peer is not None:
        peer_name = _reference_peer(rel, t)
    return ReferenceOp(name=m.op, call=t.call, inputs=tuple(i.model_dump(exclude_defaults=True) for i in t.inputs),
                       dims=dims, sizes=dict(t.sizes), flops_expr=t.flops or "", kwargs=dict(t.kwargs),
                       found=t.found, where=t.where, folder=folder_rel, path=path, source=source,
                       functions=("peer_returns",) if t.call else (), peer_name=peer_name,
                       peer_op=t.peer.op if t.peer is not None else "",
                       peer_inputs=dict(t.peer.inputs) if t.peer is not None else {})


def _reference_peer(rel: str, t) -> str:
    """`[reference] peer`: a built-in op with a torch peer returning its output, each of its
    inputs one of the table's tensor inputs; what the peer runs, in words."""
    from workers.ops import returns_peer

    op = OPS.get(t.peer.op)
    if op is None:
        hint = difflib.get_close_matches(t.peer.op, sorted(OPS), n=1)
        raise ManifestError(rel, "reference.peer.op", f"{t.peer.op!r} is not a built-in op"
                                                      + (f"; did you mean {hint[0]!r}?" if hint else ""))
    if not returns_peer(op):
        raise ManifestError(rel, "reference.peer.op", f"{t.peer.op!r} has no torch peer returning its output")
    if t.check == "none":
        raise ManifestError(rel, "reference.peer", 'check = "none": the peer is timed beside a reference')
    tensors = [i.name for i in t.inputs if i.value is None and not i.output]
    for name, arg in t.peer.inputs.items():
        if name not in tensors:
            raise ManifestError(rel, f"reference.peer.inputs.{name}", f"not a tensor input of [reference] "
                                                                      f"(tensor inputs: {tensors})")
        if arg not in op.INPUTS:
            raise ManifestError(rel, f"reference.peer.inputs.{name}", f"{arg!r} is not an input of {t.peer.op} "
                                                                      f"(its inputs: {list(op.INPUTS)})")
    missing = [a for a in op.INPUTS if a not in t.peer.inputs.values()]
    if missing:
        raise ManifestError(rel, "reference.peer.inputs", f"{t.peer.op}'s inputs {missing} are given by none "
                                                          f"of the table's inputs")
    return f"{getattr(op, 'PEER_NAME', t.peer.op)} (built-in op {t.peer.op})"


def _check_defined(rel: str, file: Path, source: str, name: str) -> None:
    """The reference's name is bound at the top of its file (a def, a class, an assignment, an
    import), read without running it."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ManifestError(rel, "reference.call", f"{file.name}:{exc.lineno}: not valid Python: {exc.msg}") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if name not in names and not any(isinstance(n, (ast.If, ast.Try)) for n in tree.body):
        hint = difflib.get_close_matches(name, sorted(names), n=1)
        raise ManifestError(rel, "reference.call", f"{file.name} defines no {name!r}"
                            + (f"; did you mean {hint[0]!r}?" if hint else ""))


def _module_file(repo_root: Path, module: str, roots: list[str]) -> str:
    """The checkout's file of a dotted module under one of the import roots, or ""."""
    rel = module.replace(".", "/")
    for root in roots:
        for candidate in (f"{rel}.py", f"{rel}/__init__.py"):
            path = repo_root / root / candidate
            if path.is_file() and path.resolve().is_relative_to(repo_root.resolve()):
                return path.resolve().relative_to(repo_root.resolve()).as_posix()
    return ""


def _extensions(rel: str, repo_root: Path, folder_rel: str, m: VariantManifest) -> list[dict]:
    """`[[extensions]]`: each table's file read statically (`workers.torch_ext.spec`), or a
    setup.py that cannot be read so run to record its extensions (`workers.torch_ext.setup_run`)."""
    if not m.extensions:
        return []
    from workers.torch_ext import setup_run
    from workers.torch_ext import spec as ext_spec

    files = repository_files(repo_root)
    found: list[dict] = []
    for i, table in enumerate(m.extensions):
        if table.sources:
            found.append(_explicit_extension(rel, i, repo_root, folder_rel, table))
            continue
        key = f"extensions[{i}].from"
        if not table.from_:
            raise ManifestError(rel, key, "missing: the file whose build call defines the extension (setup.py, or "
                                          "the file calling load()), or name and sources")
        if table.extra_cflags or table.extra_cuda_cflags or table.extra_ldflags or table.include_dirs:
            raise ManifestError(rel, f"extensions[{i}]", "flags and include_dirs go with sources; with from, "
                                                         "they are read from the file")
        path = _check_inside(rel, key, repo_root, repo_root / folder_rel, table.from_)
        if not path.is_file():
            raise ManifestError(rel, key, missing_file(table.from_, path))
        origin = path.relative_to(repo_root.resolve()).as_posix()
        try:
            # static read first; a setup.py it cannot read is run in a sandboxed child
            specs = setup_run.read_extensions(origin, path.read_text(errors="replace"), repo_root, files)
            if not specs:
                raise ManifestError(rel, key, f"{origin} makes no torch.utils.cpp_extension load(), load_inline(), "
                                              "CUDAExtension() or CppExtension() call")
            picked = [ext_spec.select(specs, table.name, origin)] if table.name else specs
        except (ext_spec.ExtensionReadError, setup_run.SetupRunError) as exc:
            raise ManifestError(rel, key, exc if isinstance(exc, ext_spec.ExtensionReadError)
                                else f"{origin}: {exc}") from None
        found += [s.to_dict() for s in picked]
    return found


def _explicit_extension(rel: str, i: int, repo_root: Path, folder_rel: str, table) -> dict:
    """An extension described in the manifest itself, for a build that cannot be read."""
    from workers.torch_ext.spec import ExtensionSpec

    if not table.name:
        raise ManifestError(rel, f"extensions[{i}].name", "missing: the extension's module name (TORCH_EXTENSION_NAME)")
    folder = repo_root / folder_rel
    files, dirs = [], []
    for src in table.sources:
        path = _check_inside(rel, f"extensions[{i}].sources", repo_root, folder, src)
        if not path.is_file():
            raise ManifestError(rel, f"extensions[{i}].sources", missing_file(src, path))
        files.append(path.relative_to(repo_root.resolve()).as_posix())
    for inc in table.include_dirs:
        path = _check_inside(rel, f"extensions[{i}].include_dirs", repo_root, folder, inc)
        dirs.append(path.relative_to(repo_root.resolve()).as_posix() or ".")
    return ExtensionSpec(name=table.name, module=table.name, kind="load", origin=f"{rel} [[extensions]]",
                         sources=tuple(files), extra_cflags=tuple(table.extra_cflags),
                         extra_cuda_cflags=tuple(table.extra_cuda_cflags), extra_ldflags=tuple(table.extra_ldflags),
                         include_dirs=tuple(dirs)).to_dict()


# Folders never searched for a repository's files (build output, caches, other tools').
_SKIP_DIRS = {".git", ".flopwatch", "node_modules", "__pycache__", "build", "dist", ".venv"}


def repository_files(repo_root: Path) -> frozenset[str]:
    """Every file of the checkout, repository-relative (what an extension's glob may match)."""
    out = []
    for path in repo_root.rglob("*"):
        parts = path.relative_to(repo_root).parts
        if any(p in _SKIP_DIRS for p in parts[:-1]) or not path.is_file():
            continue
        out.append("/".join(parts))
    return frozenset(out)


def _default_devices(backend: str, extensions: list[dict]) -> tuple[str, ...]:
    if backend != "torch":
        return _DEFAULT_DEVICES[backend]
    from workers.torch_ext.spec import ExtensionSpec  # the reader's module is only needed for torch variants

    return ("cuda", "rocm") if any(ExtensionSpec.from_dict(s).cuda for s in extensions) else ("cpu",)


def _shapes(rel: str, m: VariantManifest, dims: tuple[str, ...], config: ProjectConfig,
            problem=None) -> list[Shape]:
    raw = m.shapes
    if raw is None or raw == "*":
        if m.peer:
            return []  # a peer runs at every shape the op's other variants use (a problem's: and its own)
        if m.challenge is not None:
            return [Shape(dict(d)) for d in problem.benchmarks]  # task.yml's benchmarks:
        if problem is not None:
            # the sizes the problem file sets, or [reference] sizes
            return [Shape(dict(getattr(problem, "sizes", None) or problem.defaults))]
        raise ManifestError(rel, "shapes", "missing: give a list of shapes or a shape-set name")
    try:
        return resolve("shapes", raw, m.op, dims, config.shape_sets, _fill(m, dims))
    except ShapeError as exc:
        raise ManifestError(rel, exc.key, str(exc)) from None


def _fill(m: VariantManifest, dims: tuple[str, ...]) -> dict:
    """The sizes a [reference] shape may leave out: its table's `sizes`."""
    return {d: v for d, v in m.reference.sizes.items() if d in dims} if m.reference is not None else {}


def _check_points(rel: str, m: VariantManifest, op, config: ProjectConfig, problem_op) -> list[dict]:
    """`[[check]]`: shapes only checked, each set with its own tolerance (`pipeline.project.shapes`);
    a challenge's tests: where the manifest writes none."""
    challenge = m.challenge is not None
    if m.check and m.reference is not None and m.reference.check == "none":
        raise ManifestError(rel, "check", '[reference] check = "none": there is nothing to check a shape against')
    if challenge and problem_op.checks_itself:
        # Its own check decides every verdict: a tolerance would silently not apply.
        for s, table in enumerate(m.check):
            for key in ("rtol", "atol"):
                if getattr(table, key) is not None:
                    raise ManifestError(rel, f"check[{s}].{key}", f"the problem's check_implementation "
                                                                  f"({problem_op.path}) judges its outputs; remove it")
        if m.tolerance.model_dump(exclude_none=True):
            raise ManifestError(rel, "tolerance", f"the problem's check_implementation ({problem_op.path}) judges "
                                                  "its outputs; remove [tolerance]")
    if challenge and len(m.dtypes) > 1:
        raise ManifestError(rel, "dtypes", "a challenge problem makes its own inputs (generate_input): one dtype, the "
                                           f"one it makes, labels its rows (got {list(m.dtypes)})")
    try:
        return check_points(list(m.check), m.op, op.DIMS, config.shape_sets, _fill(m, op.DIMS),
                            default=problem_op.tests if challenge else (), default_where="task.yml tests")
    except ShapeError as exc:
        raise ManifestError(rel, exc.key, str(exc)) from None
