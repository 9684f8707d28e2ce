"""Every path `new` and `init` write, resolved before anything is written: a repository may
commit symlinks (`flopwatch/vec_add -> ../../outside`, a dangling
`.github/workflows/flopwatch.yml -> ../../../outside/wf.yml`), and writing through one would
put a draft, a config or a workflow outside the repository the user asked to onboard. A path
that resolves outside it is refused, naming the link that leads there."""

from __future__ import annotations

import os
from pathlib import Path


class OutsideRepository(ValueError):
    """A path of the repository that resolves outside it; `link`: the committed link that leads
    there (repository-relative), "" where the path itself climbs out (`../x`)."""

    def __init__(self, message: str, link: str = ""):
        super().__init__(message)
        self.link = link


def within(root: Path, rel: str | Path) -> Path:
    """`root / rel`, once it is known to resolve inside `root` (itself resolved), every link on
    the way followed (a dangling one to where it points); else OutsideRepository."""
    path = root / rel
    if _inside(root, path):
        return path
    raise OutsideRepository(*_why(root, Path(rel)))


def _inside(root: Path, path: Path) -> bool:
    # os.path.realpath follows a dangling link too (to the path it names), which is what a
    # write through it would create.
    resolved = Path(os.path.realpath(path))
    return resolved == root or resolved.is_relative_to(root)


def _why(root: Path, rel: Path) -> tuple[str, str]:
    """(why `rel` leads out of `root`, in words; the link that leads there, or "")."""
    for i in range(1, len(rel.parts) + 1):
        step = Path(*rel.parts[:i])
        if (root / step).is_symlink() and not _inside(root, root / step):
            target = os.readlink(root / step)
            return (f"{step.as_posix()} is a link to {target} ({os.path.realpath(root / step)}), outside the "
                    f"repository {root}: nothing is written through it"), step.as_posix()
    return f"{rel.as_posix()} lies outside the repository {root}: nothing is written there", ""
