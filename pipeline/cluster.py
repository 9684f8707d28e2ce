"""Ray execution: start or join a cluster, and the remote tasks for probing, building and running.

Builds are CPU tasks that can land on any node. Runs ask for the device's resource:
`flopwatch_cpu` (one per node, so CPU timings never overlap on a node) or a GPU plus
`flopwatch_cuda` / `flopwatch_rocm`, so an AMD job never lands on an NVIDIA node.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import ray

from workers import build as build_stage
from workers import device, runner
from workers.records import BuildResult, Job, Variant

CPU_RESOURCE = "flopwatch_cpu"
GPU_RESOURCE = {"cuda": "flopwatch_cuda", "rocm": "flopwatch_rocm"}


@dataclass(frozen=True)
class ClusterInfo:
    address: str
    started_here: bool
    resources: dict

    def has_kind(self, kind: str) -> bool:
        name = CPU_RESOURCE if kind == "cpu" else GPU_RESOURCE[kind]
        return self.resources.get(name, 0) >= 1


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
    if info.started_here:
        ray.shutdown()


def run_options(kind: str) -> dict:
    """Ray options of a run task on a device of `kind`."""
    if kind == "cpu":
        return {"num_cpus": 1, "resources": {CPU_RESOURCE: 1}}
    return {"num_cpus": 1, "num_gpus": 1, "resources": {GPU_RESOURCE[kind]: 1}}


@ray.remote(num_cpus=0)
def _probe_toolchains() -> dict:
    return build_stage.toolchains()


@ray.remote(num_cpus=0)
def _probe_device(kind: str) -> dict:
    return device.info(kind).to_dict()


@ray.remote(num_cpus=1)
def _build(variant: dict, bundle: dict, build_hash: str, include_dirs: list) -> tuple[dict, dict]:
    result, artifact = build_stage.build_variant(Variant.from_dict(variant), bundle, build_hash, include_dirs)
    return result.to_dict(), artifact


@ray.remote(max_retries=0)
def _run(job: dict, variant: dict, build: dict, artifact: dict, settings: dict) -> dict:
    result = runner.execute_job(Job.from_dict(job), Variant.from_dict(variant), BuildResult.from_dict(build),
                                artifact, settings).to_dict()
    # Which Ray node measured it: the record of where a number came from.
    result["device_info"] = {**result["device_info"], "ray_node_id": ray.get_runtime_context().get_node_id()}
    return result


@ray.remote(max_retries=0)
def _run_pair(job: dict, variants: list, artifact_a: dict, artifact_b: dict, settings: dict) -> dict:
    return runner.execute_pair(Job.from_dict(job), tuple(Variant.from_dict(v) for v in variants),
                               (artifact_a, artifact_b), settings)


def submit_pair(job: Job, variants: tuple[Variant, Variant], artifact_refs: tuple, settings: dict):
    """Both builds of one job timed alternately in one child on one device (compare, bisect)."""
    return _run_pair.options(**run_options(job.device_kind)).remote(
        job.to_dict(), [v.to_dict() for v in variants], artifact_refs[0], artifact_refs[1], settings)


def probe_toolchains(timeout: float = 120) -> dict:
    return ray.get(_probe_toolchains.remote(), timeout=timeout)


def probe_device(kind: str, timeout: float = 300) -> dict:
    opts = run_options(kind)
    opts["num_cpus"] = 0
    return ray.get(_probe_device.options(**opts).remote(kind), timeout=timeout)


def submit_build(variant: Variant, bundle: dict, build_hash: str, include_dirs: tuple[str, ...]):
    return _build.remote(variant.to_dict(), bundle, build_hash, list(include_dirs))


def submit_run(job: Job, variant: Variant, build: BuildResult, artifact_ref, settings: dict):
    return _run.options(**run_options(job.device_kind)).remote(
        job.to_dict(), variant.to_dict(), build.to_dict(), artifact_ref, settings)
