"""Load and validate a variant's `variant.toml` into a `Variant` record.

Every complaint names the file and the key that is wrong, so a broken manifest becomes an
`invalid` result a developer can fix without reading flopwatch's code.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath

from pipeline.config import ProjectConfig
from workers import untrusted
from workers.ops import DTYPES, OPS
from workers.ops.repo import RepoOp
from workers.records import Binding, Shape, Variant

BACKENDS = ("cpp", "cuda", "hip", "python", "triton")
BINDINGS = {
    "cpp": ("c",),
    "cuda": ("c", "raw", "pybind11"),
    "hip": ("c", "raw", "pybind11"),
    "python": ("python",),
    "triton": ("triton",),
}
DEVICE_KINDS = ("cpu", "cuda", "rocm")
_DEFAULT_DEVICES = {"cpp": ("cpu",), "cuda": ("cuda",), "hip": ("rocm",), "python": ("cpu",),
                    "triton": ("cuda", "rocm")}
_TOP_KEYS = {
    "name", "op", "backend", "sources", "binding", "build", "dtypes", "shapes", "layout",
    "alpha_beta", "arches", "tolerance", "peer", "devices", "timeout_s", "launch", "description", "output_dtype",
    "triton",
}


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
    check = _Checker(rel, data)
    check.no_unknown_keys(_TOP_KEYS)
    name = check.string("name")
    bad_name = untrusted.check_name(name)
    if bad_name:
        raise ManifestError(rel, "name", bad_name)
    ops = {**OPS, **(repo_ops or {})}
    op = _op_name(check, ops)
    backend = check.choice("backend", BACKENDS)
    sources = check.string_list("sources", required=backend != "python" or "binding" not in data)
    for src in sources:
        _check_inside(rel, "sources", folder, src)
        if not (folder / src).is_file():
            why = _refused(repo_root).get((folder / src).relative_to(repo_root).as_posix())
            raise ManifestError(rel, "sources", f"file {src!r} does not exist in {folder.name}/"
                                + (f" (not extracted from the commit: {why})" if why else ""))
    binding = _binding(check, backend)
    allowed = {*ops[op].INPUTS, ops[op].OUTPUT, *ops[op].DIMS, *getattr(ops[op], "SCALARS", ()), "alpha", "beta"}
    unknown = [a for a in binding.args if a not in allowed]
    if unknown:
        raise ManifestError(rel, "binding.args", f"{unknown} are not {op} arguments (known: {sorted(allowed)})")
    layout = check.choice("layout", ops[op].LAYOUTS, default=ops[op].LAYOUTS[0])
    dtypes = check.string_list("dtypes")
    for d in dtypes:
        if d not in DTYPES:
            raise ManifestError(rel, "dtypes", f"{d!r} is not one of {list(DTYPES)}")
        if op in (repo_ops or {}) and d not in repo_ops[op].tolerance:
            raise ManifestError(rel, "dtypes", f"op {op!r} ({repo_ops[op].path}) has no TOLERANCE for {d}")
    peer = check.boolean("peer", False)
    output_dtype = str(data.get("output_dtype", ""))
    if output_dtype and output_dtype not in DTYPES:
        raise ManifestError(rel, "output_dtype", f"{output_dtype!r} is not one of {list(DTYPES)}")
    shapes = _shapes(check, op, ops[op].DIMS, config, peer)
    build = check.table("build")
    flags = _Checker(rel, build, "build.").string_list("flags", required=False)
    includes = _Checker(rel, build, "build.").string_list("include_dirs", required=False)
    for inc in includes:
        _check_node_include(rel, inc)
    tol = check.table("tolerance")
    triton = _triton_table(check, backend)
    devices = check.string_list("devices", required=False) or _DEFAULT_DEVICES[backend]
    for d in devices:
        if d not in DEVICE_KINDS:
            raise ManifestError(rel, "devices", f"{d!r} is not one of {list(DEVICE_KINDS)}")
    if backend == "triton" and "cpu" in devices:
        raise ManifestError(rel, "devices", "Triton kernels run on GPUs only (cuda, rocm)")
    return Variant(
        name=name,
        op=op,
        backend=backend,
        folder=folder.relative_to(repo_root).as_posix(),
        sources=tuple(sources),
        binding=binding,
        dtypes=tuple(dtypes),
        shapes=tuple(shapes),
        layout=layout,
        alpha_beta=check.boolean("alpha_beta", False),
        arches=tuple(check.string_list("arches", required=False)),
        flags=tuple(flags),
        include_dirs=tuple(includes),
        openmp=bool(build.get("openmp", False)),
        peer=peer,
        devices=tuple(devices),
        timeout_s=float(check.number("timeout_s", config.timeout_s)),
        rtol=_Checker(rel, tol, "tolerance.").number("rtol", None),
        atol=_Checker(rel, tol, "tolerance.").number("atol", None),
        launch=check.table("launch"),
        makefile=str(build.get("makefile", "")),
        description=str(data.get("description", "")),
        triton=triton,
        output_dtype=output_dtype,
        repo_op=repo_ops[op].to_dict() if op in (repo_ops or {}) else {},
    )


def _op_name(check: _Checker, ops: dict) -> str:
    value = check._get("op")
    if value not in ops:
        raise ManifestError(check.path, "op", f"{value!r} is not one of {sorted(ops)} (an op of the repository's own "
                                              f"is declared in an op.py beside its kernels: docs/ops.md)")
    return value


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


def _binding(check: _Checker, backend: str) -> Binding:
    table = check.table("binding", required=True)
    sub = _Checker(check.path, table, "binding.")
    kind = sub.choice("kind", BINDINGS[backend])
    grid = tuple(table.get("grid", ()))
    block = tuple(table.get("block", ()))
    if kind == "raw" and not (grid and block):
        raise ManifestError(check.path, "binding.grid", "a raw kernel needs grid and block expressions")
    args = tuple(sub.string_list("args", required=False))
    return Binding(kind=kind, entry=sub.string("entry"), module=str(table.get("module", "")),
                   grid=grid, block=block, args=args)


def _triton_table(check: _Checker, backend: str) -> dict:
    """`[triton]`: the kernel to compile ahead of time and what its JIT would otherwise learn
    from the call (argument types, constexpr values, launch options). Checked for shape here;
    whether it fits the kernel's parameters is the build's to say, since only Triton can tell."""
    table = check.table("triton", required=backend == "triton")
    if not table:
        return {}
    if backend != "triton":
        raise ManifestError(check.path, "triton", f"only for backend = \"triton\", not {backend!r}")
    sub = _Checker(check.path, table, "triton.")
    sub.no_unknown_keys({"kernel", "signature", "constexprs", "num_warps", "num_stages", "num_ctas",
                         "maxnreg", "divisible_by_16"})
    sub.string("kernel")
    for key in ("signature", "constexprs"):
        value = sub.table(key)
        if key == "signature" and not all(isinstance(v, str) for v in value.values()):
            raise ManifestError(check.path, "triton.signature", "types must be strings such as \"*{dtype}\", \"i32\"")
        if key == "constexprs" and not all(isinstance(v, (int, float, bool, str)) for v in value.values()):
            raise ManifestError(check.path, "triton.constexprs", "values must be numbers, booleans or strings")
    for key in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        value = sub.number(key, None)
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ManifestError(check.path, f"triton.{key}", f"must be a positive integer, got {value!r}")
    sub.string_list("divisible_by_16", required=False)
    return dict(table)


def _shapes(check: _Checker, op: str, dims: tuple[str, ...], config: ProjectConfig, peer: bool) -> list[Shape]:
    raw = check.data.get("shapes")
    if raw is None or raw == "*":
        if peer:
            return []  # a peer runs at every shape the op's other variants use
        raise ManifestError(check.path, "shapes", "missing: give a list of shapes or a shape-set name")
    if isinstance(raw, str):
        if raw not in config.shape_sets:
            known = sorted(config.shape_sets) or "none defined"
            raise ManifestError(check.path, "shapes", f"unknown shape set {raw!r} (known: {known})")
        raw = config.shape_sets[raw]
    if not isinstance(raw, list) or not raw:
        raise ManifestError(check.path, "shapes", "must be a non-empty list or a shape-set name")
    shapes = []
    for item in raw:
        if isinstance(item, list) and len(item) == len(dims):
            values = dict(zip(dims, item))
        elif isinstance(item, dict) and set(item) == set(dims):
            values = {d: item[d] for d in dims}
        else:
            raise ManifestError(check.path, "shapes", f"{item!r} is not a {op} shape {list(dims)}")
        if not all(isinstance(v, int) and v > 0 for v in values.values()):
            raise ManifestError(check.path, "shapes", f"{item!r}: sizes must be positive integers")
        shapes.append(Shape(values))
    return shapes


class _Checker:
    """Typed access to one TOML table that raises `ManifestError` naming the key."""

    def __init__(self, path: str, data: dict, prefix: str = ""):
        self.path, self.data, self.prefix = path, data, prefix

    def _get(self, key, required=True):
        if key not in self.data and required:
            raise ManifestError(self.path, self.prefix + key, "missing")
        return self.data.get(key)

    def no_unknown_keys(self, known: set) -> None:
        for key in self.data:
            if key not in known:
                raise ManifestError(self.path, self.prefix + key, f"unknown key (known: {sorted(known)})")

    def string(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str) or not value.strip():
            raise ManifestError(self.path, self.prefix + key, f"must be a non-empty string, got {value!r}")
        return value

    def choice(self, key: str, options: tuple, default=None) -> str:
        value = self._get(key, required=default is None)
        value = default if value is None else value
        if value not in options:
            raise ManifestError(self.path, self.prefix + key, f"{value!r} is not one of {list(options)}")
        return value

    def string_list(self, key: str, required: bool = True) -> list[str]:
        value = self._get(key, required)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ManifestError(self.path, self.prefix + key, f"must be a list of strings, got {value!r}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise ManifestError(self.path, self.prefix + key, f"must be true or false, got {value!r}")
        return value

    def number(self, key: str, default):
        value = self.data.get(key, default)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ManifestError(self.path, self.prefix + key, f"must be a number, got {value!r}")
        return value

    def table(self, key: str, required: bool = False) -> dict:
        value = self._get(key, required)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ManifestError(self.path, self.prefix + key, f"must be a table, got {value!r}")
        return value
