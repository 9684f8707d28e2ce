"""A GPU job tells its warm runner that its timing loop is over, so the next job may begin.

A slot's GPU sits idle between two timing loops while the finished job judges its last check,
writes its result and exits, its result travels back to the driver, the driver hands the slot
the next job, and that job's process loads its kernel and runs its first check. The driver
therefore keeps a second job queued at each GPU slot (`pipeline.fleet.slots`), and the warm runner
(`workers.job.zygote`) starts it as soon as the running job says that its timing loop has ended:
from then on the two overlap, the finished job's tail beside the next job's load and first
check, and nothing of either is timed. The rule that keeps timings clean: at most one job per
GPU has not yet finished its timing loop, so a job's kernel and checks never run beside
another job's timing loop; and the finished job's last GPU work (judging its second check)
holds the device lock shared (`workers.isolation.device_lock`), so the next job's loop waits for it as it
waits for a spare's preparation step.

The message is one byte on a pipe the runner gives the job's process, named by `ENV_FD`.
A job that never says it (a CPU job, one that crashed or failed its check) is over for the
runner when its process ends, as before.
"""

from __future__ import annotations

import os

ENV_FD = "FLOPWATCH_HANDOFF_FD"
TIMING_DONE = b"T"


def timing_done() -> None:
    """Say once that this process's timing loop is over (no-op where no runner listens)."""
    fd = os.environ.pop(ENV_FD, None)
    if fd is None:
        return
    try:
        os.write(int(fd), TIMING_DONE)
        os.close(int(fd))
    except (OSError, ValueError):
        pass  # the runner is gone or the pipe was closed: it learns from the process's end instead
