"""The benchmark scripts `new` / `init` run under the recorder share one wall-time budget
(`--record-budget`): on an H100 node Liger-Kernel's 25 scripts, two at a time, ran past nine
minutes. Past the budget no script starts, the scripts named after an entry go first, and an
entry left unrecorded takes its test's sizes scaled, its draft saying why."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import git

from pipeline.onboarding import bench_runs, onboard
from pipeline.onboarding.source.repo import RepoFiles

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def test_no_script_starts_past_the_budget_and_the_named_ones_go_first(monkeypatch):
    started = []

    def record_calls(root, script, targets, limits, roots):
        started.append((script, limits.time_s))
        time.sleep(0.3)
        return SimpleNamespace(records=[], ended="finished", detail="", of=lambda target: [])

    monkeypatch.setattr(bench_runs, "record_calls", record_calls)
    entry = SimpleNamespace(name="liger_rms_norm")
    wanted = {"benchmark/bench_mlp.py": [(entry, "t", {})], "benchmark/benchmark_rms_norm.py": [(entry, "t", {})],
              "benchmark/bench_other.py": [(entry, "t", {})]}
    said = []
    got = bench_runs._record_all(SimpleNamespace(root=Path(".")), wanted, (), said.append, jobs=1, budget_s=1.4,
                                 first={"benchmark/benchmark_rms_norm.py"})
    assert started[0][0] == "benchmark/benchmark_rms_norm.py"  # named after the entry: first
    assert len(started) == 2 and started[1][1] < 1.4  # the second may take only what is left
    assert set(got) == {s for s, _ in started}  # the one never started is absent
    assert any("1 script(s) not run: the recording budget of 1 s was spent" in line for line in said), said


def test_a_zero_budget_runs_no_script_and_the_draft_says_so(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(HERE / "sizes_repo", root)
    repo = git.Repo.init(root, initial_branch="main")
    repo.index.add([str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".git" not in p.parts])
    repo.index.commit("a package, its test and its benchmark", author=git.Actor("Dev", "dev@example.com"))
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "new", "src/toy_sizes/functional.py", "--no-build",
                           "--json", "--record-budget", "0"], cwd=root, capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "RAY_USAGE_STATS_ENABLED": "0"})
    assert proc.returncode == 0, proc.stderr
    assert "recording benchmark/bench_scaled.py" not in proc.stderr
    assert "1 script(s) not run: the recording budget of 0 s was spent" in proc.stderr
    rows = {r["variant"]: r for r in json.loads(proc.stdout)["drafts"]}
    sizes = rows["scaled_silu"]["sizes"]
    assert "benchmark/bench_scaled.py was not run: the scripts' recording budget of 0 s was spent" in sizes, sizes
    assert "scaled from" in sizes, sizes  # the test's sizes, grown by the rule


def test_drafting_a_module_records_the_script_named_after_an_entry_before_one_that_is_not(tmp_path, monkeypatch):
    # bench_scaled.py (scaled_silu's, named after neither entry) comes first in the repository
    # and in the entries' order; bench_scaled_norm.py is named after scaled_norm
    root = tmp_path / "repo"
    shutil.copytree(HERE / "sizes_repo", root)
    (root / "benchmark" / "bench_scaled_norm.py").write_text(textwrap.dedent('''
        """Times scaled_norm at the token counts a memory budget allows."""
        import torch

        from toy_sizes.functional import scaled_norm


        def token_counts(hidden):
            return [2**i for i in range(6, (1 << 20) // (8 * hidden))]


        if __name__ == "__main__":
            for tokens in token_counts(32):
                scaled_norm(torch.randn(1, tokens, 32), torch.ones(32))
    '''))
    repo = git.Repo.init(root, initial_branch="main")
    repo.index.add([str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".git" not in p.parts])
    repo.index.commit("a package, its test and two benchmarks", author=git.Actor("Dev", "dev@example.com"))
    started = []

    def record_calls(root, script, targets, limits, roots):
        started.append((script, tuple(targets)))
        return SimpleNamespace(records=[], ended="finished", detail="", of=lambda target: [])

    monkeypatch.setattr(bench_runs, "record_calls", record_calls)
    monkeypatch.setattr(bench_runs, "jobs_here", lambda gpu: 1)  # one at a time: the start order is the order
    drafts, _ = onboard.python_drafts(RepoFiles(root), "src/toy_sizes/functional.py", "flopwatch", set())
    assert started == [("benchmark/bench_scaled_norm.py", ("toy_sizes.functional:ScaledNormFunction",)),
                       ("benchmark/bench_scaled.py", ("toy_sizes.functional:ScaledSiLUFunction",))], started
    assert {d.name for d in drafts} == {"scaled_silu", "scaled_norm"}
