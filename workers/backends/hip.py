"""`hip` back end: ROCm's hipcc, or the clang-19 gfx942 cross toolchain where ROCm is absent,
builds a shared library (`c` binding), code objects (`raw`) or a pybind11 module
(`pybind11`, HipKittens' `tk_kernel`), and every build is analysed statically: VGPRs, AGPRs,
LDS, spills, occupancy recomputed with the declared dynamic LDS, and an instruction histogram
(MFMA by shape, global load widths, LDS traffic)."""

from __future__ import annotations

from pathlib import Path

from workers.backends.base import BuildOutput, Toolchain, first_errors, run_compiler
from workers.core.records import Variant
from workers.rocm import pybind_build
from workers.rocm.build import build_hip
from workers.rocm.toolchain import HipToolchain, find_hip_toolchain
from workers.toolkit import raw_symbols
from workers.toolkit.build_hints import with_hints
from workers.toolkit.template_instance import needs_instance, write_instance


def toolchain() -> Toolchain | None:
    found = find_hip_toolchain()
    if not isinstance(found, HipToolchain):
        return None
    return Toolchain("hip", found.compiler, f"{found.kind} {found.version}",
                     {"kind": found.kind, "include_vars": found.include_vars()})


def _launch(variant: Variant) -> dict:
    return {"*": {k: int(v) for k, v in variant.launch.items() if k in ("block_threads", "dynamic_lds_bytes")}}


def runtime_compiler_options(flags: list[str], include_dirs: list[str], include_vars: dict) -> tuple[list[str], list[str]]:
    """Flags and include folders of a raw kernel, compiled as hiprtc compiles it (pure): HIP's
    runtime header included implicitly (hiprtc pre-declares blockIdx, __syncthreads, the HIP
    types) and HIP's include folder searched (`#include <hip_fp16.h>` as hiprtc resolves it),
    after the variant's own folders. A source that includes the header itself is unaffected."""
    hip_dir = include_vars.get("HIP_INCLUDE_DIR")
    extra_dirs = [hip_dir] if hip_dir and hip_dir not in include_dirs else []
    return ["-include", "hip/hip_runtime.h", *flags], [*include_dirs, *extra_dirs]


def build(variant: Variant, src: Path, out: Path, tc: Toolchain, include_dirs: list[Path]) -> BuildOutput:
    kind = variant.binding.kind
    if kind == "pybind11":
        return build_pybind11(variant, src, out, include_dirs, pybind_build.host_build_info())
    mode = "code-object" if kind == "raw" else "shared-library"
    flags, includes = list(variant.flags), [str(d) for d in include_dirs]
    if kind == "raw":
        flags, includes = runtime_compiler_options(flags, includes, tc.detail.get("include_vars") or {})
    sources = [str(src / s) for s in variant.sources]
    if kind == "raw" and needs_instance(variant.binding.entry):
        sources = [write_instance(src, sources, variant.binding.entry, ".hip")]
    result = build_hip(sources, includes, flags, list(variant.arches) or ["gfx942"],
                       str(out), mode, launch=_launch(variant), output_name="variant")
    if not result.ok:
        return BuildOutput(False, result.log, with_hints("\n".join(result.first_errors), result.log, "hip", kind,
                                                        tc.detail.get("include_vars")))
    # Keep only what runs: the library (c) or the code objects (raw); analysis copies go.
    keep = {Path(p).name for p in result.artifacts}
    for path in out.iterdir():
        if path.name not in keep:
            path.unlink()
    analysis = flatten(result.kernels)
    if kind == "raw":
        names = {mangled: k.get("name") or mangled for per_arch in result.kernels.values() for mangled, k in per_arch.items()}
        symbol, problem = raw_symbols.resolve(variant.binding.entry, names)
        if symbol is None:
            return BuildOutput(False, result.log, problem, analysis=analysis)
        raw_symbols.write(out, variant.binding.entry, symbol)
    return BuildOutput(True, result.log, analysis=analysis)


