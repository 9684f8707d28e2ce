"""Find every variant below the configured kernel folders of a checked-out repository."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import ProjectConfig
from pipeline.manifest import ManifestError, load_variant
from workers.records import InvalidVariant, Variant


def discover(repo_root: Path, config: ProjectConfig, kernel_dirs: tuple[str, ...] | None = None,
             only: tuple[str, ...] = ()) -> tuple[list[Variant], list[InvalidVariant]]:
    """Load every `variant.toml` below the kernel folders.

    A manifest that fails validation becomes an `InvalidVariant` carrying the error; the others
    load normally, so one broken folder never hides the rest of the suite. `only` keeps the
    variants whose name is listed (used by bisect and by `run --variant`).
    """
    valid: list[Variant] = []
    invalid: list[InvalidVariant] = []
    seen: dict[str, str] = {}
    for folder in kernel_dirs or config.kernel_dirs:
        base = (repo_root / folder)
        if not base.is_dir():
            continue
        for manifest in sorted(base.rglob("variant.toml")):
            rel_folder = manifest.parent.relative_to(repo_root).as_posix()
            rel = manifest.relative_to(repo_root).as_posix()
            try:
                variant = load_variant(repo_root, manifest, config)
            except (ManifestError, KeyError, TypeError, ValueError) as exc:
                if not only or manifest.parent.name in only:
                    invalid.append(InvalidVariant(rel_folder, rel, str(exc)))
                continue
            if only and variant.name not in only:
                continue
            if variant.name in seen:
                invalid.append(InvalidVariant(
                    rel_folder, rel, f"{rel}: name: {variant.name!r} is already used by {seen[variant.name]}"))
                continue
            seen[variant.name] = rel
            valid.append(variant)
    return valid, invalid
