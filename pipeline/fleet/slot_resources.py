"""The Ray resources that name flopwatch's device slots: one per CPU node, one per GPU. Apart
from `slots` (which imports Ray) so that a local head can name its resources before it imports
Ray: its slots' runners start before that import (`local_ray.serve`)."""

CPU_RESOURCE = "flopwatch_cpu"
GPU_RESOURCE = {"cuda": "flopwatch_cuda", "rocm": "flopwatch_rocm"}
