"""Ray execution: start or join a cluster, and the remote tasks for probing, building and running.

Builds are CPU tasks that can land on any node. Runs go to device slots (`pipeline.slots`):
actors holding the device's resource, `flopwatch_cpu` (one per node, so CPU timings never
overlap on a node) or a GPU plus `flopwatch_cuda` / `flopwatch_rocm`, so an AMD job never
lands on an NVIDIA node.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import ray

from pipeline import headwatch, slots
from workers import build as build_stage
from workers import device
from workers.records import Variant

CPU_RESOURCE = slots.CPU_RESOURCE
GPU_RESOURCE = slots.GPU_RESOURCE


@dataclass(frozen=True)
class ClusterInfo:
    address: str
    started_here: bool
    resources: dict

    def has_kind(self, kind: str) -> bool:
        return slots.slot_count(self.resources, kind) >= 1


def connect(address: str | None, num_gpus: int | None = None) -> ClusterInfo:
    """Join `address`, or start a local cluster advertising this machine's devices."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return ClusterInfo(address or "existing", False, ray.cluster_resources())
    if address:
        ray.init(address=address, namespace="flopwatch", log_to_driver=False, logging_level="ERROR")
        return ClusterInfo(address, False, ray.cluster_resources())
    resources = {CPU_RESOURCE: 1}
    gpu = device.gpu_kind()
    gpus = num_gpus
    if gpu:
        import torch

        gpus = num_gpus if num_gpus is not None else torch.cuda.device_count()
        resources[GPU_RESOURCE[gpu]] = gpus
    ray.init(namespace="flopwatch", resources=resources, num_gpus=gpus, include_dashboard=False,
             log_to_driver=False, logging_level="ERROR")
    return ClusterInfo("local", True, ray.cluster_resources())


def shutdown(info: ClusterInfo) -> None:
    """Stop the device slots (and their warm runners) of this driver; stop Ray if started here."""
    if ray.is_initialized() and not headwatch.lost():  # with the head gone there is nobody to ask
        slots.close_all()
    if info.started_here:
        ray.shutdown()
    headwatch.stop()


def run_options(kind: str) -> dict:
    """Ray options of a device slot of `kind` (see `pipeline.slots`)."""
    return slots.slot_options(kind)


@ray.remote(num_cpus=0)
def _probe_toolchains() -> dict:
    return build_stage.toolchains()


@ray.remote(num_cpus=1)
def _build(variant: dict, bundle: dict, build_hash: str, include_dirs: list,
           timeout_s: float | None = None) -> tuple[dict, dict]:
    result, artifact = build_stage.build_variant(Variant.from_dict(variant), bundle, build_hash, include_dirs,
                                                 timeout_s)
    return result.to_dict(), artifact


def probe_toolchains(timeout: float = 120) -> dict:
    return ray.get(_probe_toolchains.remote(), timeout=timeout)


def probe_device(info: ClusterInfo, kind: str, timeout: float = 300) -> dict:
    """Identity of the first device of `kind`, asked by its slot (which holds the device)."""
    pool = slots.pool(info.resources)
    return ray.get(pool.slots_of(kind)[0].actor.probe.remote(), timeout=timeout)


def submit_build(variant: Variant, bundle: dict, build_hash: str, include_dirs: tuple[str, ...],
                 timeout_s: float | None = None):
    """A build task holds one CPU: Ray runs as many compiles at once as the build nodes have
    cores (each compile is one compiler process per translation unit). `timeout_s`: the
    build's limit (`pipeline.config.Limits.build_timeout_s`)."""
    return _build.remote(variant.to_dict(), bundle, build_hash, list(include_dirs), timeout_s)
