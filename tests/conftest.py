"""Shared fixtures: the repository root, and an isolated Ray environment for every test run."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# A private Ray temp dir: tests must not join or disturb a cluster a developer has running.
os.environ.setdefault("RAY_TMPDIR", tempfile.mkdtemp(prefix="flopwatch-ray-"))
# Commands run by tests get a private local Ray each: a kept head (pipeline/local_ray.py) would
# outlive the test run by its idle time. test_ray_token_cluster.py turns it on where it is tested.
os.environ.setdefault("FLOPWATCH_RAY_REUSE", "0")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT
