"""A benchmarked repository (real git, gitpython) holding the hostile variants next to a good
one, with a commit subject and author that carry HTML, and the command-line runs over it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from suite_repo import init_repo

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests" / "hostile" / "kernels" / "gemm"
BROKEN = ROOT / "tests" / "broken_kernels" / "gemm"
SUBJECT = "<script>alert('subject')</script> & friends"
# Git itself refuses angle brackets in an identity: an attribute break-out is what a name can carry.
AUTHOR = "Mallory \" onmouseover=\"alert('author') & co"
CONFIG = """\
kernels = ["kernels"]
[shape_sets]
tiny = [[64, 64, 64]]
[defaults]
timing_budget_s = 0.1
"""


def make_repo(path: Path, hostile: tuple[str, ...] = (), broken: tuple[str, ...] = (),
              symlink_out: bool = False) -> Path:
    """`cpp_naive` (the good variant whose rows must survive everything) plus the named cases;
    `symlink_out` adds a variant whose source is a committed symlink to a file outside the tree.
    The repository is closed again (gitpython's `git cat-file` helpers end with it)."""
    kernels = path / "kernels" / "gemm"
    kernels.mkdir(parents=True)
    shutil.copytree(ROOT / "kernels" / "gemm" / "cpp_naive", kernels / "cpp_naive")
    manifest = kernels / "cpp_naive" / "variant.toml"
    manifest.write_text(manifest.read_text().replace('shapes = "gemm_cpu"', 'shapes = "tiny"'))
    for name in hostile:
        shutil.copytree(HOSTILE / name, kernels / name)
    for name in broken:
        shutil.copytree(BROKEN / name, kernels / name)
    if symlink_out:
        shutil.copytree(HOSTILE / "huge_shape", kernels / "symlink_out")
        (kernels / "symlink_out" / "kernel.cpp").unlink()
        os.symlink("/etc/hostname", kernels / "symlink_out" / "kernel.cpp")
        m = kernels / "symlink_out" / "variant.toml"
        m.write_text(m.read_text().replace('"huge_shape"', '"symlink_out"').replace("[[1000000, 1000000, 1000000]]",
                                                                                   "[[64, 64, 64]]"))
    (path / "flopwatch.toml").write_text(CONFIG)
    repo = init_repo(path, AUTHOR)
    files = [str(p.relative_to(path)) for p in path.rglob("*") if (p.is_file() or p.is_symlink()) and ".git" not in p.parts]
    repo.index.add(files)
    repo.index.commit("the suite before")
    (path / "README.md").write_text("hostile suite\n")
    repo.index.add(["README.md"])
    repo.index.commit(SUBJECT)
    repo.close()
    return path


def flopwatch(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m pipeline.cli ARGS` as a user runs it (its own local Ray cluster)."""
    full = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0", **(env or {}))
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], env=full, capture_output=True, text=True,
                          timeout=timeout)


def run_json(repo: Path, db: Path, *extra: str, env: dict | None = None) -> tuple[int, dict, str]:
    """(exit code, the --json summary, stderr) of `flopwatch run HEAD`."""
    done = flopwatch("run", "HEAD", "--repo", str(repo), "--db", str(db), "--json", *extra, env=env)
    try:
        summary = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise AssertionError(f"no JSON summary (exit {done.returncode}): {done.stderr[-3000:]}") from None
    return done.returncode, summary, done.stderr
