"""The agreement checks of one drafting (`flopwatch new` / `init`: whether a built-in op computes
what the repository's own reference computes) fork from one runner that imported torch once
(`pipeline.onboarding.decide.peer.one_interpreter`, `workers.job.zygote`), and each still ends
alone: a check that crashes or hangs costs only its own verdict."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.onboarding import onboard
from pipeline.onboarding.decide import peer
from pipeline.onboarding.source.repo import RepoFiles

# Two entries whose names say the built-in swiglu, each with its reference, which notes the
# process it runs in (and that process's parent) before it computes.
OPS = '''import os

import torch

MARKS = {marks!r}


def _mark(who):
    with open(MARKS, "a") as f:
        f.write(f"{{who}} {{os.getpid()}} {{os.getppid()}}\\n")


def fused_silu_mul(a, b):
    return torch.nn.functional.silu(a) * b


def fused_silu_mul_ref(a, b):
    _mark("fused")
    {first}
    return a * torch.sigmoid(a) * b


def silu_mul(a, b):
    return torch.nn.functional.silu(a) * b


def silu_mul_ref(a, b):
    _mark("plain")
    return a * torch.sigmoid(a) * b
'''
TEST = '''import torch

from mypkg.ops import fused_silu_mul, fused_silu_mul_ref, silu_mul, silu_mul_ref


def test_it():
    a = torch.randn(4, 16)
    b = torch.randn(4, 16)
    torch.testing.assert_close(fused_silu_mul(a, b), fused_silu_mul_ref(a, b))
    torch.testing.assert_close(silu_mul(a, b), silu_mul_ref(a, b))
'''


def _plan(tmp_path: Path, first: str = "pass"):
    marks = tmp_path / "marks.txt"
    files = {"mypkg/__init__.py": "", "mypkg/ops.py": OPS.format(marks=str(marks), first=first),
             "tests/test_ops.py": TEST}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    plan = onboard.plan_files(RepoFiles.from_texts(files, root=tmp_path), [], ["mypkg/ops.py"])
    texts = {d.name: d.files["variant.toml"] for d in plan.drafts}
    seen = [line.split() for line in marks.read_text().splitlines()] if marks.exists() else []
    return texts, {who: (int(pid), int(parent)) for who, pid, parent in seen}


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_every_check_of_one_drafting_forks_from_one_runner_that_ends_with_it(tmp_path):
    texts, seen = _plan(tmp_path)
    for name in ("fused_silu_mul", "silu_mul"):
        assert "# timed as its peer: agrees with the reference on the test's inputs" in texts[name]
    (fused_pid, fused_parent), (plain_pid, plain_parent) = seen["fused"], seen["plain"]
    assert fused_pid != plain_pid  # each check in a process of its own
    # both forked by one runner, not spawned by this process one interpreter each
    assert fused_parent == plain_parent != os.getpid()
    assert _gone(fused_parent)  # the runner ended with the drafting


def test_a_check_that_crashes_or_hangs_ends_alone_and_the_next_check_still_runs(tmp_path, monkeypatch):
    texts, seen = _plan(tmp_path, first="os.kill(os.getpid(), 9)")
    assert "is unverified (the check of both on the CPU ended (SIGKILL))" in texts["fused_silu_mul"]
    assert "# timed as its peer: agrees with the reference" in texts["silu_mul"]
    assert seen["fused"][1] == seen["plain"][1]  # the runner outlived the crashed check

    monkeypatch.setattr(peer, "AGREEMENT_TIMEOUT_S", 3.0)
    texts, seen = _plan(tmp_path / "hangs", first="import time; time.sleep(600)")
    assert "is unverified (the check of both on the CPU timed out)" in texts["fused_silu_mul"]
    assert "# timed as its peer: agrees with the reference" in texts["silu_mul"]
    assert _gone(seen["fused"][0])  # the hung check was killed, not left running


def test_outside_a_drafting_a_check_spawns_its_own_interpreter(tmp_path):
    """`agreement` called alone (no runner open) still works, as a child of this process."""
    files = {"mypkg/__init__.py": "", "mypkg/ops.py": OPS.format(marks=str(tmp_path / "marks.txt"), first="pass"),
             "tests/test_ops.py": TEST}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    drafts, _ = onboard.python_drafts(RepoFiles.from_texts(files, root=tmp_path), "mypkg/ops.py", "flopwatch",
                                      set(), True, [])
    assert all("agrees with the reference" in d.files["variant.toml"] for d in drafts)
    parents = {line.split()[2] for line in (tmp_path / "marks.txt").read_text().splitlines()}
    assert parents == {str(os.getpid())}
