"""Progress where no terminal watches: a run writing to a file or a CI log, or with --json,
gives one line per finished job on stderr as it happens (a bar there printed nothing until the
end, and --json printed nothing at all: a 7-minute run on a GPU node looked hung)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from suite_repo import commit_blocked_gemm, init_repo

from pipeline import cli
from pipeline.run.progress import Progress


def test_plain_progress_prints_a_line_per_step_with_its_count(capsys):
    with Progress(enabled=True, plain=True).task("build + run abc", 3) as advance:
        advance("gemm_naive M=64 ok")
        advance("gemm_tiled M=64 crashed")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("build + run abc [1/3] gemm_naive M=64 ok (")
    assert err[1].startswith("build + run abc [2/3] gemm_tiled M=64 crashed (")


def test_a_file_gets_lines_and_a_disabled_progress_nothing(tmp_path):
    code = textwrap.dedent("""
        from pipeline.run.progress import Progress
        with Progress().task("run", 2) as advance:
            advance("one")
            advance("two")
        with Progress(enabled=False).task("quiet", 2) as advance:
            advance("three")
    """)
    log = tmp_path / "stderr.txt"
    with log.open("w") as f:
        subprocess.run([sys.executable, "-c", code], stderr=f, check=True)
    lines = log.read_text().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["run [1/2] one", "run [2/2] two"]


def test_the_progress_text_is_one_line_of_plain_text(capsys):
    with Progress(enabled=True, plain=True).task("run", 1) as advance:
        advance("evil\x1b[2J status\nsecond line")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err


@pytest.mark.slow
def test_a_run_with_json_prints_the_json_on_stdout_and_a_line_per_finished_job_on_stderr(tmp_path, capsys):
    if shutil.which("g++") is None:
        pytest.skip("no g++ to build the CPU GEMM")
    root = tmp_path / "kernels-repo"
    sha = commit_blocked_gemm(root, init_repo(root))  # one variant, one shape
    # a private local Ray of the command's own (FLOPWATCH_RAY_REUSE=0, tests/conftest.py)
    assert cli.main(["run", sha, "--repo", str(root), "--store", f"sqlite:///{tmp_path / 'results.db'}",
                     "--budget", "0.05", "--no-report", "--json", "--variant", "cpp_blocked"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)  # stdout is the JSON, nothing else
    assert summary["commit"] == sha
    assert ("cpp_blocked", "ok") in {(r["variant"], r["status"]) for r in summary["results"]}, summary["results"]
    steps = [m.groups() for m in re.finditer(r"^build \+ run \S+ \[(\d+)/(\d+)\] (.*) \(\d+ s\)$", err, re.M)]
    assert steps, err[-3000:]
    # one line per finished job (the builds, then each timing), numbered as they finish
    assert [(int(i), int(n)) for i, n, _ in steps] == [(i, len(steps)) for i in range(1, len(steps) + 1)], err
    assert "built cpp_blocked ok" in [what for _, _, what in steps], steps
    assert "cpp_blocked M=256,N=256,K=256 ok" in [what for _, _, what in steps], steps
