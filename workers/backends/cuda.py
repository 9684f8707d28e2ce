"""`cuda` back end: nvcc builds a shared library (`c` binding), a fatbin (`raw`) or a torch
extension module (`pybind11`), and records per-kernel resource use and a SASS histogram."""

from __future__ import annotations

from pathlib import Path

from workers.backends.base import BuildOutput, Toolchain, first_errors, run_compiler
from workers.core.records import Variant
from workers.cuda import pybind_build, resource_usage, sass
from workers.cuda.toolchain import find_tools, nvcc_command
from workers.toolkit import raw_symbols
from workers.toolkit.build_hints import with_hints
from workers.toolkit.template_instance import needs_instance, write_instance

LIBRARY = "libvariant.so"
FATBIN = "kernel.fatbin"


def toolchain() -> Toolchain | None:
    tools = find_tools()
    if not tools.nvcc:
        return None
    return Toolchain("cuda", tools.nvcc, f"nvcc {tools.nvcc_version}",
                     {"cuobjdump": tools.cuobjdump, "ncu": tools.ncu, "demangler": tools.demangler})


def arches_for(variant: Variant) -> list[str]:
    """The manifest's arches; `native` means the arch of the GPU on the build node."""
    arches = list(variant.arches) or ["sm_90a"]
    if "native" in arches:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("arch 'native' needs a GPU on the build node")
        major, minor = torch.cuda.get_device_capability(0)
        arches = [a for a in arches if a != "native"] + [f"sm_{major}{minor}{'a' if major >= 9 else ''}"]
    return arches


def build(variant: Variant, src: Path, out: Path, tc: Toolchain, include_dirs: list[Path]) -> BuildOutput:
    sources = [str(src / s) for s in variant.sources]
    includes = [str(d) for d in include_dirs]
    try:
        arches = arches_for(variant)
    except RuntimeError as exc:
        return BuildOutput(False, str(exc), str(exc))
    kind = variant.binding.kind
    if kind == "pybind11":
        info = pybind_build.torch_build_info()
        if not info.cuda:
            return BuildOutput(False, "", skip_reason="a pybind11 CUDA module needs a CUDA build of torch on "
                                                      "the build node; this one has a CPU build")
        target = out / pybind_build.output_name(variant.binding.module or "tk_kernel", info)
        cmd = pybind_build.pybind_command(tc.compiler, sources, variant.binding.module or "tk_kernel", arches,
                                          info, str(target), [*variant.flags, *(f"-I{d}" for d in includes)])
    else:
        if kind == "raw" and needs_instance(variant.binding.entry):
            sources = [write_instance(src, sources, variant.binding.entry, ".cu")]
        target = out / (FATBIN if kind == "raw" else LIBRARY)
        # A raw kernel is compiled as NVRTC compiles it: as CUDA whatever the file is called
        # (NVRTC takes a string; collections ship kernels as .cuh or .h headers).
        flags = ["-x", "cu", *variant.flags] if kind == "raw" else list(variant.flags)
        cmd = nvcc_command(tc.compiler, sources, includes, flags, arches, str(target),
                           "fatbin" if kind == "raw" else "shared-library")
    code, log = run_compiler(cmd, cwd=out)
    if code != 0:
        return BuildOutput(False, log, with_hints(first_errors(log), log, "cuda", kind))
    analysis = analyse(log, target, tc, int(variant.launch.get("dynamic_smem_bytes", 0)))
    if kind == "raw":
        names = resource_usage.demangle(resource_usage.mangled_names(log), tc.detail.get("demangler"))
        kernels = {m: names.get(m, m) for m in resource_usage.mangled_names(log)}
        symbol, problem = raw_symbols.resolve(variant.binding.entry, kernels)
        if symbol is None:
            return BuildOutput(False, log, problem, analysis=analysis)
        raw_symbols.write(out, variant.binding.entry, symbol)
    return BuildOutput(True, log, analysis=analysis)


def analyse(log: str, binary: Path, tc: Toolchain, dynamic_smem_bytes: int = 0) -> dict:
    """Per kernel: ptxas resource use (static shared memory, and the allocation a block gets
    with the launch's dynamic shared memory), plus SASS instruction counts where cuobjdump exists."""
    names = resource_usage.demangle(resource_usage.mangled_names(log), tc.detail.get("demangler"))
    kernels: dict[str, dict] = {}
    for k in resource_usage.parse_resource_usage(log, names):
        kernels[_short(k.name)] = {"arch": k.arch, "registers": k.registers, "smem_bytes": k.smem_bytes,
                                   "smem_alloc_bytes": resource_usage.smem_allocated_bytes(
                                       k.smem_bytes, dynamic_smem_bytes, k.arch),
                                   **({"smem_dynamic_bytes": dynamic_smem_bytes} if dynamic_smem_bytes else {}),
                                   "stack_bytes": k.stack_bytes, "spill_stores": k.spill_stores,
                                   "spill_loads": k.spill_loads}
    if tc.detail.get("cuobjdump"):
        for h in sass.parse_sass(sass.read_sass(tc.detail["cuobjdump"], str(binary))):
            entry = kernels.setdefault(_short(names.get(h.kernel, h.kernel)), {"arch": h.arch})
            entry.update({"sass_insts": h.total, "tensor_insts": h.tensor_core,
                          **{f"ldg_{bits}": n for bits, n in sorted(h.global_loads.items())},
                          "lds_insts": h.shared_loads, "ldsm_insts": h.ldsm})
    return {"vendor": "nvidia", "kernels": kernels}


def _short(name: str) -> str:
    """`gemm_tiled(const bf16*, ...)` → `gemm_tiled`: the table column stays readable. Template
    arguments stay, parentheses inside them too (`k<(bool)1>(float*)` → `k<(bool)1>`): two
    instantiations of one kernel are two rows, not one overwriting the other."""
    return raw_symbols.without_parameters(name).replace("void ", "").strip()
