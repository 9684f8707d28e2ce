"""The onboarding's conventions (pipeline/onboarding/conventions/): one reader module per
convention, listed explicitly in `READERS`, each saying which files are its (`matches`) and
reading one into records (`read`) once whoever asks; `found` takes a kind of record from every
reader that gives it, so a new reader plugs in by being listed; the names a reference goes by
are written once, and tests are recognised by one rule everywhere."""

from __future__ import annotations

import types
from collections import Counter
from pathlib import Path

from pipeline.onboarding import conventions
from pipeline.onboarding.conventions import READERS, found, kernelbench
from pipeline.onboarding.conventions.ref_names import PATTERNS, defined_anywhere, holds_reference
from pipeline.onboarding.source.records import Problem, Solution, Sweep
from pipeline.onboarding.source.repo import RepoFiles, is_test

ROOT = Path(__file__).resolve().parent.parent

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(16), torch.randn(16)]
'''
SOLUTION = PROBLEM.replace("class Model(", "class ModelNew(")


def test_every_module_of_the_conventions_room_is_a_listed_reader():
    modules = sorted(p.stem for p in (ROOT / "pipeline" / "onboarding" / "conventions").glob("*.py")
                     if p.name != "__init__.py")
    assert sorted(r.__name__.rsplit(".", 1)[1] for r in READERS) == modules
    for reader in READERS:
        assert callable(reader.matches) and callable(reader.read) and reader.GIVES, reader.__name__


def test_each_file_is_read_once_per_reader_and_only_by_the_readers_it_matches(monkeypatch):
    repo = RepoFiles.from_texts({"p/1_add.py": PROBLEM, "s/1_add_new.py": SOLUTION, "lib/x.py": "def f(a):\n    return a\n"})
    asked: Counter = Counter()
    read = kernelbench.read
    monkeypatch.setattr(kernelbench, "read", lambda repo, rel: asked.update([rel]) or read(repo, rel))
    problems = found(repo, Problem, repo.sources)
    found(repo, Problem, repo.sources)
    (solution,) = found(repo, Solution, repo.sources)
    assert [p.file for p in problems] == ["p/1_add.py"] and solution.file == "s/1_add_new.py"
    assert asked == {"p/1_add.py": 1, "s/1_add_new.py": 1}  # lib/x.py is no KernelBench file: not read by it
    assert kernelbench.find_problem(solution, problems) == ("p/1_add.py", False)


def test_a_new_reader_plugs_in_by_being_listed(monkeypatch):
    """A later convention (a benchmark script's sweep, say) is a module of its own giving records
    the decisions take wherever they come from."""
    sweep = Sweep("bench/bench_add.py", 3, "fastops.add", {"N": [1 << 20, 1 << 24]}, reader="bench_script")
    reader = types.ModuleType("bench_script")
    reader.GIVES = (Sweep,)
    reader.matches = lambda repo, rel: rel.startswith("bench/")
    reader.read = lambda repo, rel: [sweep]
    repo = RepoFiles.from_texts({"bench/bench_add.py": "", "lib/x.py": ""})
    assert found(repo, Sweep, repo.sources) == []
    monkeypatch.setattr(conventions, "READERS", (*READERS, reader))
    assert found(repo, Sweep, repo.sources) == [sweep]


def test_a_reference_by_name_is_found_by_every_pattern_tests_first():
    assert "pytorch_{x}" in PATTERNS
    # a module whose path merely contains "test" is no test; every pattern counts for an operator too
    repo = RepoFiles.from_texts({"lib/latest.py": "def reference_scale(a, s):\n    return a * s\n",
                                 "tests/test_scale.py": "def pytorch_scale(a, s):\n    return a * s\n"})
    assert defined_anywhere(repo, "myscale") == ("tests/test_scale.py:pytorch_scale", "tests/test_scale.py:1")
    # an entry module for `init` defines a reference beside its functions; a torch_ helper is none
    assert holds_reference("def rms_norm_ref(x):\n    pass\n")
    assert not holds_reference("def torch_compile_all(x):\n    pass\n")


def test_no_module_of_flopwatch_reads_as_a_test():
    """flopwatch onboarding itself reads a module named test_*.py as a test: none of its own is."""
    named = [p.relative_to(ROOT).as_posix() for top in ("pipeline", "workers", "reports")
             for p in (ROOT / top).rglob("*.py")]
    assert [rel for rel in named if is_test(rel)] == []
