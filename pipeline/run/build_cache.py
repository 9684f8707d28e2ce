"""The build cache: one folder per build hash (`build.json` + the artifact's files).

Its root is `--cache DIR` / `FLOPWATCH_CACHE` (default `<repo>/.flopwatch/cache`), so that a CI
runner can keep it outside the workspace that `actions/checkout` wipes. Several drivers may
share one cache (a runner pool on one disk): an entry is written into a folder of the writer's
own and renamed into place in one step, so a reader sees a whole entry or none, and when two
drivers build the same hash at once the first rename wins and the second copy is dropped (the
same hash means the same sources, flags and toolchain).

Every entry is verified before it is used: `entry.sha256` holds the SHA-256 of `build.json` and
of every artifact file (name and bytes), written with the entry; `load` recomputes it from what
it is about to return and refuses an entry whose digest differs or is missing: it says so on
stderr, removes the entry and answers None, so the caller (every command that builds: run,
compare, bisect, nightly) builds it again. This catches a cache folder damaged on disk, an
artifact swapped or a file added after the entry was written, and an entry of an older
flopwatch. It cannot catch a writer who rewrites an entry and its digest together: the digest
sits in the same folder. What stops that is who may write the folder: the nightly's cache lives
on machines no PR job reaches, and a PR run's cache is made for that run (docs/ci.md, "What
isolates what").
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import uuid
from pathlib import Path

from workers.core.records import BuildResult
from workers.toolkit.bundle import pack, unpack


def builds_dir(cache_root: Path) -> Path:
    return Path(cache_root) / "builds"


DIGEST = "entry.sha256"


def entry_digest(meta: bytes, files: dict[str, bytes]) -> str:
    """SHA-256 over the record's bytes and each artifact file's name and bytes, in name order."""
    h = hashlib.sha256(b"build.json\0" + hashlib.sha256(meta).digest())
    for rel in sorted(files):
        h.update(b"\1" + rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return h.hexdigest()


def load(folder: Path) -> tuple[BuildResult, dict] | None:
    """The cached build record and its packed files, or None when the entry is missing or fails
    its digest (then it is removed, and the caller builds it again)."""
    meta_path = folder / "build.json"
    if not meta_path.exists():
        return None
    meta, files = meta_path.read_bytes(), pack(folder / "artifact")
    try:
        recorded = (folder / DIGEST).read_text().strip()
    except OSError:
        recorded = None
    actual = entry_digest(meta, files)
    if recorded != actual:
        why = ("it has no digest (written by an older flopwatch, or its digest was removed)" if recorded is None
               else f"its files do not match the digest recorded with it ({recorded[:16]}…, now {actual[:16]}…)")
        print(f"flopwatch: build cache: refusing entry {folder}: {why}; removed, building it again", file=sys.stderr)
        discard(folder)
        return None
    return BuildResult.from_dict(json.loads(meta)), files


def discard(folder: Path) -> None:
    """Remove an entry: renamed aside first, so no reader meets it half deleted."""
    aside = folder.with_name(f"{folder.name}.bad-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        folder.rename(aside)
    except OSError:
        return  # another driver removed it first
    shutil.rmtree(aside, ignore_errors=True)


def save(folder: Path, record: BuildResult, files: dict) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        unpack(files, tmp / "artifact")
        meta = json.dumps(record.to_dict()).encode()
        (tmp / "build.json").write_bytes(meta)
        # From what was written, read back as `load` will read it.
        (tmp / DIGEST).write_text(entry_digest(meta, pack(tmp / "artifact")) + "\n")
        if (folder / "build.json").exists():
            return  # another driver stored the same build first
        if folder.exists():  # a partial entry left by an older flopwatch: replace it
            shutil.rmtree(folder, ignore_errors=True)
        try:
            tmp.rename(folder)
        except OSError:
            if not (folder / "build.json").exists():  # not a lost race: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
