"""What a kernel does at run time is untrusted: writing its inputs, handing back an output that
does not depend on them, flooding stdout, leaving processes behind. Each ends as a recorded
status with a reason (CPU kernels from tests/broken_kernels, run as a job is run)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from pipeline.project.config import load_config
from pipeline.project.discovery import discover
from pipeline.run.plan import build_plan, jobs_for
from workers.backends.build import build_variant, toolchains
from workers.core import status
from workers.isolation.sandbox import MAX_FILE_BYTES, run_child
from workers.job.runner import execute_job

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run_variant():
    variants, _ = discover(ROOT, load_config(ROOT), ("tests/broken_kernels", "kernels/gemm"))
    by_name = {v.name: v for v in variants}
    ident = toolchains()["cpp"]["ident"]

    def run(name: str):
        v = by_name[name]
        plan = build_plan(ROOT, v, (), ident)
        build, artifact = build_variant(v, plan.bundle, plan.build_hash, list(plan.include_dirs))
        assert build.ok, build.first_errors
        job = jobs_for([v])[0]
        return execute_job(job, v, build, artifact, {"timing": {"budget_s": 0.05}, "threads": 1})

    return run


def test_a_kernel_that_writes_its_inputs_is_incorrect_with_that_reason(run_variant):
    r = run_variant("modifies_inputs")
    assert r.status == status.INCORRECT
    assert "the kernel changed its inputs: A (16384 element(s))" in r.diagnostic
    assert "B" not in r.diagnostic.split("changed its inputs:")[1].split("differ")[0]
    first = r.correctness["checks"][0]
    assert first["inputs_changed"] == {"A": 128 * 128}
    assert first["rel_fro_err"] < 1e-5, "the output itself was right: the reason is the inputs"


def test_a_kernel_whose_output_ignores_its_inputs_is_incorrect_with_that_reason(run_variant):
    r = run_variant("ignores_inputs")
    assert r.status == status.INCORRECT
    first, second = r.correctness["checks"]
    assert first["passed"] and not second["passed"]
    assert second["output_ignores_inputs"] == first["seed"]
    assert "output does not depend on this call's inputs" in r.diagnostic
    assert f"seed {second['seed']}:" in r.diagnostic


def test_a_correct_kernel_trips_neither_check(run_variant):
    r = run_variant("cpp_naive")
    assert r.status == status.OK, r.diagnostic
    assert all("inputs_changed" not in c and "output_ignores_inputs" not in c for c in r.correctness["checks"])


def test_a_stdout_flood_is_cut_off_and_read_from_the_end(tmp_path):
    flood = "import sys\nline = b'x' * 1023 + b'\\n'\nwhile True:\n    sys.stdout.buffer.write(line)\n"
    outcome = run_child([sys.executable, "-c", flood], 60, tmp_path)
    # Python ignores SIGXFSZ, so the write fails with EFBIG instead of the signal killing it
    assert not outcome.timed_out
    assert outcome.signal_name == "SIGXFSZ" or "File too large" in outcome.stderr_tail
    assert (tmp_path / "stdout.txt").stat().st_size <= MAX_FILE_BYTES
    assert len(outcome.stdout_tail) <= 4000


def test_processes_a_kernel_leaves_behind_are_ended_with_it(tmp_path):
    pid_file = tmp_path / "pid"
    leave = ("import subprocess, sys\n"
             "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
             f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n")
    outcome = run_child([sys.executable, "-c", leave], 60, tmp_path)
    assert outcome.returncode == 0
    pid = int(pid_file.read_text())
    for _ in range(50):  # SIGKILL is asynchronous; the orphan is reaped by init
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        pytest.fail("the process the child started outlived the job")


def test_job_children_see_no_cluster_or_ci_token_nor_the_store_url(monkeypatch):
    import json
    import subprocess

    from workers.job import runner

    monkeypatch.setenv("RAY_AUTH_TOKEN", "cluster-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret")
    monkeypatch.setenv("FLOPWATCH_STORE", "postgresql://flopwatch:db-secret@db.internal/flopwatch")
    seen = subprocess.run([sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                          env=runner.child_env(), capture_output=True, text=True, timeout=60, check=True)
    env = json.loads(seen.stdout)
    assert "RAY_AUTH_TOKEN" not in env and "GITHUB_TOKEN" not in env and "FLOPWATCH_STORE" not in env
    assert env["PATH"] == os.environ["PATH"] and env["PYTHONFAULTHANDLER"] == "1"
