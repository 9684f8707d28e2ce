"""The jobs of one variant (its shapes) in one process, one after the other.

Every process that runs jobs on a GPU first pays for its context and the first use of the
kernels that draw inputs and check outputs (0.4 s on an H200, `benchmarks/spare_prep.py`),
then for its variant's own first call (a cached Triton kernel: 0.16-0.6 s,
`benchmarks/triton_first_call.py`), all outside any timing loop and mostly with the GPU idle.
A variant's shapes therefore share one process. Isolation between variants is unchanged: no
process runs two variants' code. Within a variant, a job that does not end `ok` (wrong result,
crash, hang, write limit, exception) ends the process, and the jobs after it each run again in
a process of their own, so that nothing it broke in that process (a corrupted allocation, a
dead context) is charged to them. Each job keeps its own timeout: the child arms a watchdog at
it before each job (`workers.job.child.run_batch`), and the runner's timeout for the process is
the sum of them, as a backstop.

Accounting: a job's phases are its own; the process's start, its wait at the runner and what
its processes left behind are charged to the first job that ran in it (leftovers to the job
that was running when it ended: whatever left them, nothing outlives the process).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from workers.core import status
from workers.core.records import BuildResult, Job, Result, Variant
from workers.job import runner
from workers.toolkit.bundle import unpack

# The runner's backstop beyond the sum of the jobs' own timeouts (process start, result IO).
BACKSTOP_S = 60.0
# What faulthandler writes when its watchdog ends the process (`dump_traceback_later`).
_WATCHDOG = "Timeout ("


def execute_batch(jobs: list[Job], variant: Variant, build: BuildResult, artifact: dict[str, bytes],
                  settings: dict, launcher: runner.Launcher = runner.spawn) -> list[Result]:
    """A `Result` per job, in the order given (see the module docstring)."""
    results: list[Result] = []
    todo = list(jobs)
    while todo:
        if len(todo) == 1:  # alone: exactly a single job's path
            results.append(runner.execute_job(todo[0], variant, build, artifact, settings, launcher))
            break
        done = _one_process(todo, variant, build, artifact, settings, launcher)
        results += done
        todo = todo[len(done):]
    return results


def _one_process(jobs: list[Job], variant: Variant, build: BuildResult, artifact: dict[str, bytes],
                 settings: dict, launcher: runner.Launcher) -> list[Result]:
    """Run `jobs` in one child; the results of the first k ≥ 1 of them (those it finished, and
    the one it failed in); the rest run again elsewhere."""
    began = time.perf_counter()
    timeout = runner.job_timeout(variant, settings)
    max_write = (settings.get("limits") or {}).get("job_write_bytes")
    with tempfile.TemporaryDirectory(prefix="flopwatch-batch-") as tmp:
        work = Path(tmp)
        unpack(artifact, work / "artifact")
        specs = [{**runner.job_spec(job, variant, work, settings), "timeout_s": timeout} for job in jobs]
        (work / "batch.json").write_text(json.dumps({"mode": "batch", "jobs": specs,
                                                     "threads": settings.get("threads")}))
        outcome = launcher(["batch.json", "."], timeout * len(jobs) + BACKSTOP_S, work, max_write_bytes=max_write)
        written = [_read(work / f"result{i}.json") for i in range(len(jobs))]
        current = _current(work)
    k = next((i for i, d in enumerate(written) if d is None), len(written))  # jobs it finished
    if outcome.write_limit_hit:
        k = min(k, current if current is not None else 0)  # the job writing when it was stopped is charged
    finished = written[:k]
    charged = None  # the job the process ended in, if it ended in one
    if k < len(jobs) and not (finished and not status.measured(finished[-1].get("status"))):
        if current is not None and current >= k:
            charged = k
        elif not finished:
            charged = 0  # it ended before its first job began: that job is charged, as a lone job would be
    finished_s = sum(runner.phase_seconds(d.get("phases") or {}) for d in finished)
    # A job the process ended in reported no phases: the device was held for the rest of it.
    entries = [(i, dict(d.get("phases") or {}), d) for i, d in enumerate(finished)]
    if charged is not None:
        entries.append((charged, {"timing_s": round(max(0.0, outcome.seconds - finished_s), 4)}, None))
    all_s = sum(runner.phase_seconds(phases) for _, phases, _ in entries)
    results: list[Result] = []
    for n, (i, phases, data) in enumerate(entries):
        if n == 0:  # the process's own costs
            runner.overhead_phases(phases, outcome, time.perf_counter() - began, all_s - runner.phase_seconds(phases))
        ended_it = data is None
        watchdog = ended_it and outcome.returncode == 1 and _WATCHDOG in outcome.stderr_tail
        results.append(runner.classify({**runner.job_base(jobs[i], variant, build, settings), "phases": phases},
                                       data, outcome, timeout, max_write, build,
                                       outcome.left_behind if n == len(entries) - 1 else 0,
                                       timed_out=(outcome.timed_out or watchdog) if ended_it else False,
                                       over_limit=outcome.write_limit_hit if ended_it else False))
    return results


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _current(work: Path) -> int | None:
    """The index of the job the child had begun last (`current.txt`), or None."""
    try:
        return int((work / "current.txt").read_text())
    except (OSError, ValueError):
        return None
