"""Find every variant below the configured kernel folders of a checked-out repository, and the
ops the repository declares beside its kernels (`op.py`, docs/ops.md)."""

from __future__ import annotations

from pathlib import Path

from pipeline.project.config import ProjectConfig
from pipeline.project.manifest import ManifestError, load_variant
from pipeline.project.sweep import expand
from workers.core.params import family_of, selects
from workers.core.records import InvalidVariant, Variant
from workers.ops import OPS
from workers.ops.repo import FILE_NAME, OpDefinitionError, RepoOp, parse_op


def discover(repo_root: Path, config: ProjectConfig, kernel_dirs: tuple[str, ...] | None = None,
             only: tuple[str, ...] = ()) -> tuple[list[Variant], list[InvalidVariant]]:
    """Load every `variant.toml` below the kernel folders.

    A manifest that fails validation becomes an `InvalidVariant` carrying the error; the others
    load normally, so one broken folder never hides the rest of the suite. A swept variant
    (`[params]`) becomes one variant per point (`pipeline.project.sweep.expand`). `only` keeps the
    variants a selector names (used by bisect and by `run --variant`): a variant's name, and
    for a swept one every point, or the points of `NAME[AXIS=value,...]`. A broken `op.py` is an
    `InvalidVariant` too (named after its folder), and the variants of that op say which file
    to fix.
    """
    valid: list[Variant] = []
    invalid: list[InvalidVariant] = []
    claimed: dict[str, list[tuple[str, str]]] = {}  # name: (folder, manifest) of each variant called so
    problems: dict[str, str] = {}
    folders = kernel_dirs or config.kernel_dirs
    repo_ops, broken_ops = find_ops(repo_root, folders)
    if not only:
        invalid += broken_ops
    for folder in folders:
        base = (repo_root / folder)
        if not base.is_dir():
            continue
        for manifest in sorted(base.rglob("variant.toml")):
            rel_folder = manifest.parent.relative_to(repo_root).as_posix()
            rel = manifest.relative_to(repo_root).as_posix()
            try:
                variant = load_variant(repo_root, manifest, config, repo_ops)
            except (ManifestError, KeyError, TypeError, ValueError) as exc:
                if not only or manifest.parent.name in {family_of(sel) for sel in only}:
                    invalid.append(InvalidVariant(rel_folder, rel, _with_broken_op(str(exc), broken_ops)))
                continue
            points = [p for p in expand(variant) if not only or any(selects(sel, p.name) for sel in only)]
            if not points:
                continue
            clash = _problem_clash(variant, problems, rel)
            if clash:
                invalid.append(InvalidVariant(rel_folder, rel, f"{rel}: op: {clash}"))
                continue
            claimed.setdefault(variant.name, []).append((rel_folder, rel))
            valid += points
    return _without_name_clashes(valid, invalid, claimed)


def _without_name_clashes(valid: list[Variant], invalid: list[InvalidVariant],
                          claimed: dict[str, list[tuple[str, str]]]) -> tuple[list[Variant], list[InvalidVariant]]:
    """Every variant of a name two manifests give is `invalid`, naming the other folders: a series
    is known by its name, and keeping the one whose folder sorts first would let a new folder
    silently take over an existing series."""
    clashes = {name: places for name, places in claimed.items() if len(places) > 1}
    if not clashes:
        return valid, invalid
    valid = [v for v in valid if family_of(v.name) not in clashes]
    for name, places in clashes.items():
        for folder, rel in places:
            others = ", ".join(other for _, other in places if other != rel)
            invalid.append(InvalidVariant(folder, rel, f"{rel}: name: {name!r} is also the name of {others}; "
                                                       "rename one (a series is known by its name)"))
    return valid, invalid


def _problem_clash(variant: Variant, problems: dict[str, tuple], rel: str = "") -> str:
    """A problem op (`[problem] file`) is named once: two files under one op name would be two
    ops in one series; so is a `[reference]` op, which variants share only with the same table.
    Records the first definition per name in `problems`."""
    kind = variant.repo_op.get("kind")
    if kind not in ("problem", "reference", "challenge"):
        return ""
    from workers.ops import op_source_digest

    where = variant.repo_op["path"] if kind == "problem" else variant.repo_op["folder"] if kind == "challenge" else rel
    mine = (kind, where, op_source_digest(variant.repo_op) if kind != "problem" else where)
    first = problems.setdefault(variant.op, mine)
    if first[2] == mine[2]:
        return ""
    if first[0] == kind and kind in ("problem", "challenge"):
        return f"{variant.op!r} is already the op of problem {first[1]}; name the problem of {where} otherwise"
    what = "[reference] table" if first[0] == "reference" else "problem"  # a problem file or folder
    return (f"{variant.op!r} is already the op of the {what} of {first[1]}, which differs; name this variant's op "
            f"otherwise (or write the same [reference] table)")


def find_ops(repo_root: Path, kernel_dirs: tuple[str, ...]) -> tuple[dict[str, RepoOp], list[InvalidVariant]]:
    """Every `op.py` below the kernel folders that is not a variant's own source (its folder has
    no `variant.toml`), read without running it (`workers.ops.repo.parse_op`). The op is named
    by its `NAME`, else by its folder."""
    ops: dict[str, RepoOp] = {}
    broken: list[InvalidVariant] = []
    for folder in kernel_dirs:
        base = repo_root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob(FILE_NAME)):
            if (path.parent / "variant.toml").exists() or not path.is_file():
                continue
            rel = path.relative_to(repo_root).as_posix()
            rel_folder = path.parent.relative_to(repo_root).as_posix()
            try:
                op = parse_op(rel, path.read_text(errors="replace"), path.parent.name, tuple(OPS))
            except OpDefinitionError as exc:
                broken.append(InvalidVariant(rel_folder, rel, str(exc)))
                continue
            if op.name in ops:
                broken.append(InvalidVariant(rel_folder, rel, f"{rel}: NAME: op {op.name!r} is already "
                                                              f"declared by {ops[op.name].path}"))
                continue
            ops[op.name] = op
    return ops, broken


def _with_broken_op(error: str, broken: list[InvalidVariant]) -> str:
    """A variant of an op whose `op.py` is broken: say so, rather than only "unknown op"."""
    for bad in broken:
        name = bad.folder.rstrip("/").split("/")[-1]
        if f"op: {name!r} is not one of" in error:
            return f"{error}; {bad.manifest} would declare it but is broken: {bad.error}"
    return error
