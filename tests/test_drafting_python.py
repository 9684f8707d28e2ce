"""`flopwatch new` on Python files, as the PyTorch world writes them (pipeline/onboarding/conventions/, write/python_drafts.py):
a torch extension's functions, a KernelBench problem and its solutions, a package's functional
entries — each draft loads as a manifest, says what it guessed, and for tests/ecosystem_repo
reproduces what was written there by hand."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pipeline.onboarding.decide.ops import op_from_params
from pipeline.onboarding.onboard import python_drafts
from pipeline.onboarding.source.repo import RepoFiles
from pipeline.project.config import load_config
from pipeline.project.discovery import find_ops
from pipeline.project.manifest import load_variant

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(HERE / "ecosystem_repo", repo, ignore=shutil.ignore_patterns("flopwatch", "flopwatch.toml"))
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    return repo


def _new(repo: Path, *paths: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "new", *paths, "--no-build", "--json"], cwd=repo,
                          capture_output=True, text=True, check=False, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def _manifest(repo: Path, name: str) -> dict:
    return tomllib.loads((repo / "flopwatch" / name / "variant.toml").read_text())


def _loads(repo: Path, name: str):
    config = load_config(repo)
    ops, _ = find_ops(repo, config.kernel_dirs)
    return load_variant(repo, repo / "flopwatch" / name / "variant.toml", config, ops)


def test_a_solution_is_drafted_against_its_problem(tmp_path):
    repo = _repo(tmp_path)
    out = _new(repo, "solutions/add_inline.py", "problems/linear.py")
    assert [d["variant"] for d in out["drafts"]] == ["add_inline", "linear"]
    assert out["drafts"][0]["guessed"] == []  # `add_inline` answers `add` (problems/add.py): its stem, no guess
    add = _manifest(repo, "add_inline")
    assert add["problem"] == {"file": "../../problems/add.py"}
    assert add["backend"] == "torch" and add["binding"]["entry"] == "../../solutions/add_inline.py:ModelNew"
    assert add["extensions"] == [{"from": "../../solutions/add_inline.py"}]
    problem = _manifest(repo, "linear")
    assert problem["peer"] is True and problem["problem"] == {"file": "../../problems/linear.py"}
    assert problem["binding"] == {"kind": "python", "entry": "../../problems/linear.py:Model"}
    for name in ("add_inline", "linear"):
        assert _loads(repo, name).name == name  # a valid manifest as drafted


def test_a_problem_found_by_its_twin_is_no_guess(tmp_path):
    repo = tmp_path / "kb"
    (repo / "prompts").mkdir(parents=True)
    (repo / "prompts" / "model_ex_add.py").write_text((HERE / "ecosystem_repo" / "problems" / "add.py").read_text())
    (repo / "prompts" / "model_ex_other.py").write_text((HERE / "ecosystem_repo" / "problems" / "add.py").read_text())
    (repo / "prompts" / "model_new_ex_add_triton.py").write_text(
        "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a + b\n")
    texts = {p.relative_to(repo).as_posix(): p.read_text() for p in repo.rglob("*.py")}
    drafts, _ = python_drafts(RepoFiles.from_texts(texts), "prompts/model_new_ex_add_triton.py", "flopwatch", set(),
                              functional=False)
    (draft,) = drafts
    assert draft.op == "model_ex_add" and draft.guessed == ()  # the longest problem name it starts with


def test_an_extensions_functions_are_drafted_as_the_authors_call_them(tmp_path):
    repo = _repo(tmp_path)
    out = _new(repo, "ext/csrc/swiglu.cpp", "ext/csrc/bind.cpp")  # the extension's sources, as a user points at them
    (draft,) = out["drafts"]
    assert draft["variant"] == "myext_cpp_swiglu" and draft["op"] == "swiglu"
    m = _manifest(repo, "myext_cpp_swiglu")
    assert m["binding"] == {"kind": "pybind11", "module": "myext_cpp", "entry": "swiglu", "returns": True}
    assert m["extensions"] == [{"from": "../../ext/setup.py", "name": "myext_cpp"}]
    assert m["devices"] == ["cpu"] and m["shapes"] == [[256, 1024]]  # a C++ extension; the bench script's tensors
    assert any("a torch extension built by ext/setup.py" in n for n in out["notes"])
    assert _loads(repo, "myext_cpp_swiglu").extensions[0]["kind"] == "setup"


def test_a_packages_functional_entries_are_drafted_where_name_and_signature_fit_an_op(tmp_path):
    repo = _repo(tmp_path)
    out = _new(repo, "pkg/src/mylib/norms.py")
    names = [d["variant"] for d in out["drafts"]]
    assert names == ["rms_norm", "rms_norm_wrong_shape", "rms_norm_wrong_dtype", "rms_norm_in_place"]
    in_place = _manifest(repo, "rms_norm_in_place")  # writes the output it is handed: named in args
    assert "returns" not in in_place["binding"] and in_place["binding"]["args"] == ["X", "W", "eps", "Y"]
    m = _manifest(repo, "rms_norm")
    assert m["binding"] == {"kind": "python", "entry": "mylib.norms:rms_norm", "returns": True}
    assert m["op"] == "rms_norm" and m["dtypes"] == ["fp32"] and "devices" in m
    assert set(out["drafts"][0]["guessed"]) == {"dtypes", "shapes"}  # no script calls it with tensors
    assert tomllib.loads((repo / "flopwatch.toml").read_text())["include_dirs"] == ["pkg/src"]
    assert _loads(repo, "rms_norm").binding.returns


def test_init_drafts_problems_solutions_and_extensions_but_not_a_packages_helpers(tmp_path):
    repo = _repo(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "init", "--no-build", "--no-workflow", "--json"],
                          cwd=repo, capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    drafted = {d["variant"] for d in json.loads(proc.stdout)["drafts"]}
    assert {"linear", "add", "no_data", "linear_new", "linear_cached", "add_inline", "add_broken",
            "myext_cpp_swiglu"} <= drafted
    assert not {"rms_norm", "rms_norm_wrong_shape"} & drafted


@pytest.mark.parametrize("params, returns, op, mapped", [
    (["X", "W", "eps", "offset"], True, "rms_norm", ["X", "W", "eps", ""]),
    (["a", "b"], True, "swiglu", ["A", "B"]),
    (["q", "k", "v"], True, "attention", ["Q", "K", "V"]),
])
def test_an_op_from_a_functions_parameters(params, returns, op, mapped):
    name = {"rms_norm": "my_rms_norm", "swiglu": "swiglu", "attention": "flash_attn"}[op]
    assert op_from_params(name, params, returns) == (op, mapped)
