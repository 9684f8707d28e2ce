"""What names this flopwatch's code: a digest of the driver's and the nodes' Python source.

A kept slot's name (`pipeline.fleet.slots.kept_key`) and the key of flopwatch's local Ray head
(`pipeline.fleet.local_ray.head_key`) hold it, so that neither is used by another flopwatch.
Standard library only: the head is started before a command's own imports
(`pipeline.fleet.head_ahead`)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

CODE_DIRS = tuple(Path(__file__).resolve().parents[2] / name for name in ("pipeline", "workers"))


def code_digest(dirs: tuple[Path, ...] = CODE_DIRS) -> str:
    """Hash of the driver's and the nodes' Python source, names included (also in the key of
    flopwatch's local Ray head, `local_ray.head_key`)."""
    h = hashlib.sha256()
    for root in dirs:
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@functools.cache
def own_digest() -> str:
    """This flopwatch's `code_digest`, read once per process (a command computes the local Ray
    head's key before its imports and again when it attaches, and the kept slots' key too)."""
    return code_digest()
