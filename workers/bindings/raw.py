"""`raw` binding: an extern "C" __global__ kernel, loaded from the built fatbin and launched
with grid and block computed from the manifest's expressions of the shape (M, N, K, n)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Callable

from workers.records import Variant


def raw_entry(variant: Variant, artifact: Path, op: ModuleType, device_kind: str, dims: dict) -> Callable:
    if device_kind != "cuda":
        raise NotImplementedError("raw kernels are launched through cuda-python, on NVIDIA GPUs only; "
                                  "on ROCm use the `c` binding with an extern \"C\" launcher")
    from workers.cuda import launch_expr, raw_launch

    images = sorted(artifact.glob("*.fatbin")) + sorted(artifact.glob("*.cubin"))
    if not images:
        raise FileNotFoundError("no fatbin/cubin in the build artifact")
    kernel = raw_launch.load(images[0].read_bytes(), variant.binding.entry)
    grid = launch_expr.dims3(list(variant.binding.grid), dims)
    block = launch_expr.dims3(list(variant.binding.block), dims)
    shared = int(variant.launch.get("dynamic_smem_bytes", 0))

    def call(inputs: dict, out, alpha: float = 1.0, beta: float = 0.0) -> None:
        args = [*op.tensor_args(inputs, out), *(int(dims[d]) for d in op.DIMS)]
        if variant.alpha_beta:
            args += [float(alpha), float(beta)]
        raw_launch.launch(kernel, grid, block, args, shared)

    call.kernel = kernel  # keeps the module loaded while the callable lives
    return call
