"""Runs last in the suite (pytest collects a folder's files in name order): no process started
by any hostile test is alive, whatever it forked, daemonised or left to Ray."""

from __future__ import annotations

import gc

from hostile.processes import MARK, survivors


def test_no_process_started_by_the_hostile_suite_is_alive(suite_mark):
    # gitpython's `git cat-file` helpers belong to Repo objects of this process that are no
    # longer reachable but not yet collected (cycles): collecting them ends the helpers, which a
    # Repo still referenced would keep (a real leak, reported below).
    gc.collect()
    left = survivors(MARK, suite_mark, patience_s=60.0)
    assert left == [], "still running: " + "; ".join(f"{pid} {cmd[:120]}" for pid, cmd in left)
