"""A run of the working tree is recorded `<sha>+dirty` only when the user's files differ from
the commit, never because of what flopwatch writes itself: a fresh clone's first run creates
`.flopwatch/` (store, build cache, checkouts), and without a `.gitignore` line for it every run
of a committed repository was recorded dirty and kept out of the history (docs review,
2026-12-06: a fresh clone ran as `60d4eccd73+dirty`). Real git repositories throughout."""

from __future__ import annotations

from pathlib import Path

from suite_repo import init_repo

from pipeline.project import checkout
from pipeline.run.progress import Progress
from pipeline.run.runflow import Session, checkout_commit
from pipeline.store import Store


def _committed(path: Path):
    repo = init_repo(path)
    (path / "kernels").mkdir()
    (path / "kernels" / "k.cpp").write_text("// kernel\n")
    (path / "flopwatch.toml").write_text('kernels = "kernels"\n')
    repo.git.add("-A")
    repo.index.commit("kernels")
    return repo


def _flopwatchs_own_files(root: Path) -> None:
    own = root / checkout.OWN_FOLDER
    for name in ("cache/builds/ab12/entry.json", "checkouts/0123/kernels/k.cpp", "results.db", "results.db-wal"):
        (own / name).parent.mkdir(parents=True, exist_ok=True)
        (own / name).write_text("x")


def test_flopwatchs_own_folder_does_not_make_a_checkout_dirty(tmp_path):
    repo = _committed(tmp_path)
    _flopwatchs_own_files(tmp_path)
    root, info = checkout.working_tree(repo)
    assert root == tmp_path and not info.dirty and info.short == info.sha[:10]


def test_the_users_own_changes_still_do(tmp_path):
    repo = _committed(tmp_path)
    _flopwatchs_own_files(tmp_path)
    (tmp_path / "notes.txt").write_text("untracked")
    assert checkout.working_tree(repo)[1].short.endswith("+dirty")
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "kernels" / "k.cpp").write_text("// changed\n")
    assert checkout.working_tree(repo)[1].dirty
    repo.git.checkout("--", "kernels/k.cpp")
    (tmp_path / "kernels" / ".flopwatch").mkdir()  # only the repository's top folder is flopwatch's
    (tmp_path / "kernels" / ".flopwatch" / "x").write_text("x")
    assert checkout.working_tree(repo)[1].dirty


def test_a_cache_and_store_given_inside_the_repository_count_as_flopwatchs(tmp_path):
    """`--cache bench-cache --db results.db` inside the repository: the run, started from
    `checkout_commit` as `flopwatch run` starts it, is recorded clean; a file beside them is not
    flopwatch's."""
    repo = _committed(tmp_path)
    cache = tmp_path / "bench-cache"
    (cache / "builds").mkdir(parents=True)
    (cache / "builds" / "entry.json").write_text("x")
    with Store(tmp_path / "results.db") as store:
        (tmp_path / "results.db-wal").write_text("x")
        session = Session(store, tmp_path / checkout.OWN_FOLDER, None, Progress(enabled=False), cache=cache)
        _root, info = checkout_commit(session, repo, None)
        assert not info.dirty, repo.git.status("--porcelain")
        (tmp_path / "bench-cache.txt").write_text("mine")
        assert checkout_commit(session, repo, None)[1].dirty
