"""The variants a project already has, by name, and the drafts that would repeat one of them.

A series is known by its variant's name, so discovery makes every variant of a name two
manifests give `invalid` (`pipeline.project.discovery`): a draft written beside an existing
variant of its name, in another folder (`new --out drafts ops.py` after `new ops.py`), would
break both. Such a draft is refused before it is written, naming the folder that has the name."""

from __future__ import annotations

import tomllib
from pathlib import Path, PurePosixPath

from pipeline.onboarding.source.records import Draft


def variant_names(root: Path, folders: list[str]) -> dict[str, list[str]]:
    """{name: [folder of each manifest giving it]} of every `variant.toml` below `folders`
    (the project's kernel folders and the drafts' folder), as discovery would find them; a
    manifest that does not parse names nothing (discovery reports it)."""
    names: dict[str, list[str]] = {}
    seen: set[Path] = set()
    for folder in dict.fromkeys(folders):
        base = root / folder
        if not base.is_dir():
            continue
        for manifest in sorted(base.rglob("variant.toml")):
            if manifest in seen:  # folders nested in one another
                continue
            seen.add(manifest)
            try:
                name = tomllib.loads(manifest.read_text(errors="replace")).get("name")
            except (OSError, tomllib.TOMLDecodeError):
                continue
            if isinstance(name, str):
                names.setdefault(name, []).append(manifest.parent.relative_to(root).as_posix())
    return names


def name_taken(d: Draft, names: dict[str, list[str]]) -> str:
    """Why `d` must not be written (a variant of its name exists in another folder), or ""."""
    others = [f for f in names.get(d.name, []) if f != d.folder]
    if not others:
        return ""
    there = others[0]
    rename = f"rename that one (`name` in {there}/variant.toml) and draft again"
    if PurePosixPath(there).name == d.name:  # the draft lands in that very folder with --out its parent
        rename = f"redraft it there (--out {PurePosixPath(there).parent.as_posix()} --force), or {rename}"
    return f"a variant named {d.name} exists in {there}; two variants of one name are both invalid: {rename}"