def build_pybind11(variant: Variant, src: Path, out: Path, include_dirs: list[Path],
                   info: pybind_build.HostBuildInfo) -> BuildOutput:
    """Device code first (built and analysed on every node), then the host module where this
    node can link one that imports on a ROCm node; elsewhere the host code is compiled as a
    check and the jobs are `skipped` with the reason, keeping the analysis."""
    found = find_hip_toolchain()
    if not isinstance(found, HipToolchain):
        return BuildOutput(False, found.reason, found.reason)
    sources = [str(src / s) for s in variant.sources]
    includes = [str(d) for d in include_dirs] + pybind_build.header_dirs(info)
    arches = list(variant.arches) or ["gfx942"]
    module = variant.binding.module or "tk_kernel"
    defines = pybind_build.module_flags(module, info)[:1]  # TORCH_EXTENSION_NAME for the device pass
    device = build_hip(sources, includes, [*variant.flags, *defines], arches, str(out / "device"),
                       "code-object", launch=_launch(variant), toolchain=found, output_name="device")
    if not device.ok:
        reason = pybind_build.missing_dependency(device.log, info)
        if reason:
            return BuildOutput(False, device.log, skip_reason=reason)
        return BuildOutput(False, device.log, with_hints("\n".join(device.first_errors), device.log, "hip", "pybind11",
                                                        found.include_vars()))
    analysis = flatten(device.kernels)
    for path in (out / "device").iterdir():
        path.unlink()
    (out / "device").rmdir()
    blocker = pybind_build.host_module_blocker(found, info)
    link = not blocker
    target = out / (pybind_build.output_name(module, info) if link else f"{module}.host-check.o")
    cmd = pybind_build.host_command(found, sources, [str(d) for d in include_dirs], list(variant.flags),
                                    arches, module, info, str(target), link)
    code, log = run_compiler(list(cmd.argv), cwd=out, env=_env(cmd.env))
    log = device.log + "\n" + log
    if code != 0:
        reason = pybind_build.missing_dependency(log, info)
        if reason:
            return BuildOutput(False, log, analysis=analysis, skip_reason=reason)
        return BuildOutput(False, log, first_errors(log), analysis=analysis)
    if not link:
        target.unlink()
        return BuildOutput(False, log, analysis=analysis, skip_reason=blocker)
    return BuildOutput(True, log, analysis=analysis)


def _env(extra: dict) -> dict | None:
    if not extra:
        return None
    import os

    return {**os.environ, **extra}


def flatten(kernels: dict) -> dict:
    """One flat row of numbers per kernel and arch, under the names kernel developers use."""
    flat: dict[str, dict] = {}
    for arch, per_kernel in kernels.items():
        for mangled, k in per_kernel.items():
            rem, note = k.get("remarks") or {}, k.get("code_object") or {}
            occ, dis = k.get("occupancy") or {}, k.get("disassembly") or {}
            row = {
                "arch": arch,
                "vgprs": rem.get("vgprs", note.get("vgpr_count")),
                "agprs": rem.get("agprs", note.get("agpr_count")),
                "sgprs": rem.get("sgprs", note.get("sgpr_count")),
                # the compiler's static LDS, and what the occupancy model allocates (static +
                # dynamic, in 512-byte granules): reports show both, labelled
                "lds_static_bytes": note.get("group_segment_fixed_size", rem.get("lds_bytes")),
                "lds_bytes": occ.get("lds_alloc_bytes", rem.get("lds_bytes")),
                **({"lds_dynamic_bytes": occ["dynamic_lds_bytes"]} if occ.get("dynamic_lds_bytes") else {}),
                "scratch_bytes": rem.get("scratch_bytes", note.get("private_segment_fixed_size")),
                "vgpr_spill": rem.get("vgpr_spill", note.get("vgpr_spill_count")),
                "sgpr_spill": rem.get("sgpr_spill", note.get("sgpr_spill_count")),
                "waves_per_simd": occ.get("waves_per_simd", rem.get("occupancy_waves_per_simd")),
                "waves_per_cu": occ.get("waves_per_cu"),
                "occupancy_limit": occ.get("limit"),
                "mfma_insts": dis.get("mfma_total", 0),
                **{name: n for name, n in (dis.get("mfma") or {}).items()},
                **{name: n for name, n in (dis.get("global_loads") or {}).items()},
                "ds_reads": sum((dis.get("lds_reads") or {}).values()),
                "ds_writes": sum((dis.get("lds_writes") or {}).values()),
                "s_waitcnt": dis.get("waitcnt"),
            }
            name = (k.get("name") or mangled).split("(")[0]
            flat[name if len(kernels) == 1 else f"{name}@{arch}"] = row
    return {"vendor": "amd", "kernels": flat}
