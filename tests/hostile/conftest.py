"""The hostile-input suite: variants, manifests, stores and clusters that misbehave on purpose,
each ending in a recorded status with a message while every other result is kept.

Every process the suite starts carries `FLOPWATCH_HOSTILE_RUN=<token>` in its environment,
inherited from this process by the command-line runs, their Ray clusters and workers, the jobs'
children and whatever a kernel forks from them; `test_zz_nothing_left_running.py` checks that
none of them is alive when the suite is done.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from lab_ray import LabCluster

from hostile.processes import MARK

_RAN: list[str] = []  # the tests of this package run so far in this session


@pytest.fixture(autouse=True)
def _counted(request):
    _RAN.append(request.node.nodeid)


@pytest.fixture
def hostile_tests_run() -> list[str]:
    return list(_RAN)


@pytest.fixture(scope="package", autouse=True)
def suite_mark():
    """The token of this run of the suite, in the environment of everything started from here."""
    token = uuid.uuid4().hex
    os.environ[MARK] = token
    yield token
    os.environ.pop(MARK, None)


@pytest.fixture
def lab_cluster(lab):
    """A Ray head and one worker (one CPU timing slot) on a lab network, with token auth
    (tests/lab_ray.py); (cluster, the worker's node). Its processes end with the lab."""
    base = Path(tempfile.mkdtemp(prefix="fwn", dir="/tmp"))  # short: Ray's socket paths live under it
    try:
        cluster = LabCluster(lab, base)
        cluster.start_head()
        worker = lab.add("w1", 11)
        cluster.start_worker(worker)
        cluster.wait_alive(2)
        yield cluster, worker
    finally:
        lab.close()  # its processes first: they hold files under base
        shutil.rmtree(base, ignore_errors=True)
