"""Measures what a verdict is decided from: paired timing of two revisions (from two `RunOutcome`s):
for every job that is `ok` in both runs, both builds are
timed alternately in one child process on one device (`workers.child.pair`), so time-varying
machine conditions cancel out of the comparison. Used by `compare` and `bisect`."""

from __future__ import annotations

import ray

from pipeline import cluster
from pipeline.runflow import RunOutcome, Session, device_key
from workers import status


def series(job, device_key: str) -> tuple[str, str, str, str]:
    return job.variant, job.shape.key, job.dtype, device_key


def paired_samples(session: Session, base: RunOutcome, head: RunOutcome, settings: dict) -> dict[tuple, tuple]:
    """{(variant, shape, dtype, device): (base samples, head samples)} for the jobs that are ok on
    both sides (identical builds are paired too: that is how a no-change comparison looks)."""
    ok_base = {(r.variant, r.shape, r.dtype, r.device) for r in base.results if r.status == status.OK}
    ok_head = {(r.variant, r.shape, r.dtype, r.device) for r in head.results if r.status == status.OK}
    pending = {}
    for job in head.jobs:
        device = device_key(session, job.device_kind)
        key = series(job, device)
        if key not in ok_base or key not in ok_head or job.variant not in base.artifacts:
            continue
        variants = (base.variants[job.variant], head.variants[job.variant])
        refs = (base.artifacts[job.variant], head.artifacts[job.variant])
        pending[cluster.submit_pair(job, variants, refs, {**settings, "device_key": device})] = key
    out = {}
    with session.progress.task("paired timing", len(pending)) as advance:
        refs = list(pending)
        while refs:
            ready, refs = ray.wait(refs, num_returns=1)
            result = ray.get(ready[0])
            if result["status"] == status.OK:
                out[pending[ready[0]]] = (tuple(result["samples"][0]), tuple(result["samples"][1]))
            advance(pending[ready[0]][0])
    return out
