"""`hip` back end: ROCm's hipcc, or the clang-19 gfx942 cross toolchain where ROCm is absent,
builds a shared library (`c` binding) or code objects (`raw`), and every build is analysed
statically: VGPRs, AGPRs, LDS, spills, occupancy recomputed with the declared dynamic LDS, and
an instruction histogram (MFMA by shape, global load widths, LDS traffic)."""

from __future__ import annotations

from pathlib import Path

from workers.backends.base import BuildOutput, Toolchain
from workers.records import Variant
from workers.rocm.build import build_hip
from workers.rocm.toolchain import HipToolchain, find_hip_toolchain


def toolchain() -> Toolchain | None:
    found = find_hip_toolchain()
    if not isinstance(found, HipToolchain):
        return None
    return Toolchain("hip", found.compiler, f"{found.kind} {found.version}", {"kind": found.kind})


def build(variant: Variant, src: Path, out: Path, tc: Toolchain, include_dirs: list[Path]) -> BuildOutput:
    kind = variant.binding.kind
    if kind == "pybind11":
        return BuildOutput(False, "", skip_reason="pybind11 HIP modules are built on ROCm nodes only "
                                                  "(needs ROCm's torch); not available here")
    mode = "code-object" if kind == "raw" else "shared-library"
    launch = {"*": {k: int(v) for k, v in variant.launch.items() if k in ("block_threads", "dynamic_lds_bytes")}}
    result = build_hip([str(src / s) for s in variant.sources], [str(d) for d in include_dirs],
                       list(variant.flags), list(variant.arches) or ["gfx942"], str(out), mode,
                       launch=launch, output_name="variant")
    if not result.ok:
        return BuildOutput(False, result.log, "\n".join(result.first_errors))
    # Keep only what runs: the library (c) or the code objects (raw); analysis copies go.
    keep = {Path(p).name for p in result.artifacts}
    for path in out.iterdir():
        if path.name not in keep:
            path.unlink()
    return BuildOutput(True, result.log, analysis=flatten(result.kernels))


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
                "lds_bytes": occ.get("lds_alloc_bytes", rem.get("lds_bytes")),
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
