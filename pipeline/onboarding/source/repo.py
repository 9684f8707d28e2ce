"""The repository as onboarding reads it, once: one listing (git's, or every file where the folder
is no git checkout), each file's text read on first use and kept, each Python file parsed once
and read by one interpreter and, for a test, one `PytestFile`; which files are tests, where a
module's package is rooted and what it is imported as; and readings kept per file
(`reading`), so that no later stage reads or parses a file again whatever number of drafts,
entries and tests ask about it."""

from __future__ import annotations

import ast
import io
import subprocess
from pathlib import Path, PurePosixPath

from pipeline.onboarding.source.c_text import SOURCE_SUFFIXES
from pipeline.onboarding.source.py_eval import Interpreter
from pipeline.onboarding.source.pytest_file import PytestFile
from pipeline.project.manifest import repository_files

# Host code searched for launches: enough for a kernel collection, bounded for a monorepo.
MAX_HOST_FILES, MAX_FILE_BYTES = 3000, 2 << 20
# Python scripts read for launches, tensors and sizes, bounded the same way.
MAX_SCRIPTS = 2000


def is_test(rel: str) -> bool:
    """A test module: under a test/ or tests/ folder, or named test_*.py / *_test.py (the rule
    every stage uses)."""
    path = PurePosixPath(rel)
    return rel.endswith(".py") and (any(p in ("test", "tests", "testing") for p in path.parts[:-1])
                                    or path.name.startswith("test_") or path.stem.endswith("_test"))


