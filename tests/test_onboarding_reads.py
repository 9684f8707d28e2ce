"""`flopwatch new` and `init` read a repository once (pipeline/onboarding/source/repo.py): one
`git ls-files` listing, each source file's text read once and each Python text parsed once,
whatever number of drafts, entries and tests ask about it.

Each command runs end to end (`--no-build --no-workflow`) on a git copy of a fixture repository
while `git ls-files`, walks of the repository, reads of its source files and `ast.parse` calls
are counted; the counts are printed per file when the rule breaks."""

from __future__ import annotations

import ast
import json
import pathlib
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import git
import pytest

from pipeline.cli import main as cli

HERE = Path(__file__).resolve().parent
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".hip", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh", ".yml")  # task.yml too

# A package of functional entries as Liger-Kernel writes them, with tests that compare each
# entry with torch, with a reference by name, and with the test's own statements: every entry
# asks about every test file.
PACKAGE = {
    "src/fastops/__init__.py": "",
    "src/fastops/functional.py": '''import torch


def fast_scale(x, alpha: float = 2.0):
    return x * alpha


def fast_add(a, b):
    return a + b


def fast_norm(x, w, eps: float = 1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def fast_norm_ref(x, w, eps: float = 1e-6):
    return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * w
''',
    "test/test_functional.py": '''import pytest
import torch

from fastops.functional import fast_add, fast_norm, fast_scale


@pytest.mark.parametrize("B, N", [(4, 64), (2, 8)])
def test_scale(B, N):
    x = torch.randn(B, N)
    torch.testing.assert_close(fast_scale(x, 3.0), x * 3.0)


def test_add():
    a, b = torch.randn(16), torch.randn(16)
    torch.testing.assert_close(fast_add(a, b), torch.add(a, b))


def test_norm():
    x, w = torch.randn(8, 32), torch.randn(32)
    torch.testing.assert_close(fast_norm(x, w), fast_norm(x, w))
''',
    "test/test_more.py": '''import torch

from fastops.functional import fast_add


def test_add_again():
    a = torch.randn(4, 4)
    assert torch.allclose(fast_add(a, a), torch.add(a, a))
''',
}


