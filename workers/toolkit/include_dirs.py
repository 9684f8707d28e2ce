"""A manifest's node-side include folders (`[build] include_dirs`), e.g.
`["${HIPKITTENS_ROOT}/include", "${HIP_INCLUDE_DIR}"]`.

They name checkouts that exist only on the build node (HipKittens, ThunderKittens), so they are
expanded there: first from the toolchain's own variables (`HIP_INCLUDE_DIR`,
`ROCM_INCLUDE_DIR`: the names ROCm Makefiles use), then from the node's environment. A variable
that is not set, or a folder that does not exist, is reported by name instead of surfacing
later as a confusing "file not found" from the compiler.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")
# A folder with more files than this is a system tree (a ROCm install), not a header library:
# hashing it on every plan would cost more than it is worth.
FINGERPRINT_FILE_LIMIT = 5000


@dataclass(frozen=True)
class Expanded:
    """The folders as the node sees them; `problem` is empty when all expanded and exist."""

    folders: tuple[str, ...]
    problem: str = ""


def expand_one(entry: str, variables: Mapping[str, str]) -> tuple[str, list[str]]:
    """`entry` with `$NAME`/`${NAME}` replaced; returns (text, names that were not set) (pure)."""
    missing: list[str] = []

    def sub(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if variables.get(name):
            return variables[name]
        missing.append(name)
        return match.group(0)

    return _VAR.sub(sub, entry), missing


def expand(entries: Sequence[str], variables: Mapping[str, str], env: Mapping[str, str]) -> Expanded:
    """Expand every entry with `variables` first, then `env`; check each folder exists."""
    merged = {**env, **variables}
    folders: list[str] = []
    problems: list[str] = []
    for entry in entries:
        text, missing = expand_one(entry, merged)
        if missing:
            names = ", ".join(f"${m}" for m in missing)
            problems.append(f"build.include_dirs: {entry!r} needs {names}, not set on this build node")
            continue
        if not Path(text).is_dir():
            problems.append(f"build.include_dirs: {entry!r} is {text}, which does not exist on this build node")
            continue
        folders.append(text)
    return Expanded(tuple(folders), "; ".join(problems))


def fingerprint(entries: Sequence[str], env: Mapping[str, str]) -> str:
    """A digest of the files under the folders that expand from `env` and exist here (the
    driver): a changed HipKittens checkout then rebuilds. Folders that do not expand here
    (toolchain variables, another node's paths) contribute their text only."""
    h = hashlib.sha256()
    for entry in entries:
        text, missing = expand_one(entry, env)
        h.update(f"{entry}={text}\0".encode())
        folder = Path(text)
        if missing or not folder.is_dir():
            continue
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        if len(files) > FINGERPRINT_FILE_LIMIT:
            h.update(f"{len(files)} files\0".encode())
            continue
        for path in files:
            h.update(path.relative_to(folder).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()
