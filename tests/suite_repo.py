"""Build a small benchmarked repository with real git history (gitpython) for pipeline tests:
two good CPU variants, the torch peer, and a chosen subset of the broken-kernel set."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import git

ROOT = Path(__file__).resolve().parent.parent

CONFIG = """\
kernels = ["kernels"]
[shape_sets]
tiny = [[128, 128, 128], [192, 256, 64]]
[defaults]
timing_budget_s = 0.2
"""


def init_repo(path: Path, author: str = "Kernel Dev", email: str = "dev@example.com") -> git.Repo:
    """An empty git repository on `main` at `path` whose commits are made by `author`."""
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", author)
        cw.set_value("user", "email", email)
    return repo


def make_suite_repo(path: Path, broken: tuple[str, ...] = (), good: tuple[str, ...] = ("cpp_naive", "cpp_blocked")) -> git.Repo:
    """A git repo at `path` with the named good and broken variants; shapes from `tiny`."""
    kernels = path / "kernels" / "gemm"
    kernels.mkdir(parents=True)
    for name in (*good, "torch_ref"):
        shutil.copytree(ROOT / "kernels" / "gemm" / name, kernels / name)
        manifest = kernels / name / "variant.toml"
        manifest.write_text(manifest.read_text().replace('shapes = "gemm_cpu"', 'shapes = "tiny"'))
    for name in broken:
        shutil.copytree(ROOT / "tests" / "broken_kernels" / "gemm" / name, kernels / name)
    (path / "flopwatch.toml").write_text(CONFIG)
    repo = init_repo(path)
    repo.index.add([str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and ".git" not in p.parts])
    repo.index.commit("suite <with> & 'quotes'")
    return repo


def measure_commits(root: Path, shas, store: str | Path, budget_s: float, cache: Path | None = None) -> list:
    """Each commit measured as `flopwatch run SHA --repo ROOT --store STORE --budget B [--cache
    CACHE]` measures it, in one session on the Ray this process is connected to: its device slots
    start once, as a compare or nightly keeps them across its commits, instead of once per `run`
    command (about 2 s each on the 2-core machine). Returns the runs' outcomes."""
    from pipeline.fleet import cluster
    from pipeline.project import checkout
    from pipeline.run.progress import Progress
    from pipeline.run.runflow import RunOptions, Session, run_commit
    from pipeline.store import Store

    repo = checkout.open_repo(Path(root).resolve())
    session = Session(Store(store), Path(repo.working_tree_dir) / ".flopwatch", cluster.connect(None),
                      Progress(enabled=False), cache=cache)
    try:
        return [run_commit(session, repo, sha, RunOptions(budget_s=budget_s)) for sha in shas]
    finally:
        session.shutdown()
        session.store.close()


def stored_results(db: Path) -> int:
    """How many results a SQLite store holds while a run writes to it (0 before it exists, or
    while it cannot be read yet: callers poll)."""
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:
        return 0  # not created yet


def commit_blocked_gemm(root: Path, repo: git.Repo) -> str:
    """One commit of the planted history's CPU GEMM (one pass, 256^3) in `root`: its SHA."""
    from test_planted_history import KERNEL, MANIFEST

    folder = root / "kernels" / "gemm" / "cpp_blocked"
    folder.mkdir(parents=True)
    (folder / "variant.toml").write_text(MANIFEST)
    (folder / "gemm_blocked.cpp").write_text(KERNEL.replace("REPS", "1"))
    (root / "flopwatch.toml").write_text('kernels = ["kernels"]\n\n[shape_sets]\nsmall = [[256, 256, 256]]\n')
    (root / ".gitignore").write_text(".flopwatch/\n")
    repo.index.add(["flopwatch.toml", ".gitignore", "kernels/gemm/cpp_blocked/variant.toml",
                    "kernels/gemm/cpp_blocked/gemm_blocked.cpp"])
    sha = repo.index.commit("A blocked GEMM").hexsha
    return sha
