"""Load and validate a variant's `variant.toml` into a `Variant` record.

Structure and types are checked by the declared format (`pipeline.schema.VariantManifest`:
unknown keys, wrong types, out-of-range numbers); this module checks what a type cannot say:
the sources exist inside the folder, the binding fits the back end, the shapes have the op's
sizes. Every complaint names the file and the key, so a broken manifest becomes an `invalid`
result a developer can fix without reading flopwatch's code.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from pipeline.config import ProjectConfig
from pipeline.schema import BACKENDS, DEVICE_KINDS, VariantManifest, problem
from workers import untrusted
from workers.ops import OPS
from workers.ops.repo import RepoOp
from workers.records import Binding, Shape, Variant

__all__ = ["BACKENDS", "BINDINGS", "DEVICE_KINDS", "ManifestError", "load_variant"]

BINDINGS = {
    "cpp": ("c",),
    "cuda": ("c", "raw", "pybind11"),
    "hip": ("c", "raw", "pybind11"),
    "python": ("python",),
    "triton": ("triton",),
}
_DEFAULT_DEVICES = {"cpp": ("cpu",), "cuda": ("cuda",), "hip": ("rocm",), "python": ("cpu",),
                    "triton": ("cuda", "rocm")}


class ManifestError(ValueError):
    """A manifest is wrong; `str()` is `<file>: <key>: <what is wrong>`."""

    def __init__(self, path: str, key: str, message: str):
        self.path, self.key = path, key
        super().__init__(f"{path}: {key}: {message}")


def load_variant(repo_root: Path, manifest: Path, config: ProjectConfig,
                 repo_ops: dict[str, RepoOp] | None = None) -> Variant:
    """Parse `manifest` (a `variant.toml` below `repo_root`) into a validated `Variant`;
    `repo_ops` are the ops the repository declares (`pipeline.discovery.find_ops`)."""
    rel = manifest.relative_to(repo_root).as_posix()
    folder = manifest.parent
    try:
        data = tomllib.loads(manifest.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(rel, "(syntax)", f"not valid TOML: {exc}") from exc
    try:
        m = VariantManifest.model_validate(data)
    except ValidationError as exc:
        raise ManifestError(rel, *problem(exc, VariantManifest)) from None
    bad_name = untrusted.check_name(m.name)
    if bad_name:
        raise ManifestError(rel, "name", bad_name)
    ops = {**OPS, **(repo_ops or {})}
    op = _op(rel, m.op, ops)
    if not m.sources and (m.backend != "python"):
        raise ManifestError(rel, "sources", "missing: list the files to compile")
    for src in m.sources:
        _check_inside(rel, "sources", folder, src)
        if not (folder / src).is_file():
            why = _refused(repo_root).get((folder / src).relative_to(repo_root).as_posix())
            raise ManifestError(rel, "sources", f"file {src!r} does not exist in {folder.name}/"
                                + (f" (not extracted from the commit: {why})" if why else ""))
    binding = _binding(rel, m)
    allowed = {*op.INPUTS, op.OUTPUT, *op.DIMS, *getattr(op, "SCALARS", ()), "alpha", "beta"}
    unknown = [a for a in binding.args if a not in allowed]
    if unknown:
        raise ManifestError(rel, "binding.args", f"{unknown} are not {m.op} arguments (known: {sorted(allowed)})")
    layout = m.layout if m.layout is not None else op.LAYOUTS[0]
    if layout not in op.LAYOUTS:
        raise ManifestError(rel, "layout", f"{layout!r} is not a {m.op} layout (known: {list(op.LAYOUTS)})")
    if m.op in (repo_ops or {}):
        for d in m.dtypes:
            if d not in repo_ops[m.op].tolerance:
                raise ManifestError(rel, "dtypes", f"op {m.op!r} ({repo_ops[m.op].path}) has no TOLERANCE for {d}")
    for inc in m.build.include_dirs:
        _check_node_include(rel, inc)
    if m.triton is not None and m.backend != "triton":
        raise ManifestError(rel, "triton", f"only for backend = \"triton\", not {m.backend!r}")
    if m.triton is None and m.backend == "triton":
        raise ManifestError(rel, "triton", "missing: a triton variant names its kernel in [triton] (docs/triton.md)")
    devices = tuple(m.devices) or _DEFAULT_DEVICES[m.backend]
    if m.backend == "triton" and "cpu" in devices:
        raise ManifestError(rel, "devices", "Triton kernels run on GPUs only (cuda, rocm)")
    return Variant(
        name=m.name,
        op=m.op,
        backend=m.backend,
        folder=folder.relative_to(repo_root).as_posix(),
        sources=tuple(m.sources),
        binding=binding,
        dtypes=tuple(m.dtypes),
        shapes=tuple(_shapes(rel, m, op.DIMS, config)),
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
        repo_op=repo_ops[m.op].to_dict() if m.op in (repo_ops or {}) else {},
    )


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
    from pipeline.checkout import refused_members

    return refused_members(repo_root)


def _check_inside(rel: str, key: str, folder: Path, src: str) -> None:
    """Sources must live in the variant folder: they are what is hashed and shipped."""
    p = PurePosixPath(src)
    if p.is_absolute() or ".." in p.parts:
        raise ManifestError(rel, key, f"{src!r} points outside the variant folder")
    if not (folder / src).resolve().is_relative_to(folder.resolve()):
        raise ManifestError(rel, key, f"{src!r} resolves outside the variant folder")


def _binding(rel: str, m: VariantManifest) -> Binding:
    b = m.binding
    if b.kind not in BINDINGS[m.backend]:
        raise ManifestError(rel, "binding.kind", f"{b.kind!r} is not a binding of the {m.backend} back end "
                                                 f"(known: {list(BINDINGS[m.backend])})")
    if b.kind == "raw" and not (b.grid and b.block):
        raise ManifestError(rel, "binding.grid", "a raw kernel needs grid and block expressions")
    return Binding(kind=b.kind, entry=b.entry, module=b.module, grid=tuple(b.grid), block=tuple(b.block),
                   args=tuple(b.args))


def _shapes(rel: str, m: VariantManifest, dims: tuple[str, ...], config: ProjectConfig) -> list[Shape]:
    raw = m.shapes
    if raw is None or raw == "*":
        if m.peer:
            return []  # a peer runs at every shape the op's other variants use
        raise ManifestError(rel, "shapes", "missing: give a list of shapes or a shape-set name")
    where = "shapes"
    if isinstance(raw, str):
        if raw not in config.shape_sets:
            known = sorted(config.shape_sets)
            hint = difflib.get_close_matches(raw, known, n=1)
            raise ManifestError(rel, "shapes", f"unknown shape set {raw!r}"
                                + (f"; did you mean {hint[0]!r}?" if hint else "")
                                + f" (known: {known or 'none defined in flopwatch.toml'})")
        where, raw = f"shapes (shape set {raw!r})", config.shape_sets[raw]
    shapes = []
    for i, item in enumerate(raw):
        if isinstance(item, list) and len(item) == len(dims):
            values = dict(zip(dims, item))
        elif isinstance(item, dict) and set(item) == set(dims):
            values = {d: item[d] for d in dims}
        else:
            raise ManifestError(rel, f"{where}[{i}]", f"{item!r} is not a {m.op} shape: expected "
                                f"{len(dims)} sizes {list(dims)}, as a list or a table")
        shapes.append(Shape(values))
    return shapes
