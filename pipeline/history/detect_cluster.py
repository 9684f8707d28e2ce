"""Decides the same steps as `changepoint.detect_batch`, with the series spread over the Ray
cluster: one task per batch of series, as many batches as the cluster has CPUs.

Plain data both ways ((run times, SHAs, threshold) per series in, step dicts out), so a task pickles no
project class. `flopwatch detect` uses it when a cluster is given or already joined; the
answers are those of the local batch, in input order.
"""

from __future__ import annotations

import ray

from pipeline.history import changepoint


@ray.remote(num_cpus=1)
def _detect(batch: list, seed: int) -> list:
    return changepoint.detect_batch(batch, seed)


def detect_batches(inputs: list, seed: int = 0) -> list:
    """`changepoint.detect_batch` over the cluster (ray must be initialised), results in input order."""
    if not inputs:
        return []
    n = max(1, min(len(inputs), int(ray.cluster_resources().get("CPU", 1))))
    size = -(-len(inputs) // n)
    refs = [_detect.remote(inputs[i:i + size], seed) for i in range(0, len(inputs), size)]
    return [steps for chunk in ray.get(refs) for steps in chunk]
