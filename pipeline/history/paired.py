"""Measures what a verdict is decided from: paired timing of two revisions (from two `RunOutcome`s):
for every job that is `ok` in both runs, both builds are
timed alternately in one child process on one device (`workers.child.pair`), so time-varying
machine conditions cancel out of the comparison. Used by `compare` and `bisect`."""

from __future__ import annotations

import time

import numpy as np
import ray

from pipeline import headwatch
from pipeline.config import LIMITS
from pipeline.runflow import RunOutcome, Session, device_key
from workers import status


def series(job, device_key: str) -> tuple[str, str, str, str]:
    return job.variant, job.shape.key, job.dtype, device_key


# Which build a pair's child loads first. The same binary loaded twice into one process can run
# at two speeds, a copy per load (a kernel that spills heavily, timed 10-27% apart against
# itself on an H100): each series is paired in two children, base loaded first in one and head
# in the other, half the budget each, so an effect of the load order shows as two orders that
# disagree instead of as a change (a crossover design).
ORDERS = ("base first", "head first")


def paired_samples(session: Session, base: RunOutcome, head: RunOutcome, settings: dict) -> dict[tuple, tuple]:
    """{(variant, shape, dtype, device): (base samples, head samples, per-order median ratios)}
    for the jobs that are ok on both sides (identical builds are paired too: that is how a
    no-change comparison looks). The ratios are head/base per load order (`ORDERS`), for the
    check that both orders agree; a series whose one order failed has one ratio."""
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
    timing = dict(settings.get("timing") or {})
    if "budget_s" in timing:
        timing["budget_s"] = float(timing["budget_s"]) / len(ORDERS)
    for job, device, key in pairable:
        variants = [base.variants[job.variant].to_dict(), head.variants[job.variant].to_dict()]
        refs = [base.artifacts[job.variant], head.artifacts[job.variant]]
        for order in range(len(ORDERS)):
            first = 1 if order else 0  # the side the child loads (and lists) first
            sides = [first, 1 - first]
            # Both builds timed alternately in one child, on the job's device slot (warm runner).
            pool.submit(job.device_kind, "run_pair", (job.to_dict(), [variants[i] for i in sides], refs[sides[0]],
                                                      refs[sides[1]], {**settings, "timing": timing,
                                                                       "device_key": device}), (*key, order))
    per_order: dict[tuple, dict[int, tuple]] = {}
    with session.progress.task("paired timing", len(pairable) * len(ORDERS)) as advance:
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
            key, order = tuple(tag[:-1]), tag[-1]
            if result["status"] == status.OK:
                first, second = (tuple(s) for s in result["samples"])
                per_order.setdefault(key, {})[order] = (second, first) if order else (first, second)
            advance(key[0])
    return {key: _pooled(orders) for key, orders in per_order.items()}


def _pooled(orders: dict[int, tuple]) -> tuple:
    """Both orders' pairs as one sample list per side (pair i of each order stays aligned), and
    each order's median head/base ratio."""
    base = tuple(s for order in sorted(orders) for s in orders[order][0])
    head = tuple(s for order in sorted(orders) for s in orders[order][1])
    ratios = tuple(float(np.median(np.asarray(orders[o][1]) / np.asarray(orders[o][0]))) for o in sorted(orders))
    return base, head, ratios
