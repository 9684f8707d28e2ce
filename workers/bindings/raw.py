"""`raw` binding: an extern "C" __global__ kernel, loaded from the built device code and launched
with grid and block computed from the manifest's expressions of the shape (M, N, K, n).

The parameter order is the manifest's `binding.args` by name, e.g. the tutorial signature
`matmul_kernel(int M, int N, int K, __fp16* A, __fp16* B, float* C, float alpha, float beta)` is
`args = ["M", "N", "K", "A", "B", "C", "alpha", "beta"]`; by default the op's inputs, its output,
its sizes, then alpha and beta when the variant takes them.
Both vendors launch through one code path, `workers.bindings.module_api`, with the vendor's
module-API names as data (CUDA's driver API, HIP's module API), on torch's current stream."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from workers.bindings import module_api
from workers.core.records import Variant
from workers.ops import scalars
from workers.toolkit import launch_expr, raw_symbols


def argument_names(variant: Variant, op: ModuleType) -> list[str]:
    if variant.binding.args:
        return list(variant.binding.args)
    names = [*op.INPUTS, op.OUTPUT, *op.DIMS, *getattr(op, "SCALARS", ())]
    return names + (["alpha", "beta"] if variant.alpha_beta else [])


def arguments(names: list[str], inputs: dict, out, dims: dict, op: ModuleType, alpha: float, beta: float) -> list:
    """Values in kernel order: tensors stay tensors (the launcher passes their addresses),
    sizes are ints; alpha, beta and the op's scalars (attention's `scale`) floats, but for
    integer scalars (group_norm's `num_groups`), which stay ints."""
    values = {**inputs, op.OUTPUT: out, **{d: int(v) for d, v in dims.items()},
              **{k: v if isinstance(v, int) and not isinstance(v, bool) else float(v)
                 for k, v in scalars(op, dims).items()},
              "alpha": float(alpha), "beta": float(beta)}
    return [values[name] for name in names]


def raw_entry(variant: Variant, artifact: Path, op: ModuleType, device_kind: str, dims: dict) -> Callable:
    if device_kind not in module_api.VENDORS:
        raise ValueError("raw kernels run on GPUs only")
    api = module_api.VENDORS[device_kind]
    arch = ""
    if device_kind == "rocm":
        import torch

        arch = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
    images = module_api.images(api, artifact, arch)
    if not images:
        raise FileNotFoundError(f"no device code for this GPU in the build artifact "
                                f"({sorted(p.name for p in artifact.iterdir())})")
    kernel = module_api.load(api, images[0].read_bytes(), raw_symbols.symbol_for(artifact, variant.binding.entry))
    grid = launch_expr.dims3(list(variant.binding.grid), dims)
    block = launch_expr.dims3(list(variant.binding.block), dims)
    shared = int(variant.launch.get("dynamic_lds_bytes", variant.launch.get("dynamic_smem_bytes", 0)))
    names = argument_names(variant, op)

    def call(inputs: dict, out, alpha: float = 1.0, beta: float = 0.0) -> None:
        module_api.launch(kernel, grid, block, arguments(names, inputs, out, dims, op, alpha, beta), shared)

    call.kernel = kernel  # keeps the module loaded while the callable lives
    return call
