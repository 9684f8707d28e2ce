"""Nothing a job or a build starts outlives it: a kernel that double-forks a `setsid` daemon, a
build step that does the same, a job that writes without end and a build that never ends are
each stopped, and the result says so. The whole runs (`flopwatch run` and `compare`) are in
test_suite_run.py."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from hostile import variants
from hostile.processes import survivors
from pipeline.project.config import LIMITS
from workers.backends.build import build_variant
from workers.core import status
from workers.job import runner
from workers.job.zygote import Zygote
from workers.toolkit.bundle import pack

CASE = "FLOPWATCH_HOSTILE_CASE"


@pytest.fixture
def case_mark(monkeypatch):
    """A mark of this test alone: every process it starts (daemons included) inherits it."""
    token = uuid.uuid4().hex
    monkeypatch.setenv(CASE, token)
    return token


@pytest.fixture(scope="module")
def daemon_build():
    v = variants.variant("daemon")
    return v, variants.build(v)


@pytest.mark.parametrize("warm", [True, False], ids=["forked by the warm runner", "spawned"])
def test_a_kernel_that_double_forks_a_setsid_daemon_leaves_nothing_running(daemon_build, case_mark, warm):
    v, built = daemon_build
    zygote = Zygote(runner.child_env()) if warm else None
    try:
        r = variants.run(v, built, launcher=zygote.run if warm else runner.spawn)
    finally:
        if zygote:
            zygote.close()
    assert r.status == status.OK, r.diagnostic  # its numbers are right: the note is the finding
    assert r.diagnostic == "left processes behind (1 killed)"
    assert survivors(CASE, case_mark) == []


def test_a_build_step_that_leaves_a_daemon_is_ended_with_the_build(case_mark):
    v = variants.variant("build_daemon")
    record, _ = variants.build(v)
    assert record.left_behind == 1, record.log[-2000:]
    assert "left processes behind (1 killed)" in record.log
    assert survivors(CASE, case_mark) == []


def test_a_job_that_writes_without_end_is_stopped_at_its_limit():
    v = variants.variant("writes_too_much")
    limit = 64 << 20  # four of its 16 MiB files
    r = variants.run(v, variants.build(v), limits={"job_write_bytes": limit})
    assert r.status == status.CRASHED
    assert r.diagnostic.startswith("stopped: the job's processes wrote more than 64 MiB (the per-job write limit, "
                                   "job_write_bytes in pipeline/project/config.py)")
    assert r.median_s is None


def test_a_100_mb_stdout_flood_is_survived_under_the_default_limits():
    v = variants.variant("floods_stdout")  # 100 MB once: under the 256 MiB file cap and the job limit
    r = variants.run(v, variants.build(v), limits=LIMITS.to_dict())
    assert r.status == status.OK, r.diagnostic
    assert r.diagnostic == ""


def test_a_build_past_its_time_limit_is_killed_and_fails_naming_the_limit(tmp_path, case_mark):
    v = variants.variant("build_daemon")
    # The same variant, but its module's import never ends: the build's compile step hangs on it.
    folder = tmp_path / v.folder
    folder.mkdir(parents=True)
    source = (variants.ROOT / v.folder / "kernel.py").read_text()
    (folder / "kernel.py").write_text("import time\ntime.sleep(600)\n" + source)
    record, artifact = build_variant(dataclasses.replace(v, timeout_s=600.0), pack(tmp_path, [v.folder]), "h",
                                     timeout_s=3.0)
    assert not record.ok and artifact == {}
    assert "the build took longer than its 3 s limit (build_timeout_s in pipeline/project/config.py)" in record.first_errors
    assert survivors(CASE, case_mark) == []
