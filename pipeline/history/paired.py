"""Measures what a verdict is decided from: paired timing of two revisions (from two `RunOutcome`s):
for every job that is `ok` in both runs, both builds are
timed alternately in one child process on one device (`workers.job.child.pair`), so time-varying
machine conditions cancel out of the comparison. Used by `compare` and `bisect`."""

from __future__ import annotations

import time

import numpy as np
import ray

from pipeline.fleet import headwatch
from pipeline.project.config import LIMITS
from pipeline.run.runflow import RunOutcome, Session, device_key
from workers.core import status


def series(job, device_key: str) -> tuple[str, str, str, str]:
    return job.variant, job.shape.key, job.dtype, device_key


# Each series is paired in two children, half the budget each: base loaded first in one, head in
# the other. The two children are replicates: a kernel can run at a speed set when it is loaded
# (one spilling binary paired against itself on an H100 and an H200: each copy steady within its
# process, the copies 1-10% apart, the level 13 or 18 ms from one process to the next), and a
# change the builds made moves both children alike (`compare.compare_rounds`).
ORDERS = ("base first", "head first")


def paired_samples(session: Session, base: RunOutcome, head: RunOutcome, settings: dict) -> dict[tuple, tuple]:
    """{(variant, shape, dtype, device): (base samples, head samples, per-child median ratios)}
    for the jobs that are ok on both sides (identical builds are paired too: that is how a
    no-change comparison looks). The ratios are head/base per child (`ORDERS`), for the check
    that both agree; a series one of whose children failed has one ratio."""
    ok_base = {(r.variant, r.shape, r.dtype, r.device) for r in base.results if status.measured(r.status)}
    ok_head = {(r.variant, r.shape, r.dtype, r.device) for r in head.results if status.measured(r.status)}
    both = ok_base & ok_head
    keyed = ((job, device_key(session, job.device_kind)) for job in head.jobs)
    pairable = [(job, device, key) for job, device in keyed
                if (key := series(job, device)) in both and job.variant in base.artifacts]
    tasks = []
    for job, device, key in pairable:
        sides = [(base.variants[job.variant], base.artifacts[job.variant]),
                 (head.variants[job.variant], head.artifacts[job.variant])]
        for order in range(len(ORDERS)):
            first = sides[order]  # the build the child loads (and lists) first
            tasks.append((job, device, (first, sides[1 - order]), (*key, order)))
    per_order: dict[tuple, dict[int, tuple]] = {}
    for tag, (first, second) in _time_pairs(session, tasks, settings, len(ORDERS), "paired timing").items():
        key, order = tuple(tag[:-1]), tag[-1]
        per_order.setdefault(key, {})[order] = (second, first) if order else (first, second)
    return {key: _pooled(orders) for key, orders in per_order.items()}


def copy_offsets(session: Session, base: RunOutcome, keys: set[tuple], settings: dict) -> dict[tuple, float]:
    """{series: median ratio of two copies of the base build, timed alternately in one child}:
    how far loading the very same build again moves this series (1.0 for most kernels). Run
    for the series a comparison calls slower or faster, to tell a change from that."""
    tasks = []
    for job in base.jobs:
        key = series(job, device_key(session, job.device_kind))
        if key in keys and job.variant in base.artifacts:
            one = (base.variants[job.variant], base.artifacts[job.variant])
            tasks.append((job, key[3], (one, one), key))
    out = {}
    for key, (a, b) in _time_pairs(session, tasks, settings, 1, "same-build check").items():
        out[key] = float(np.median(np.asarray(b) / np.asarray(a)))
    return out


def _time_pairs(session: Session, tasks: list, settings: dict, split: int, label: str) -> dict[tuple, tuple]:
    """Run each (job, device key, ((variant, artifact), (variant, artifact)), tag) as one paired
    child on the job's device slot, with 1/`split` of the pair budget; {tag: (samples of the
    first, samples of the second)} for the children that finished ok."""
    if not tasks:
        return {}  # also: a compare that timed nothing needs no cluster for this
    pool = session.slots
    settings = {"limits": LIMITS.to_dict(), **settings}
    timing = dict(settings.get("timing") or {})
    if "budget_s" in timing:
        timing["budget_s"] = float(timing["budget_s"]) / split
    for job, device, ((va, ra), (vb, rb)), tag in tasks:
        # Both builds timed alternately in one child, on the job's device slot (warm runner).
        pool.submit(job.device_kind, "run_pair", (job.to_dict(), [va.to_dict(), vb.to_dict()], ra, rb,
                                                  {**settings, "timing": timing, "device_key": device}), tag)
    out = {}
    with session.progress.task(label, len(tasks)) as advance:
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
            tag, _, _ = pool.finished(ready[0])
            if tag is None:
                continue  # its slot failed in Ray: `settle` retries it elsewhere or gives it up
            try:
                result = ray.get(ready[0])
            except ray.exceptions.RayError:  # the slot died under it: this pair has no samples
                result = {"status": status.CRASHED}
            if result["status"] == status.OK:
                out[tag] = tuple(tuple(s) for s in result["samples"])
            advance(tag[0])
    return out


def _pooled(orders: dict[int, tuple]) -> tuple:
    """Both children's pairs as one sample list per side (pair i of each child stays aligned),
    and each child's median head/base ratio."""
    base = tuple(s for order in sorted(orders) for s in orders[order][0])
    head = tuple(s for order in sorted(orders) for s in orders[order][1])
    ratios = tuple(float(np.median(np.asarray(orders[o][1]) / np.asarray(orders[o][0]))) for o in sorted(orders))
    return base, head, ratios
