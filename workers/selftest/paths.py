"""The self-test's rows: device identity, then build → check → time of each tiny variant,
then one profiler pass. Every path this node cannot offer (no GPU, no compiler, no profiler)
is `n/a` with its reason; every path it should offer and that fails is `FAIL` with the exact
error and what to check.

The variants go through `workers.backends.build.build_variant` and `workers.job.runner.execute_job`, the
bodies of the Ray build and run tasks, so what passes here is what `flopwatch run` does on the
node, minus the cluster.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from workers.backends import BACKENDS
from workers.backends.build import build_variant
from workers.core import status
from workers.core.records import BuildResult, Job, Result, Variant
from workers.measure import device
from workers.toolkit.bundle import pack

KERNELS = Path(__file__).resolve().parent / "kernels"
OK, FAIL, NA = "ok", "FAIL", "n/a"

# What to look at when a path fails, by what failed.
_CHECK_BUILD = {
    "cpp": "a C++ compiler on PATH (g++ or clang++); `flopwatch doctor`",
    "python": "torch imports in this Python",
    "cuda": "nvcc (CUDA_HOME) and, for pybind11, a CUDA build of torch with its headers",
    "hip": "hipcc (ROCM_PATH) or the clang-19 cross toolchain (tools/install-hip-cross.sh)",
    "triton": "the triton wheel (pip install triton) and its bundled ptxas; llvm-readelf-19 for gfx942",
}
_CHECK_RUN = {
    "c": "the library's exported symbol and the stream argument (docs/variants.md, `c` binding)",
    "raw": "the module API library torch loaded (libcuda.so.1 / libamdhip64.so, workers/bindings/module_api.py); "
           "grid/block in the manifest",
    "pybind11": "the module was built against this torch (same version, same CUDA/ROCm)",
    "python": "torch's device build matches the GPU (torch.cuda.is_available())",
    "triton": "triton imports and its JIT compiles for this GPU: a C compiler and Python headers "
              "(python3-dev) for its launcher stub, a writable TRITON_CACHE_DIR (~/.triton)",
}


@dataclass(frozen=True)
class Row:
    path: str
    result: str  # ok | FAIL | n/a
    seconds: float | None = None
    detail: str = ""
    check: str = ""  # what to look at, for a failure

    def to_dict(self) -> dict:
        return {"path": self.path, "result": self.result, "seconds": self.seconds,
                "detail": self.detail, "check": self.check}


def identity_rows(kinds: list[str]) -> list[Row]:
    rows = []
    for kind in kinds:
        start = time.perf_counter()
        try:
            info = device.info(kind)
        except Exception as exc:
            rows.append(Row(f"device identity ({kind})", FAIL, None, f"{type(exc).__name__}: {exc}",
                            "torch.cuda.get_device_properties(0); nvidia-smi / amd-smi"))
            continue
        missing = [f for f in ("name", "arch") + (("uuid", "runtime") if kind != "cpu" else ())
                   if not getattr(info, f)]
        detail = " ".join(x for x in (info.name, info.arch, info.uuid, info.driver, info.runtime) if x)
        rows.append(Row(f"device identity ({kind})", FAIL if missing else OK, time.perf_counter() - start,
                        detail + (f"; missing: {missing}" if missing else ""),
                        "nvidia-smi / /sys/module/amdgpu/version; torch's device properties" if missing else ""))
    return rows


def start_builds(pool: ThreadPoolExecutor, vs: list[Variant],
                 progress: Callable[[str], None] = lambda s: None) -> dict[str, Future]:
    """{variant name: future of (BuildResult or None, artifact, reason)}: builds run in
    parallel (they wait on compilers); a back end with no toolchain here gives None and the
    reason."""
    def one(v: Variant):
        backend = BACKENDS[v.backend]
        try:
            tc = backend.toolchain()
        except Exception as exc:
            return None, {}, f"{v.backend} toolchain probe failed: {type(exc).__name__}: {exc}"
        if tc is None:
            return None, {}, f"no {v.backend} toolchain on this node"
        progress(f"build {v.name}")
        record, artifact = build_variant(v, pack(KERNELS.parent, [v.folder]), f"selftest-{v.name}")
        return record, artifact, ""

    return {v.name: pool.submit(one, v) for v in vs}


def _label(v: Variant) -> str:
    return f"{v.binding.kind} · {v.backend}"


def build_row(v: Variant, record: BuildResult | None, reason: str) -> Row:
    path = f"{_label(v)} · build"
    if record is None:
        return Row(path, NA, None, reason)
    if record.skip_reason:
        return Row(path, NA, record.seconds, record.skip_reason)
    if not record.ok:
        return Row(path, FAIL, record.seconds, record.first_errors.strip()[-1500:] or record.log[-1500:],
                   _CHECK_BUILD[v.backend])
    summary, problem = _analysis_summary(v, record.analysis)
    if problem:
        return Row(path, FAIL, record.seconds, problem, _CHECK_BUILD[v.backend])
    return Row(path, OK, record.seconds, summary)


def _analysis_summary(v: Variant, analysis: dict) -> tuple[str, str]:
    """One line of the static analysis; a compiled back end without it is a failure."""
    if v.backend in ("cpp", "python"):
        return ("", "")
    kernels = analysis.get("kernels") or {}
    if not kernels:
        return "", "the build produced no static analysis (no kernel found in the output)"
    parts, broken, untooled = [], [], []
    for name, row in kernels.items():
        regs = row.get("registers") or row.get("vgprs")
        error = row.get("analysis_error", "")
        if error.startswith(_MISSING_TOOL):
            untooled.append(f"{name}: {error}")
            continue
        if error or not regs:
            broken.append(f"{name}: {error or 'no register count'}")
            continue
        mem = row.get("smem_bytes", row.get("lds_bytes"))
        parts.append(f"{row.get('arch', '')}: {'regs' if 'registers' in row else 'vgprs'}={regs}"
                     + (f" smem={mem}" if mem is not None else ""))
    if untooled and not parts and not broken:
        broken = untooled  # nothing could be analysed at all: that is a failure of this node
    elif untooled:
        # A cross target whose analysis tool this node lacks (llvm-readelf for gfx942 on an
        # NVIDIA node) is not a path this node offers: say so, do not fail the row.
        parts.append("not analysed here: " + "; ".join(untooled))
    return "; ".join(parts), "; ".join(broken)


# Analysis errors that name a tool this node lacks rather than a problem of the kernel.
_MISSING_TOOL = ("no llvm-readelf", "no ptxas", "no cuobjdump", "no llvm-objdump")


def run_rows(v: Variant, record: BuildResult | None, artifact: dict, kinds: list[str],
             budget_s: float, profile_kind: str | None) -> list[Row]:
    """Check and time `v` on every device kind it declares: on this node's kinds for real, the
    others `n/a`. `profile_kind` adds one profiler pass to the run on that kind."""
    from workers.job.runner import execute_job

    rows = []
    for kind in v.devices:
        path = f"{_label(v)} · run on {kind}"
        if kind not in kinds:
            rows.append(Row(path, NA, None, f"no {kind} device here"))
            continue
        if record is None or not record.ok or record.skip_reason:
            rows.append(Row(path, NA, None, "not built here (see its build row)"))
            continue
        shape = v.shapes[0]
        job = Job(v.name, v.op, shape, v.dtypes[0], kind)
        settings = {"timing": {"budget_s": budget_s}, "timeout_s": v.timeout_s,
                    "profile": profile_kind == kind}
        start = time.perf_counter()
        result = execute_job(job, v, record, artifact, settings)
        rows.append(_run_row(path, v, result, time.perf_counter() - start))
        if profile_kind == kind:
            rows.append(profiler_row(kind, result))
    return rows


def _run_row(path: str, v: Variant, r: Result, wall: float) -> Row:
    if r.status != status.OK:
        return Row(path, FAIL, wall, f"{r.status}: {r.diagnostic}"[:1500], _CHECK_RUN[v.binding.kind])
    err = r.correctness.get("rel_fro_err")
    return Row(path, OK, r.median_s, f"correct (rel. error {err:.1e}), {len(r.samples_s)} timed samples, "
                                     f"{wall:.1f} s with process start")


def profiler_row(kind: str, r: Result) -> Row:
    """One profiler pass: counters parsed, and the metric formulas evaluated on them."""
    tool = "ncu" if kind == "cuda" else "rocprofv3"
    path = f"profiler ({tool})"
    check = (f"{tool} on PATH and allowed to read counters (NVIDIA: "
             f"NVreg_RestrictProfilingToAdminUsers=0 or root; AMD: /dev/kfd access)")
    if r.status != status.OK:
        return Row(path, NA, None, "the profiled run itself failed (see the row above)")
    counters = dict(r.counters)
    problem = counters.pop("profile_error", "")
    if problem:
        return Row(path, FAIL, None, problem[:1500], check)
    numbers = {k: v for k, v in counters.items() if isinstance(v, (int, float))}
    # A formula metric, not a raw counter: proves the parse → formula step, not only the tool.
    derived = next((k for k in ("coalescing_pct", "dram_bytes", "sectors_per_request", "l2_hit_pct",
                                "lds_bank_conflict_pct", "valu_utilization_pct") if k in numbers), None)
    if not numbers or derived is None:
        return Row(path, FAIL, None, f"no formula metric among the counters: {sorted(counters)[:12]}", check)
    return Row(path, OK, numbers.get("duration_ns", 0) / 1e9 or None,
               f"{len(numbers)} metrics, e.g. {derived}={numbers[derived]:g}; kernels "
               f"{counters.get('kernel_names', [])}")


def profiler_available(kind: str) -> tuple[bool, str]:
    import shutil

    from workers.cuda.toolchain import find_ncu

    if kind == "cuda":
        return (True, "") if find_ncu() else (False, "ncu not found (Nsight Compute, CUDA toolkit)")
    if kind == "rocm":
        return (True, "") if shutil.which("rocprofv3") else (False, "rocprofv3 not found (ROCm 6.2+)")
    return False, "no GPU here: the profilers need one"


def run(vs: list[Variant], budget_s: float = 0.2, progress: Callable[[str], None] = lambda s: None) -> list[Row]:
    """All rows for the tiny variants `vs` (loaded from `KERNELS` by the command, which owns
    manifest validation): identity, then build and runs per variant, then the profiler. Runs
    start as soon as their variant is built; pybind11 modules (the slowest builds) run last."""
    kinds = device.kinds_here()
    gpu = device.gpu_kind()
    rows = identity_rows(kinds)
    profile_kind, why_not = None, "no GPU here: the profilers need one"
    if gpu:
        ok, why_not = profiler_available(gpu)
        profile_kind = gpu if ok else None
    # The profiler pass rides on the run of the vendor's `c` variant (a kernel of our own, with
    # global loads for the coalescing formula), or torch's when that could not be built here.
    profiled = {"cuda": "selftest_cuda_c", "rocm": "selftest_hip_c"}.get(profile_kind or "")
    order = sorted(vs, key=lambda v: (v.binding.kind == "pybind11", v.name != profiled, v.name))
    with ThreadPoolExecutor(max_workers=max(2, min(len(vs), os.cpu_count() or 2))) as pool:
        builds = start_builds(pool, order, progress)
        for v in order:
            record, artifact, reason = builds[v.name].result()
            rows.append(build_row(v, record, reason))
            if v.name == profiled and not (record and record.ok and not record.skip_reason):
                profiled = "selftest_python"
            progress(f"run {v.name}")
            rows += run_rows(v, record, artifact, kinds, budget_s, profile_kind if v.name == profiled else None)
    if not any(r.path.startswith("profiler") for r in rows):
        tool = {"cuda": "ncu", "rocm": "rocprofv3"}.get(gpu or "", "ncu / rocprofv3")
        rows.append(Row(f"profiler ({tool})", NA, None, why_not or "the profiled variant was not built here"))
    return rows


def failed(rows: list[Row]) -> bool:
    return any(r.result == FAIL for r in rows)
