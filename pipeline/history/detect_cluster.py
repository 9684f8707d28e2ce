"""Searches the windows of `series.detect_regressions` over the Ray cluster: one task per batch
of windows, as many batches as the cluster has CPUs.

Plain data both ways (the windows' values in, change points as dicts out), so a task pickles no
project class. `flopwatch detect` uses it when a cluster is given or already joined; the
answers are those of `changepoint.search_windows` here, in input order.
"""

from __future__ import annotations

import ray

from pipeline.history import changepoint


@ray.remote(num_cpus=1)
def _search(parts: list, seed: int) -> list:
    return changepoint.search_windows(parts, seed)


def search_windows(parts: list, seed: int = 0) -> list:
    """`changepoint.search_windows` over the cluster (ray must be initialised), results in input order."""
    if not parts:
        return []
    n = max(1, min(len(parts), int(ray.cluster_resources().get("CPU", 1))))
    size = -(-len(parts) // n)
    refs = [_search.remote(parts[i:i + size], seed) for i in range(0, len(parts), size)]
    return [points for chunk in ray.get(refs, timeout=3600) for points in chunk]
