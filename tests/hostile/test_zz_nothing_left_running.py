"""Runs last in the suite (pytest collects a folder's files in name order): no process started
by any hostile test is alive, whatever it forked, daemonised or left to Ray."""

from __future__ import annotations

import gc

import pytest

from hostile.processes import MARK, survivors


def test_no_process_started_by_the_hostile_suite_is_alive(suite_mark, hostile_tests_run):
    if not [n for n in hostile_tests_run if "test_zz_" not in n]:
        pytest.skip("checks what the other tests of tests/hostile left running; none of them ran in this session")
    # gitpython's `git cat-file` helpers belong to Repo objects of this process that are no
    # longer reachable but not yet collected (cycles): collecting them ends the helpers, which a
    # Repo still referenced would keep (a real leak, reported below).
    gc.collect()
    # Ray's processes take a few seconds to exit after their cluster is shut down; a process
    # still alive after this is a leak.
    left = survivors(MARK, suite_mark, patience_s=30.0)
    assert left == [], "still running: " + "; ".join(f"{pid} {cmd[:120]}" for pid, cmd in left)
