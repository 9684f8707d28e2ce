"""The build cache: one folder per build hash (`build.json` + the artifact's files).

Its root is `--cache DIR` / `FLOPWATCH_CACHE` (default `<repo>/.flopwatch/cache`), so that a CI
runner can keep it outside the workspace that `actions/checkout` wipes. Several drivers may
share one cache (a runner pool on one disk): an entry is written into a folder of the writer's
own and renamed into place in one step, so a reader sees a whole entry or none, and when two
drivers build the same hash at once the first rename wins and the second copy is dropped (the
same hash means the same sources, flags and toolchain).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

from workers.bundle import pack, unpack
from workers.records import BuildResult


def builds_dir(cache_root: Path) -> Path:
    return Path(cache_root) / "builds"


def load(folder: Path) -> tuple[BuildResult, dict] | None:
    """The cached build record and its packed files, or None when the entry is missing."""
    meta = folder / "build.json"
    if not meta.exists():
        return None
    return BuildResult.from_dict(json.loads(meta.read_text())), pack(folder / "artifact")


def save(folder: Path, record: BuildResult, files: dict) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        unpack(files, tmp / "artifact")
        (tmp / "build.json").write_text(json.dumps(record.to_dict()))
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
