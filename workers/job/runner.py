"""Run stage, node side: one job in the sandboxed child, classified into a `Result`.

This is the body of the Ray run task. It never raises for a misbehaving kernel: a crash, a
hang or an exception becomes a result with a status and a diagnostic.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from workers.core import status, untrusted
from workers.core.records import BuildResult, Job, Result, Variant
from workers.isolation import containment, device_lock
from workers.isolation.sandbox import ChildOutcome, run_child
from workers.job.runner_process import ENV_SOCKET
from workers.ops import dtype_bytes, get_op
from workers.toolkit.bundle import unpack

_FAULT_HINTS = ("Memory access fault", "illegal memory access", "an illegal instruction",
                "misaligned address", "unspecified launch failure")


# (args, timeout_s, workdir, max_write_bytes=None) -> outcome: `spawn`, or a zygote's `run`.
Launcher = Callable[..., ChildOutcome]


def spawn(args: list[str], timeout_s: float, workdir: Path, max_write_bytes: int | None = None) -> ChildOutcome:
    """A fresh interpreter per job (`python -m workers.job.child ...`): the cold path, and the
    fallback of a slot without a zygote."""
    return run_child([sys.executable, "-m", "workers.job.child", *args], timeout_s, workdir, env=child_env(),
                     max_write_bytes=max_write_bytes)


def execute_job(job: Job, variant: Variant, build: BuildResult, artifact: dict[str, bytes],
                settings: dict, launcher: Launcher = spawn) -> Result:
    """Check and time `job` in a child process (forked by a slot's zygote, or spawned);
    `settings` holds timing and timeout choices. The result carries its phases: the child's
    own (load, correctness, warm-up, timing), the profile, and `start_s` = everything else
    this took (unpacking, process start, writing and reading the result)."""
    began = time.perf_counter()
    base = job_base(job, variant, build, settings)
    with tempfile.TemporaryDirectory(prefix="flopwatch-job-") as tmp:
        work = Path(tmp)
        unpack(artifact, work / "artifact")
        spec = job_spec(job, variant, work, settings)
        (work / "spec.json").write_text(json.dumps(spec))
        timeout = job_timeout(variant, settings)
        max_write = (settings.get("limits") or {}).get("job_write_bytes")
        outcome = launcher(["spec.json", "result.json"], timeout, work, max_write_bytes=max_write)
        result_file = work / "result.json"
        data = json.loads(result_file.read_text()) if result_file.exists() and not outcome.write_limit_hit else None
        phases = dict((data or {}).get("phases") or {})
        if data and status.measured(data.get("status")) and settings.get("profile") and job.device_kind != "cpu":
            t0 = time.perf_counter()
            # No next job's process prepares on the GPU while the profiler counts (`workers.job.spare`).
            with device_lock.timing():
                data["counters"] = _profile(work, spec, job.device_kind, timeout, data.get("device_info", {}))
            phases["profile_s"] = round(time.perf_counter() - t0, 4)
    if data is None:
        # A child that hung or died reported no phases: the device was held for all of it.
        phases = {"timing_s": outcome.seconds}
    overhead_phases(phases, outcome, time.perf_counter() - began)
    return classify({**base, "phases": phases}, data, outcome, timeout, max_write, build, outcome.left_behind)


def job_base(job: Job, variant: Variant, build: BuildResult, settings: dict) -> dict:
    """The fields of a job's `Result` known before it runs (its counts from the op)."""
    itemsize = dtype_bytes(job.dtype)
    # A repository op's counts are its code's: they come back from the sandboxed child.
    op = None if variant.repo_op else get_op(variant.op)
    return dict(variant=variant.name, op=variant.op, backend=variant.backend, shape=job.shape.key,
                dtype=job.dtype, device=settings.get("device_key", job.device_kind), build_hash=build.build_hash,
                toolchain=build.toolchain, flops=op.flops(job.shape.dims) if op else 0.0,
                bytes_moved=op.bytes_moved(job.shape.dims, itemsize) if op else 0.0, peer=variant.peer,
                resources=build.analysis)


def job_spec(job: Job, variant: Variant, work: Path, settings: dict) -> dict:
    """What the child needs to check and time `job` (its artifact unpacked under `work`)."""
    seeds = [secrets.randbelow(2**31) for _ in range(2)]  # fresh inputs every check
    return {"variant": variant.to_dict(), "device_kind": job.device_kind, "dims": job.shape.dims,
            "dtype": job.dtype, "artifact": str(work / "artifact"), "seeds": seeds,
            "timing": settings.get("timing", {}), "threads": settings.get("threads"),
            # The device's identity as the slot already knows it (`device.reusable_identity`): the
            # job then asks no vendor tool (a call of 0.1-0.5 s per job, every GPU's driver
            # locked by it while it runs, beside the other GPUs' checks and timing loops).
            "device_identity": settings.get("device_identity"),
            # Where launch floors are measured ("gpu", "all", "off"; `workers.job.child.wants_floor`).
            "launch_floor": settings.get("launch_floor")}


def job_timeout(variant: Variant, settings: dict) -> float:
    return float(settings.get("timeout_s") or variant.timeout_s)


def overhead_phases(phases: dict, outcome: ChildOutcome, elapsed_s: float, children_s: float | None = None) -> None:
    """Add to a job's phases its wait at the runner and `start_s`: what the slot spent around
    the child (unpacking, starting it, reading its result). `children_s`: the child phases of
    every job that shared the process (this job's alone when None)."""
    if outcome.waited_s:
        # Queued at the slot's runner behind the job before it (`workers.job.handoff`): neither this
        # job's device time nor the slot's overhead.
        phases["handoff_wait_s"] = round(outcome.waited_s, 4)
    spent = phase_seconds(phases) + (children_s or 0.0)
    phases["start_s"] = round(max(0.0, elapsed_s - spent), 4)


def phase_seconds(phases: dict) -> float:
    """The durations of a job's phases added up (the `_s` keys, not the `_at` epoch marks)."""
    return sum(v for k, v in phases.items() if k.endswith("_s"))


def classify(base: dict, data: dict | None, outcome: ChildOutcome, timeout: float, max_write: int | None,
             build: BuildResult, left_behind: int, timed_out: bool | None = None,
             over_limit: bool | None = None) -> Result:
    """The `Result` of one job from what its child wrote (`data`, None if nothing) and how the
    child ended. `timed_out`, `over_limit`: whether this job ran out of time or past the write
    limit (default: how the child ended; False for a job that finished before the child ended)."""
    timed_out = outcome.timed_out if timed_out is None else timed_out
    over_limit = outcome.write_limit_hit if over_limit is None else over_limit
    notes = [containment.note(left_behind)]
    if build.left_behind:
        notes.append(f"its build {containment.note(build.left_behind)}")
    notes = "; ".join(n for n in notes if n)
    if over_limit:
        result = Result(**base, status=status.CRASHED, stderr_tail=outcome.stderr_tail,
                        diagnostic=f"stopped: the job's processes wrote more than {max_write / 2**20:.0f} MiB "
                                   "(the per-job write limit, job_write_bytes in pipeline/project/config.py)")
    elif timed_out:
        result = Result(**base, status=status.TIMEOUT, stderr_tail=outcome.stderr_tail,
                        diagnostic=f"killed after the {timeout:g} s timeout (hang or far too slow); "
                                   f"last stderr: {_last_line(outcome.stderr_tail)}")
    elif data is None:
        result = Result(**base, status=status.CRASHED, stderr_tail=outcome.stderr_tail,
                        diagnostic=_crash_text(outcome))
    else:
        result = _from_child(base, data, outcome.stderr_tail)
    if notes:
        result = dataclasses.replace(result, diagnostic="; ".join(d for d in (result.diagnostic, notes) if d))
    return result


def execute_pair(job: Job, variants: tuple[Variant, Variant], artifacts: tuple[dict, dict], settings: dict,
                 launcher: Launcher = spawn) -> dict:
    """Time two builds of one job alternately in one child (see `workers.job.child.pair`);
    returns {"status", "samples": [base, head], "diagnostic"}."""
    with tempfile.TemporaryDirectory(prefix="flopwatch-pair-") as tmp:
        work = Path(tmp)
        for i, files in enumerate(artifacts):
            unpack(files, work / f"artifact{i}")
        spec = {"mode": "pair", "variants": [v.to_dict() for v in variants], "device_kind": job.device_kind,
                "dims": job.shape.dims, "dtype": job.dtype, "artifacts": [str(work / "artifact0"), str(work / "artifact1")],
                "seeds": [secrets.randbelow(2**31) for _ in range(2)], "timing": settings.get("timing", {}),
                "threads": settings.get("threads")}
        (work / "spec.json").write_text(json.dumps(spec))
        timeout = float(settings.get("timeout_s") or max(v.timeout_s for v in variants))
        max_write = (settings.get("limits") or {}).get("job_write_bytes")
        outcome = launcher(["spec.json", "result.json"], timeout, work, max_write_bytes=max_write)
        result_file = work / "result.json"
        data = json.loads(result_file.read_text()) if result_file.exists() and not outcome.write_limit_hit else None
    note = containment.note(outcome.left_behind)
    if outcome.timed_out:
        return {"status": status.TIMEOUT, "samples": [[], []], "left_behind": outcome.left_behind,
                "diagnostic": "; ".join(filter(None, (f"paired timing killed after {timeout:g} s", note)))}
    if data is None or data.get("status") != status.OK:
        why = "the paired timing wrote more than the per-job write limit" if outcome.write_limit_hit else \
            (data or {}).get("diagnostic") or _crash_text(outcome)
        return {"status": status.CRASHED, "samples": [[], []], "left_behind": outcome.left_behind,
                "diagnostic": "; ".join(filter(None, (why, note)))}
    return {"status": status.OK, "samples": data["pair_samples"], "diagnostic": note, "left_behind": outcome.left_behind}


def _from_child(base: dict, data: dict, stderr_tail: str) -> Result:
    if data.get("status") not in status.ALL:
        # result.json is written inside the sandbox, where the kernel's own code runs: a status
        # of its making would reach every table, the store and the PR comment as it is.
        return Result(**base, status=status.CRASHED, stderr_tail=stderr_tail,
                      diagnostic=f"the job wrote a status flopwatch does not know: "
                                 f"{untrusted.bounded(repr(data.get('status')), 120)}")
    checks = data.get("checks", [])
    correctness = {"checks": [{k: v for k, v in c.items() if k != "tile_map"} for c in checks]}
    compared = [c for c in checks if "tile_map" in c]  # not a returned value of the wrong kind
    if compared:
        worst = next((c for c in compared if not c["passed"]), compared[0])
        correctness.update(tile=worst.get("map_tile", worst["tile"]),
                           rel_fro_err=max(c["rel_fro_err"] for c in compared),
                           max_abs_err=max(c["max_abs_err"] for c in compared))
        # The failing check's tile map only (the report's heat map of where the output is
        # wrong). A passing check's map says nothing the errors above do not, and it is large:
        # 16384 numbers for an 8192x8192 output, in every stored row and every summary.
        if not worst["passed"]:
            correctness["tile_map"] = worst["tile_map"]
    if data.get("output"):  # an unchecked variant's output digest and sample, compared across commits
        correctness["output"] = data["output"]
    if data.get("check_points"):  # shapes only checked (`workers.job.check_points`): every verdict
        correctness["check_points"] = data["check_points"]
        if data.get("check_point_tiles") and "tile_map" not in correctness:  # where a failing one was wrong
            correctness.update(data["check_point_tiles"])
    base = {**base, **{k: float(v) for k, v in (data.get("work") or {}).items() if k in ("flops", "bytes_moved")}}
    if data.get("jit"):  # the kernels Triton's JIT compiled for this job, and its autotuner's choice
        from workers.job import triton_jit

        base["resources"] = triton_jit.merge(base.get("resources") or {}, data["jit"])
    common = dict(base, status=data["status"], diagnostic=data.get("diagnostic", ""), counters=data.get("counters", {}),
                  correctness=correctness, device_info=data.get("device_info", {}), stderr_tail=stderr_tail)
    if not status.measured(data["status"]):
        return Result(**common)
    t = dict(data["timing"])
    floor, mem = data.get("launch_floor") or {}, data.get("memory") or {}
    if floor:
        t["launch_floor"] = floor
    if mem:
        t["memory"] = mem
    return Result(**common, median_s=t["median_s"], ci_low_s=t["ci_low_s"], ci_high_s=t["ci_high_s"],
                  samples_s=tuple(data["samples_s"]), timing=t, launch_floor_s=floor.get("floor_s"),
                  peak_mem_bytes=mem.get("peak_bytes"))


def _profile(work: Path, spec: dict, kind: str, timeout: float, dev: dict) -> dict:
    """Counters of the timed call under the vendor profiler; a failure is noted, not fatal."""
    from workers.measure import profile

    (work / "profile_spec.json").write_text(json.dumps({**spec, "mode": "profile"}))
    # Profilers replay each kernel once per counter pass: allow far more time than a timing run.
    limit = max(600.0, 10 * timeout)
    try:
        if kind == "cuda":
            counters, problem = profile.profile_cuda(work, "profile_spec.json", limit, child_env())
        else:
            counters, problem = profile.profile_rocm(work, "profile_spec.json", limit, child_env(),
                                                     dev.get("arch", ""))
    except Exception as exc:  # a profiler problem must not cost the timing result
        counters, problem = {}, f"{type(exc).__name__}: {exc}"
    return {**counters, **({"profile_error": problem} if problem else {})}


def _crash_text(outcome) -> str:
    hint = next((h for h in _FAULT_HINTS if h in outcome.stderr_tail), "")
    how = (f"killed by {outcome.signal_name}" if outcome.signal_name
           else f"exited with code {outcome.returncode} before writing a result")
    core = " (core dumped)" if outcome.signal_name in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL") else ""
    return f"the kernel's process was {how}{core}" + (f": {hint}" if hint else "") + \
        (f"; last stderr: {_last_line(outcome.stderr_tail)}" if outcome.stderr_tail.strip() else "")


_TELLING = ("Fatal Python error", "Memory access fault", "Error", "error:", "Aborted", "Traceback")


def _last_line(text: str) -> str:
    """The most telling stderr line: a fatal error or exception if any, else the last line
    (faulthandler ends with a list of extension modules, which says nothing)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if any(word in line for word in _TELLING) and not line.startswith("Extension modules"):
            return line[:300]
    return lines[-1][:300] if lines else "(empty)"


# Credentials a benchmarked kernel has no use for: the Ray cluster's token (a worker holds it
# when its node was started with RAY_AUTH_TOKEN), CI tokens, and the results store's URL (a
# PostgreSQL URL carries the database password). Kept out of job children's environment so that
# none lands in a compiler message, a result or a PR comment by accident.
# Hygiene, not a boundary: a child runs as the same user and can read its parent's
# /proc/<pid>/environ (docs/ci.md, "What isolates what").
SECRET_VARIABLES = ("RAY_AUTH_TOKEN", "GITHUB_TOKEN", "GH_TOKEN", "ACTIONS_RUNTIME_TOKEN",
                    "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "FLOPWATCH_STORE")


def child_env() -> dict:
    # Not the local head's seed socket (`workers.job.seed`): a slot's runner is adopted by the slot, not by its jobs.
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARIABLES and k != ENV_SOCKET}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONFAULTHANDLER", "1")  # a segfault prints the Python stack to stderr
    return env
