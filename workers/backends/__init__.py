"""Build back ends, one module per compiler family, and the build driver that dispatches to them.
May import: workers.bindings, workers.core, workers.cuda, workers.isolation, workers.rocm, workers.toolkit,
    workers.torch_ext, workers.triton_aot.

Each back end module exposes:
  toolchain() -> Toolchain | None      what compiler this node has (None: cannot build here)
  build(variant, src, out, toolchain) -> BuildOutput
"""

from __future__ import annotations

from types import ModuleType

from workers.backends import builtin, cpp, cuda, hip, python, torch_ext, triton

BACKENDS: dict[str, ModuleType] = {"cpp": cpp, "python": python, "cuda": cuda, "hip": hip, "triton": triton,
                                  "torch": torch_ext, "builtin": builtin}