def listed_files(root: Path) -> list[Path]:
    """The repository's files as git lists them (tracked and untracked, ignored ones left out),
    or every file below `root` where it is no git checkout."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard"], capture_output=True,
                                text=True, timeout=60, check=True).stdout.splitlines()
        return [root / f for f in listed]
    except (OSError, subprocess.SubprocessError):
        return [f for f in root.rglob("*") if ".git" not in f.parts]


class RepoFiles:
    """One repository's files for one command.

    host: its C/C++/CUDA/HIP sources (repository-relative, at most MAX_HOST_FILES); scripts: its
    Python files (at most MAX_SCRIPTS); sources: both (at most their sum), then the files a
    command names beyond those bounds (`include`); files: every file, the drafts' folder aside
    (what an extension's glob may match, as discovery lists them); each of them read or walked
    at most once."""

    def __init__(self, root: Path | None, out_dir: str = "", texts: dict[str, str] | None = None,
                 files: frozenset[str] | None = None):
        self.root, self.out_dir = root, out_dir
        self._texts: dict[str, str] = dict(texts or {})
        self._files = files
        self._memo: dict = {}
        if texts is not None or root is None:
            self.sources = list(self._texts)
            self.host = [r for r in self.sources if r.endswith(SOURCE_SUFFIXES)]
            self.scripts = [r for r in self.sources if r.endswith(".py")]
            return
        picked: list[Path] = []
        for f in listed_files(root):
            if f.suffix in (*SOURCE_SUFFIXES, ".py") and f.is_file() and f.stat().st_size <= MAX_FILE_BYTES \
                    and not (out_dir and f.relative_to(root).as_posix().startswith(out_dir + "/")):
                picked.append(f)
        picked.sort()  # as paths: `a/b.py` before `a-b.py`

        def rels(suffixes: tuple[str, ...], limit: int) -> list[str]:
            return [f.relative_to(root).as_posix() for f in picked if f.suffix in suffixes][:limit]

        self.host = rels(SOURCE_SUFFIXES, MAX_HOST_FILES)
        self.scripts = rels((".py",), MAX_SCRIPTS)
        self.sources = rels((*SOURCE_SUFFIXES, ".py"), MAX_HOST_FILES + MAX_SCRIPTS)

    @classmethod
    def at(cls, root: Path, out_dir: str = "") -> RepoFiles:
        """The checkout at `root`, listed once; the drafts' folder `out_dir` is not read."""
        return cls(root, out_dir)

    @classmethod
    def from_texts(cls, texts: dict[str, str], files: frozenset[str] | None = None,
                   root: Path | None = None) -> RepoFiles:
        """A repository given as its files' texts (repository-relative path → text), in this order."""
        return cls(root, "", texts, frozenset(texts) if files is None else files)

    def include(self, rels: list[str]) -> None:
        """Files a command names that the listing's bounds left out: read as sources too."""
        for rel in rels:
            if rel not in self.sources and self.exists(rel):
                self.sources.append(rel)
                if self._files is not None:
                    self._files = self._files | {rel}

    # -- each file once -------------------------------------------------------------------------------

    def exists(self, rel: str) -> bool:
        """Whether the repository has the file (given, or on disk)."""
        return rel in self._texts or (self.root is not None and (self.root / rel).is_file())

    def path(self, rel: str) -> Path:
        """The file's path on disk."""
        return (self.root or Path(".")) / rel

    def text(self, rel: str) -> str:
        """The file's text ("" for none), read once, as `Path.read_text(errors="replace")` reads it."""
        if rel not in self._texts:
            data = self.raw(rel)
            self._texts[rel] = io.TextIOWrapper(io.BytesIO(data), encoding=io.text_encoding(None),
                                                errors="replace").read() if data is not None else ""
        return self._texts[rel]

    def raw(self, rel: str) -> bytes | None:
        """The file's bytes, read once (None where there is no such file)."""
        key = ("raw", rel)
        if key not in self._memo:
            path = self.path(rel)
            self._memo[key] = path.read_bytes() if self.root is not None and path.is_file() else \
                (self._texts[rel].encode() if rel in self._texts else None)
        return self._memo[key]

    def tree(self, rel: str) -> ast.Module | None:
        """The file's syntax tree, parsed once; None where it is not Python one can read."""
        def parse() -> ast.Module | None:
            try:
                return ast.parse(self.text(rel), filename=rel)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
        return self.reading("tree", rel, parse)

    def interpreter(self, rel: str) -> Interpreter | None:
        """The interpreter of the file's tree (`source.py_eval`), one per file."""
        return self.reading("interpreter", rel, lambda: Interpreter(rel, t) if (t := self.tree(rel)) else None)

    def pytest_file(self, rel: str) -> PytestFile:
        """The file read as a test (`source.pytest_file`), once."""
        return self.reading("pytest", rel, lambda: PytestFile(rel, self.tree(rel), self.interpreter(rel)))

    def records(self, reader, rel: str) -> list:
        """What a convention module (`pipeline.onboarding.conventions`: `matches(repo, rel)`,
        `read(repo, rel)`) reads in the file: asked once, kept for whoever asks next."""
        return self.reading(reader.__name__, rel,
                            lambda: list(reader.read(self, rel)) if reader.matches(self, rel) else [])

    def reading(self, kind: str, rel: str, read):
        """What `read()` gives for the file, computed on the first ask of this kind and kept."""
        key = (kind, rel)
        if key not in self._memo:
            self._memo[key] = read()
        return self._memo[key]

    # -- the repository's shape ------------------------------------------------------------------------

    @property
    def files(self) -> frozenset[str]:
        """Every file of the checkout but the drafts, with the sources: walked once, when asked."""
        if self._files is None:
            walked = repository_files(self.root) if self.root is not None else frozenset()
            out = self.out_dir
            self._files = frozenset(self.sources) | frozenset(
                f for f in walked if not (out and f.startswith(out + "/")))
        return self._files

    def import_root(self, rel: str) -> tuple[str, str]:
        """(import root, dotted module) of a file inside a package (`src/liger_kernel/ops/x.py` →
        ("src", "liger_kernel.ops.x")), or ("", "") outside one."""
        parts = list(PurePosixPath(rel).with_suffix("").parts)
        files = self.files
        depth = 0
        while depth < len(parts) - 1 and "/".join(parts[:len(parts) - 1 - depth] + ["__init__.py"]) in files:
            depth += 1
        if depth == 0:
            return "", ""
        root = "/".join(parts[:len(parts) - 1 - depth])
        return root or ".", ".".join(parts[len(parts) - 1 - depth:])

    def module_of(self, rel: str) -> str:
        """The dotted module a package file is imported as; "" for a file taken by its path (a
        test, a script: not importable as part of a package)."""
        return "" if is_test(rel) else self.import_root(rel)[1]

    def package_of(self, rel: str) -> str:
        """The top folder of the package a module belongs to (`src/liger_kernel`), or its folder."""
        root = self.import_root(rel)[0]
        if not root:
            return str(PurePosixPath(rel).parent) if "/" in rel else ""
        inner = PurePosixPath(rel).relative_to(root).parts if root != "." else PurePosixPath(rel).parts
        return f"{root}/{inner[0]}" if root != "." else inner[0]
