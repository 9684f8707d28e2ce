"""gfx942 rows for a CUDA torch extension on a node without a ROCm build of torch.

A ROCm build of torch builds a CUDA extension by running torch's own hipify over its sources
and compiling the result with hipcc. Neither hipify (it ships in every torch build) nor the
device code needs ROCm torch; only linking the host module does. So, on any build node with a HIP compiler (the
clang-19 gfx942 cross toolchain, or ROCm's), the extension's CUDA translation units are
hipified as torch's ROCm build would (`torch.utils.hipify.hipify_python.hipify`, in a scratch
copy of the repository, headers they include hipified with them) and each is compiled for
gfx942, device code only, by `workers.rocm.build.build_hip` — the same compiler line and the
same analysis (VGPR/SGPR/AGPR, LDS, spills, occupancy, MFMA counts) as the raw and pybind11 HIP
variants.

Torch's host headers parse as HIP with this node's torch (a CPU or CUDA build) except for two
things only ROCm torch brings: rocThrust's `thrust/complex.h` and the `ATen/hip`, `c10/hip`
headers hipify points `ATen/cuda/CUDAContext.h` & co. at. `workers/rocm/torch_hip` declares
what extensions use of those (never defined: device-only compiles link no host code), searched
after every real include folder so a ROCm torch's own headers win.

This is extra analysis: whatever fails here is a note, never a failed build.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from workers.rocm.build import build_hip
from workers.rocm.toolchain import HipToolchain

ARCH = "gfx942"
SHIM = Path(__file__).resolve().parents[1] / "rocm" / "torch_hip"
# What torch's ROCm build puts on hipcc's line for an extension (cpp_extension's
# COMMON_HIP_FLAGS and COMMON_HIPCC_FLAGS, the C++ standard it requires); -fPIC is host-only.
TORCH_HIP_DEFINES = ("-std=c++20", "-DTORCH_API_INCLUDE_EXTENSION_H", "-D__HIP_PLATFORM_AMD__=1",
                     "-DUSE_ROCM=1", "-DHIPBLAS_V2", "-DCUDA_HAS_FP16=1", "-D__HIP_NO_HALF_OPERATORS__=1",
                     "-D__HIP_NO_HALF_CONVERSIONS__=1", "-DHIP_ENABLE_WARP_SYNC_BUILTINS=1")
# The analysis runs inside the build's own time limit (build_timeout_s, 900 s by default) after
# the nvcc build; a unit that includes torch/extension.h takes 15-60 s. Past this budget the
# remaining units are left out with a note, so the extra analysis never makes a build time out.
BUDGET_S = 300.0
# load_inline's CUDA file starts with these, as torch writes it (cpp_extension.load_inline).
INLINE_HEADERS = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"


def wanted(arches: Iterable[str]) -> bool:
    """A variant's arches that name none for gfx942 leave it out; none named means every arch."""
    arches = list(arches)
    return not arches or ARCH in arches


def device_flags(spec: Mapping) -> list[str]:
    """The repository's nvcc flags that mean the same to clang (defines, undefines); the rest
    (`-gencode`, `--use_fast_math`, `-Xptxas ...`) is nvcc's own (pure)."""
    flags = list(spec.get("extra_cuda_cflags") or ())
    return [f for f in flags if f.startswith(("-D", "-U")) and len(f) > 2]


def analyse(specs: list[dict], root: Path, work: Path, tc: HipToolchain, host_includes: list[str],
            launch: Mapping | None = None, budget_s: float = BUDGET_S) -> tuple[dict[str, dict], list[str]]:
    """({"kernel@gfx942": row}, notes) over the CUDA extensions in `specs`; `root` holds the
    repository's files, `work` is scratch space, `host_includes` are torch's and Python's
    include folders (`torch/extension.h` includes Python.h)."""
    from workers.backends.hip import flatten

    rows: dict[str, dict] = {}
    notes: list[str] = []
    deadline = time.monotonic() + budget_s
    for spec in specs:
        try:
            units, includes = hipify(spec, root, work / spec["name"])
        except Exception as exc:  # noqa: BLE001 - hipify of the repository's text; a note, not a failure
            notes.append(f"{ARCH} analysis: hipify failed: {type(exc).__name__}: {exc}")
            continue
        tree = (work / spec["name"]).resolve() / "tree"
        for index, unit in enumerate(units):
            if time.monotonic() > deadline:
                notes.append(f"{ARCH} analysis: {spec['name']}: {len(units) - index} of {len(units)} translation "
                             f"unit(s) left out, past the analysis' {budget_s:g} s budget")
                break
            # One compile per translation unit: several .hip files with one -o would need -fgpu-rdc.
            built = build_hip([str(unit)], [*includes, *host_includes],
                              [*TORCH_HIP_DEFINES, f"-DTORCH_EXTENSION_NAME={spec['name']}", *device_flags(spec),
                               "-idirafter", str(SHIM)],
                              [ARCH], str(work / spec["name"] / f"build{index}"), "code-object",
                              launch=launch, toolchain=tc, output_name=unit.stem)
            if not built.ok:
                first = (built.first_errors or built.log.strip().splitlines()[-1:] or ["failed"])[0]
                notes.append(f"{ARCH} analysis: {first.replace(str(tree) + '/', '')}")
                continue
            for name, row in flatten(built.kernels)["kernels"].items():
                rows[f"{name}@{ARCH}"] = row
    return rows, notes


def hipify(spec: Mapping, root: Path, work: Path) -> tuple[list[Path], list[str]]:
    """Hipify one extension's CUDA translation units as torch's ROCm build does; returns the
    hipified units and the include folders, both in a scratch copy of `root`."""
    from torch.utils.hipify import hipify_python

    tree = work.resolve() / "tree"  # hipify keys its results by absolute path
    if tree.exists():
        shutil.rmtree(tree)
    # hipify writes next to its inputs (x.cu -> x.hip, util.cuh -> util_hip.cuh): a copy keeps
    # the repository's files as the nvcc build and the jobs see them.
    shutil.copytree(root, tree, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    if spec.get("kind") == "load_inline":
        (tree / "cuda.cu").write_text(INLINE_HEADERS + "\n".join(spec.get("cuda_sources") or ()))
        sources = ["cuda.cu"]
    else:
        sources = [s for s in spec.get("sources") or () if s.endswith(".cu")]
    includes = [str(tree / d) for d in spec.get("include_dirs") or ()]
    # it prints a summary whatever it is told; the build log is the compiler's
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        result = hipify_python.hipify(project_directory=str(tree), output_directory=str(tree),
                                      header_include_dirs=includes, extra_files=[str(tree / s) for s in sources],
                                      is_pytorch_extension=True, hipify_extra_files_only=True,
                                      show_detailed=False, show_progress=False)
    units = []
    for s in sources:
        found = result.get(str(tree / s))
        units.append(Path(found.hipified_path) if found and found.hipified_path else tree / s)
    return units, includes