class Counts:
    """What one command did to the repository at `root`."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.listings = 0  # git ls-files
        self.walks = 0  # rglob of the repository's root
        self.reads: Counter = Counter()  # repository-relative source file → reads
        self.parses: Counter = Counter()  # text → ast.parse calls
        self.counting = True  # off once the command is over

    def rel(self, path) -> str | None:
        try:
            rel = Path(path).resolve().relative_to(self.root).as_posix()
        except (ValueError, OSError):
            return None
        return rel if rel.endswith(SOURCE_SUFFIXES) else None

    def _python_texts(self) -> dict[str, str]:
        return {p.read_text(errors="replace"): p.relative_to(self.root).as_posix()
                for p in sorted(self.root.rglob("*.py")) if ".git" not in p.parts}

    def summary(self) -> str:
        files = {t: n for t, n in self.parses.items() if t in self._python_texts()}
        return (f"git ls-files {self.listings} times, {self.walks} walks of the repository, "
                f"{sum(self.reads.values())} reads of {len(self.reads)} files, {sum(files.values())} parses of "
                f"{len(files)} Python files ({sum(self.parses.values()) - sum(files.values())} parses of other "
                f"text: launch expressions)")

    def twice(self) -> list[str]:
        """The files read or parsed more than once (a text that several files hold may be
        parsed once per file)."""
        holders = Counter(p.read_text(errors="replace") for p in self.root.rglob("*")
                          if p.is_file() and ".git" not in p.parts and p.suffix == ".py")
        out = [f"{rel}: read {n} times" for rel, n in sorted(self.reads.items()) if n > 1]
        by_text = self._python_texts()
        out += [f"{by_text[text]}: parsed {n} times" for text, n in self.parses.items()
                if text in by_text and n > holders[text]]
        return sorted(out)


@pytest.fixture
def counting(monkeypatch):
    """Count, while a command runs, what it asks of the repository of `counts.root`."""
    box: dict[str, Counts] = {}
    run, rglob = subprocess.run, pathlib.Path.rglob
    read_text, read_bytes, parse = pathlib.Path.read_text, pathlib.Path.read_bytes, ast.parse

    def counted_run(args, *a, **kw):
        if box["counts"].counting and "ls-files" in [str(x) for x in (args if isinstance(args, (list, tuple))
                                                                       else [args])]:
            box["counts"].listings += 1
        return run(args, *a, **kw)

    def counted_rglob(self, pattern, *a, **kw):
        if box["counts"].counting and Path(self).resolve() == box["counts"].root:
            box["counts"].walks += 1
        return rglob(self, pattern, *a, **kw)

    def counted_read_text(self, *a, **kw):
        rel = box["counts"].rel(self)
        if rel and box["counts"].counting:
            box["counts"].reads[rel] += 1
        return read_text(self, *a, **kw)

    def counted_read_bytes(self):
        rel = box["counts"].rel(self)
        if rel and box["counts"].counting:
            box["counts"].reads[rel] += 1
        return read_bytes(self)

    def counted_parse(source, *a, **kw):
        if isinstance(source, str) and box["counts"].counting:
            box["counts"].parses[source] += 1
        return parse(source, *a, **kw)

    def start(root: Path) -> Counts:
        box["counts"] = Counts(root)
        monkeypatch.setattr(subprocess, "run", counted_run)
        monkeypatch.setattr(pathlib.Path, "rglob", counted_rglob)
        monkeypatch.setattr(pathlib.Path, "read_text", counted_read_text)
        monkeypatch.setattr(pathlib.Path, "read_bytes", counted_read_bytes)
        monkeypatch.setattr(ast, "parse", counted_parse)
        return box["counts"]

    return start


def _git_copy(tmp_path: Path, source: Path | None = None, files: dict[str, str] | None = None) -> Path:
    repo = tmp_path / "repo"
    if source is not None:
        shutil.copytree(source, repo, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, text in (files or {}).items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    g = git.Repo.init(repo, initial_branch="main")
    g.index.add([p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts])
    g.index.commit("sources", author=git.Actor("Dev", "dev@example.com"))
    return repo


def _run(counting, repo: Path, capsys, *command: str) -> tuple[Counts, dict]:
    counts = counting(repo)
    cli([*command, "--repo", str(repo), "--no-build", "--json", "--out", "drafted"])
    counts.counting = False
    out = json.loads(capsys.readouterr().out)
    return counts, out


def _read_once(counts: Counts) -> None:
    twice = counts.twice()
    print(counts.summary())  # shown with `pytest -s`
    assert counts.listings == 1 and counts.walks <= 1 and not twice, counts.summary() + ":\n" + "\n".join(twice)


@pytest.mark.parametrize("command", [["init", "--no-workflow"], ["new", "pkg", "problems", "solutions", "ext", "dotted"]])
def test_new_and_init_read_the_ecosystem_repository_once(tmp_path, counting, capsys, command):
    repo = _git_copy(tmp_path, HERE / "ecosystem_repo")
    counts, out = _run(counting, repo, capsys, *command)
    assert len(out["drafts"]) >= 10  # the command drafted what it always did
    _read_once(counts)


def test_init_reads_a_kernel_collection_once(tmp_path, counting, capsys):
    repo = _git_copy(tmp_path, HERE / "new_kernels")
    counts, out = _run(counting, repo, capsys, "init", "--no-workflow")
    assert {d["variant"] for d in out["drafts"]} >= {"row_softmax", "sgemm_tiled", "naive", "main"}
    _read_once(counts)


def test_entries_asking_about_every_test_read_each_test_once(tmp_path, counting, capsys):
    repo = _git_copy(tmp_path, files=PACKAGE)
    counts, out = _run(counting, repo, capsys, "new", "src/fastops/functional.py")
    assert {d["variant"] for d in out["drafts"]} == {"fast_scale", "fast_add", "fast_norm"}
    _read_once(counts)


@pytest.mark.parametrize("command", [["init", "--no-workflow"], ["new", "problems"]])
def test_new_and_init_read_a_repository_of_challenge_problems_once(tmp_path, counting, capsys, command):
    """The challenge format's reader finds the problem folders once, whichever file asks."""
    repo = _git_copy(tmp_path, HERE / "challenge_repo", {"problems/vectoradd_py/solutions/wrong/slow.py":
                                                         "def custom_kernel(data):\n    return data[0] + data[1]\n"})
    counts, out = _run(counting, repo, capsys, *command)  # drafted beside the hand-written manifests, in drafted/
    assert sorted(d["variant"] for d in out["drafts"]) == ["matmul_py", "vectoradd_py", "vectoradd_py_slow"]
    _read_once(counts)
