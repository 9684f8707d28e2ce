"""Measures what a verdict is decided from: paired timing of two revisions (from two `RunOutcome`s):
for every job that is `ok` in both runs, both builds are
timed alternately in one child process on one device (`workers.child.pair`), so time-varying
machine conditions cancel out of the comparison. Used by `compare` and `bisect`."""

from __future__ import annotations

import time

import ray

from pipeline import headwatch
from pipeline.config import LIMITS
from pipeline.runflow import RunOutcome, Session, device_key
from workers import status


def series(job, device_key: str) -> tuple[str, str, str, str]:
    return job.variant, job.shape.key, job.dtype, device_key


def paired_samples(session: Session, base: RunOutcome, head: RunOutcome, settings: dict) -> dict[tuple, tuple]:
    """{(variant, shape, dtype, device): (base samples, head samples)} for the jobs that are ok on
    both sides (identical builds are paired too: that is how a no-change comparison looks)."""
    ok_base = {(r.variant, r.shape, r.dtype, r.device) for r in base.results if r.status == status.OK}
    ok_head = {(r.variant, r.shape, r.dtype, r.device) for r in head.results if r.status == status.OK}
    both = ok_base & ok_head
    keyed = ((job, device_key(session, job.device_kind)) for job in head.jobs)
    pairable = [(job, device, key) for job, device in keyed
                if (key := series(job, device)) in both and job.variant in base.artifacts]
    if not pairable:
        return {}  # also: a compare that timed nothing needs no cluster for this
    pool = session.slots
    settings = {"limits": LIMITS.to_dict(), **settings}
    for job, device, key in pairable:
        variants = (base.variants[job.variant], head.variants[job.variant])
        refs = (base.artifacts[job.variant], head.artifacts[job.variant])
        # Both builds timed alternately in one child, on the job's device slot (warm runner).
        pool.submit(job.device_kind, "run_pair", (job.to_dict(), [v.to_dict() for v in variants], refs[0], refs[1],
                                                  {**settings, "device_key": device}), key)
    out = {}
    with session.progress.task("paired timing", len(pairable)) as advance:
        while pool.has_work():
            refs = pool.refs()
            ready = ray.wait(refs, num_returns=1, timeout=1.0)[0] if refs else []
            headwatch.check()
            for given_up in pool.settle():  # a pair of a lost node no other slot could take: no samples
                advance(given_up.tag[0])
            if not ready:
                if not refs:
                    time.sleep(1.0)
                continue
            key, _, _ = pool.finished(ready[0])
            if key is None:
                continue  # its slot failed in Ray: `settle` retries it elsewhere or gives it up
            try:
                result = ray.get(ready[0])
            except ray.exceptions.RayError:  # the slot died under it: this pair has no samples
                result = {"status": status.CRASHED}
            if result["status"] == status.OK:
                out[key] = (tuple(result["samples"][0]), tuple(result["samples"][1]))
            advance(key[0])
    return out
