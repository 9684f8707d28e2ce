"""Shared fixtures: the repository root, and an isolated Ray environment for every test run."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Which tests share a pytest-xdist worker when the suite runs in parallel (scripts/test.sh).
pytest_plugins = ["xdist_groups"]

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# A private Ray temp dir: tests must not join or disturb a cluster a developer has running.
os.environ.setdefault("RAY_TMPDIR", tempfile.mkdtemp(prefix="flopwatch-ray-"))
if os.environ.get("PYTEST_XDIST_WORKER"):
    # One of its own per xdist worker, inside the run's (which the workers inherit): each
    # worker's Ray clusters are as private as a serial run's.
    # (Short: Ray's socket paths under it must stay within 107 bytes.)
    _worker_tmp = Path(os.environ["RAY_TMPDIR"]) / os.environ["PYTEST_XDIST_WORKER"]
    _worker_tmp.mkdir(exist_ok=True)
    os.environ["RAY_TMPDIR"] = str(_worker_tmp)
# Commands run by tests get a private local Ray each: a kept head (pipeline/fleet/local_ray.py) would
# outlive the test run by its idle time. test_ray_token_cluster.py turns it on where it is tested.
# Set, not defaulted: a developer's exported FLOPWATCH_RAY_REUSE=1 would otherwise leave such a
# head behind, marked as the hostile suite's (a false failure of its last check).
os.environ["FLOPWATCH_RAY_REUSE"] = "0"
# Tests behave on the CI runner as on a developer's machine: under GITHUB_ACTIONS=true `bisect`
# refuses commits off origin/<default branch>, which the tests' scratch repositories do not have.
# A test of Actions behaviour sets it itself (test_bisect_ci.py, test_nightly_store.py).
os.environ.pop("GITHUB_ACTIONS", None)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


# -- toolchains the CI machine is meant to have (tests/ci_toolchains.py) -----------------------

_ci_lacking: dict | None = None  # probed once, at the first skip of a CI run


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true, a test that skips because a toolchain the CI machine is meant to have is
    missing (the gfx942 cross toolchain, nvcc: FLOPWATCH_CI_TOOLCHAINS) fails instead, naming
    the tool: a failed install must not hide the HIP and CUDA builds' regressions. Elsewhere,
    and for a missing GPU, a skip stays a skip."""
    global _ci_lacking
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or os.environ.get("CI") != "true":
        return
    import ci_toolchains

    if _ci_lacking is None:
        _ci_lacking = ci_toolchains.missing(ci_toolchains.required())
    reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
    tool = ci_toolchains.named_in(reason, _ci_lacking)
    if tool:
        report.outcome = "failed"
        report.longrepr = (f"CI=true: this machine is meant to have {tool} ({ci_toolchains.VARIABLE}), and it is "
                           f"missing: {_ci_lacking[tool]}; the test would have skipped: {reason}")


@pytest.fixture(scope="module")
def ray_cluster():
    """A private local Ray cluster for the tests of one module (`pipeline.fleet.cluster.connect`),
    shut down after them. A module that needs other resources defines its own."""
    from pipeline.fleet import cluster

    info = cluster.connect(None)
    yield info
    cluster.shutdown(info)


# -- stores: every store test runs on SQLite and on a real PostgreSQL server -----------------

@pytest.fixture(scope="session")
def pg_server():
    """A private PostgreSQL server for the whole session (tests/pg_server.py). Skipped where
    PostgreSQL is not installed, except in CI (CI=true), where the store suite must run."""
    import pg_server as servers

    reason = servers.why_not_available()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL store tests cannot run: {reason}")
        pytest.skip(reason)
    server = servers.Server().start()
    yield server
    server.stop()


@pytest.fixture
def postgresql_url(pg_server, request):
    """A fresh, empty database on the test server, dropped after the test."""
    import uuid

    name = f"fw_{uuid.uuid4().hex[:12]}"
    with pg_server.database(name):
        yield pg_server.url(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A new store's URL on each dialect: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'results.db'}"
    return request.getfixturevalue("postgresql_url")


# -- a network of namespaces: the cluster and store tests on real links ----------------------

@pytest.fixture
def lab():
    """A private network of namespaces (tests/netlab.py), deleted with every process in it when
    the test ends, however it ends. Skipped where namespaces cannot be made (they need root),
    except in CI (CI=true), which runs as root: there the network tests must run."""
    import netlab

    reason = netlab.why_not_available()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"network namespace tests cannot run: {reason}")
        pytest.skip(reason)
    made = netlab.Lab()
    try:
        yield made
    finally:
        made.close()


# The repositories the tests onboard (tests/*_repo) keep test files of their own, written for
# their package, not for this suite: they are read by flopwatch, never collected here.
collect_ignore_glob = ["*_repo/*", "*_repo/*/*", "*_repo/*/*/*"]
