"""Runs last in the suite (pytest collects a folder's files in name order): no process started
by any hostile test is alive, whatever it forked, daemonised or left to Ray."""

from __future__ import annotations

from hostile.processes import MARK, survivors


def test_no_process_started_by_the_hostile_suite_is_alive(suite_mark):
    left = survivors(MARK, suite_mark, patience_s=60.0)
    assert left == [], "still running: " + "; ".join(f"{pid} {cmd[:120]}" for pid, cmd in left)
