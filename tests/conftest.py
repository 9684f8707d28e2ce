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


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT
