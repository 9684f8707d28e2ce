"""Folders as {relative path: bytes} bundles: how sources and artifacts travel through Ray."""

from __future__ import annotations

import hashlib
from pathlib import Path


def pack(root: Path, subdirs: list[str] | None = None) -> dict[str, bytes]:
    """Read every regular file below `root` (or below the listed subfolders of it, or the
    listed files themselves).

    A symbolic link is followed only when its target lies inside `root`: the folders packed are
    the benchmarked repository's, and a link to ~/.ssh/id_rsa or /etc must not ship that file to
    a build node (and from there into compiler messages, the store and a PR comment)."""
    bases = [root / s for s in subdirs] if subdirs else [root]
    inside = root.resolve()
    files: dict[str, bytes] = {}
    for base in bases:
        if base.is_file() and base.resolve().is_relative_to(inside):  # one file named on its own
            files[base.relative_to(root).as_posix()] = base.read_bytes()
            continue
        if not base.is_dir() or not base.resolve().is_relative_to(inside):
            continue
        for path in sorted(base.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            if not path.resolve().is_relative_to(inside):
                continue
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    return files


def unpack(files: dict[str, bytes], root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise ValueError(f"bundle path {rel!r} escapes its folder")
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def digest(files: dict[str, bytes], *extra: str) -> str:
    """Content hash of a bundle plus extra strings (flags, toolchain): the build cache key."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    for item in extra:
        h.update(b"\1" + item.encode())
    return h.hexdigest()[:20]
