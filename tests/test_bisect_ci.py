"""In GitHub Actions `flopwatch bisect` builds only commits of the default branch's history: a full
clone holds every branch and tag, and a job with the nightly's secrets and machines must not build
an unreviewed branch's kernels (docs/ci.md). Checked on a real clone with origin/main and a branch
that is not on it; .github/workflows/bisect.yml's own step is checked in tests/test_workflows.py."""

from __future__ import annotations

import json
import subprocess

import git
import pytest

from pipeline import cli
from pipeline.project import checkout


def _git(cwd, *args) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True,
                          timeout=30).stdout.strip()


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A clone of a repository whose main has two commits and whose branch `unreviewed` has one
    more; returns (clone path, {name: sha})."""
    root = tmp_path_factory.mktemp("bisect_ci")
    upstream = root / "upstream"
    _git(root, "init", "-q", "-b", "main", str(upstream))
    shas = {}
    for name in ("first", "second"):
        _git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", name)
        shas[name] = _git(upstream, "rev-parse", "HEAD")
    _git(upstream, "checkout", "-q", "-b", "unreviewed")
    _git(upstream, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "evil")
    shas["evil"] = _git(upstream, "rev-parse", "HEAD")
    _git(upstream, "checkout", "-q", "main")
    _git(root, "clone", "-q", str(upstream), str(root / "clone"))
    return root / "clone", shas


def _ci_env(tmp_path, branch="main") -> dict:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"inputs": {}, "repository": {"full_name": "octo-org/kernels",
                                                               "default_branch": branch}}))
    return {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_PATH": str(event)}


def test_commits_of_the_default_branch_pass(clone, tmp_path):
    path, shas = clone
    repo = git.Repo(path)
    assert checkout.off_default_branch(repo, {"--good": shas["first"], "--bad": "origin/main"},
                                       _ci_env(tmp_path)) is None


@pytest.mark.parametrize("rev", ["evil", "origin/unreviewed"])
def test_a_commit_off_the_default_branch_is_refused_in_ci(clone, tmp_path, rev):
    path, shas = clone
    repo = git.Repo(path)
    rev = shas.get(rev, rev)
    why = checkout.off_default_branch(repo, {"--good": shas["first"], "--bad": rev}, _ci_env(tmp_path))
    assert why == (f"--bad {rev} ({shas['evil'][:12]}) is not on the history of the default branch origin/main: "
                   f"in CI only its commits are built")
    # outside Actions a developer bisects whatever they have
    assert checkout.off_default_branch(repo, {"--bad": rev}, {}) is None


def test_without_the_default_branch_in_the_clone_or_the_event_it_refuses(clone, tmp_path):
    path, shas = clone
    repo = git.Repo(path)
    assert "origin/trunk is not in the clone" in checkout.off_default_branch(
        repo, {"--bad": shas["first"]}, _ci_env(tmp_path, "trunk"))
    assert "does not name it" in checkout.off_default_branch(
        repo, {"--bad": shas["first"]}, {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_PATH": str(tmp_path / "none")})


def test_the_command_refuses_before_anything_is_built(clone, tmp_path, monkeypatch, capsys):
    path, shas = clone
    for key, value in _ci_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    code = cli.main(["bisect", "--repo", str(path), "--good", shas["first"], "--bad", "origin/unreviewed",
                     "--variant", "any"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("flopwatch bisect: error: --bad origin/unreviewed ("), err
    assert len(err.strip().splitlines()) == 1 and not (path / ".flopwatch").exists()
