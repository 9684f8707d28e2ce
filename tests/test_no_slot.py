"""Why a job found no slot: a cluster without the device, or one whose nodes give their GPUs
to Ray but not to flopwatch (`ray start --num-gpus 4` without flopwatch's resource)."""

from __future__ import annotations

from types import SimpleNamespace

from pipeline.run import runflow
from pipeline.run.summary import all_skipped_line


def _session(resources: dict, joined: bool = True):
    return SimpleNamespace(cluster_info=SimpleNamespace(resources=resources) if joined else None,
                           local_resources=resources)


def test_gpus_given_to_ray_but_not_to_flopwatch_are_named_with_the_start_line_that_fixes_it():
    why = runflow._no_slot(_session({"CPU": 64.0, "GPU": 4.0, "flopwatch_cpu": 1.0}), "cuda")
    assert why.startswith("the cluster's nodes offer 4 GPU(s) to Ray but no flopwatch_cuda resource")
    assert """ray start ... --num-gpus 4 --resources '{"flopwatch_cuda": 4}'""" in why
    # The run's closing line gives that reason, not "a machine without an NVIDIA GPU".
    rows = [{"variant": "v", "status": "skipped", "diagnostic": why}]
    line = all_skipped_line(rows, {})
    assert "flopwatch_cuda" in line and "without an NVIDIA GPU" not in line
    cpu = runflow._no_slot(_session({"CPU": 64.0, "GPU": 4.0, "flopwatch_cuda": 4.0}), "cpu")
    assert """--resources '{"flopwatch_cpu": 1}'""" in cpu


def test_a_cluster_without_the_device_says_so():
    assert runflow._no_slot(_session({"CPU": 2.0, "flopwatch_cpu": 1.0}), "cuda").startswith(
        "no cuda device in the cluster to run it")
    # A local Ray not started yet advertises what it will have: no GPU, no slot.
    assert runflow._no_slot(_session({"flopwatch_cpu": 1}, joined=False), "rocm").startswith("no rocm device")
