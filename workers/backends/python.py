"""`python` back end: nothing to compile. The repository files the build was shipped (the
variant's folder and sources, the shared folders of flopwatch.toml, where a package such as
`src/liger_kernel` lives) are kept at their repository-relative paths, so the job imports the
entry the way its repository does (`workers.bindings.python_entry`)."""

from __future__ import annotations

import platform
import shutil
from pathlib import Path, PurePosixPath

from workers.backends.base import BuildOutput, Toolchain
from workers.bindings.python_entry import REPOSITORY_ROOTS, TREE, write_index
from workers.core.records import Variant


def toolchain() -> Toolchain | None:
    import torch

    return Toolchain("python", "python", f"python {platform.python_version()} torch {torch.__version__}")


def build(variant: Variant, src: Path, out: Path, tc: Toolchain, include_dirs: list[Path]) -> BuildOutput:
    ship_tree(variant, src, out, include_dirs)
    return BuildOutput(True, "sources copied")


def repository_root(variant: Variant, src: Path) -> Path:
    """The unpacked repository files' root, from the variant folder's place in it."""
    root = src
    for _ in PurePosixPath(variant.folder).parts:
        root = root.parent
    return root


def ship_tree(variant: Variant, src: Path, out: Path, include_dirs: list[Path], extra_roots: tuple[str, ...] = (),
              extensions: dict | None = None) -> None:
    """Copy every shipped file into the artifact's `repo/` and note the import roots: the
    shared folders (Liger's `src`), the variant's own folder, the repository root and src/."""
    root = repository_root(variant, src)
    shutil.copytree(root, out / TREE, dirs_exist_ok=True)
    roots = [d.relative_to(root).as_posix() for d in include_dirs if d.is_relative_to(root)]
    roots += [r for r in extra_roots if r not in roots]
    if variant.folder and variant.folder not in roots:
        roots.append(variant.folder)
    # The repository root and src/ too, after the declared ones: a package imports itself as
    # it does from a checkout (`extension_cpp.ops`, `src/liger_kernel`) with no line written.
    roots += [r for r in REPOSITORY_ROOTS if r not in roots and (out / TREE / r).is_dir()]
    write_index(out, variant.folder, roots, extensions)
