"""What `flopwatch new` and `init` draft in a user's repository: modules outside packages
drafted by `init`, paths taken as the user's shell gives them."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import git
import pytest

from pipeline.cli import main as cli

HERE = Path(__file__).resolve().parent

# A new user's repository (docs review, "A new user's repository"): a function, its `_ref`, and a
# test comparing them.
OPS = '''import torch
import torch.nn.functional as F


def fused_silu_mul(a, b):
    return F.silu(a) * b


def fused_silu_mul_ref(a, b):
    return a * torch.sigmoid(a) * b
'''
TEST = '''import pytest
import torch

from {module} import fused_silu_mul, fused_silu_mul_ref


@pytest.mark.parametrize("n", [4096])
def test_fused(n):
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.testing.assert_close(fused_silu_mul(a, b), fused_silu_mul_ref(a, b))
'''


def _repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    g = git.Repo.init(root, initial_branch="main")
    g.index.add(list(files))
    g.index.commit("sources", author=git.Actor("Dev", "dev@example.com"))
    return root


def _user_repo(tmp_path: Path) -> Path:
    return _repo(tmp_path / "repo", {"ops.py": OPS, "tests/test_ops.py": TEST.format(module="ops")})


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


# -- init drafts modules outside packages ---------------------------------------------------------

@pytest.mark.parametrize("module", ["ops.py", "fused/ops.py", "fused/silu.py"])
def test_init_drafts_a_module_outside_any_package(tmp_path, capsys, module):
    """A top-level ops.py, or a folder of modules without __init__.py: drafted by `init` as by
    `new` (named ops.py, or keeping `def foo_ref` beside `def foo`)."""
    dotted = module[:-3].replace("/", ".")
    repo = _repo(tmp_path / "repo", {module: OPS, "tests/test_ops.py": TEST.format(module=dotted)})
    assert cli(["init", "--repo", str(repo), "--no-build", "--no-workflow", "--json"]) == 0
    (row,) = _json(capsys)["drafts"]
    assert row["variant"] == "fused_silu_mul" and row["state"] == "not built"
    manifest = tomllib.loads((repo / "flopwatch" / "fused_silu_mul" / "variant.toml").read_text())
    assert manifest["binding"]["entry"].endswith(f"{module}:fused_silu_mul")


def test_init_leaves_a_lone_script_with_a_reference_of_code_found_elsewhere(tmp_path, capsys):
    """Outside a package, `def ref_kernel` beside no `def kernel` is a script's helper (a
    problem's reference.py), not an entry module; `init`'s message then names what it looks
    for, Python modules included, and points at `flopwatch new FILE`."""
    repo = _repo(tmp_path / "repo", {"problem/reference.py": "def ref_kernel(data):\n    return data\n\n\n"
                                                            "def generate_input(n):\n    return n\n"})
    assert cli(["init", "--repo", str(repo), "--no-build"]) == 2
    err = capsys.readouterr().err
    assert ("no __global__ kernel, pybind11 module, torch extension, KernelBench problem or Python entry module "
            "(functional.py, ops.py or interface.py, or a module keeping `def foo_ref` beside `def foo`)") in err
    assert "flopwatch new FILE" in err and not (repo / "flopwatch").exists()


# -- paths as the user types them -------------------------------------------------------------------

def test_sources_are_taken_from_the_shell_s_folder_or_the_repository_s(tmp_path, capsys, monkeypatch):
    repo = _repo(tmp_path / "R", {"src/ops.py": OPS, "src/tests/test_ops.py": TEST.format(module="ops")})
    monkeypatch.chdir(tmp_path)
    assert cli(["new", "--repo", "R", "R/src/ops.py", "--no-build", "--json"]) == 0  # the shell's path
    assert [r["variant"] for r in _json(capsys)["drafts"]] == ["fused_silu_mul"]
    monkeypatch.chdir(repo / "src")
    for named in ("ops.py", "src/ops.py", str(repo / "src" / "ops.py")):  # the shell's, the repository's, absolute
        assert cli(["new", "--repo", str(repo), named, "--no-build", "--json", "--force"]) == 0, named
        (row,) = _json(capsys)["drafts"]
        assert (row["folder"], row["state"]) == ("flopwatch/fused_silu_mul", "not built")


def test_a_source_outside_the_repository_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    repo = _user_repo(tmp_path)
    (tmp_path / "stray.py").write_text(OPS)
    monkeypatch.chdir(tmp_path)
    assert cli(["new", "--repo", str(repo), "stray.py", "--no-build"]) == 2
    assert f"stray.py: {tmp_path / 'stray.py'} is outside the repository {repo}" in capsys.readouterr().err
    assert cli(["new", "--repo", str(repo), "nothing.py", "--no-build"]) == 2
    assert (f"nothing.py: no such file or folder (looked in the current folder {tmp_path} or the repository {repo})"
            in capsys.readouterr().err)
    assert not (repo / "flopwatch").exists()

