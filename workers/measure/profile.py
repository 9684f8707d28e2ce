"""Profile stage: run the timed call once more under the vendor profiler, in a child process,
and reduce the kernels that call launched to flopwatch's short metric names.

NVIDIA: ncu profiles only launches inside the NVTX range `flopwatch:timed` (push/pop) that
the child opens around the call, so cuBLAS's `nvjet_*` kernels are found without guessing names.
AMD: rocprofv3 has no range filter for counters, so the child brackets the call with two
marker kernels (an int8 fill) and the dispatches between the last two markers are the call's.
Counters are planned into passes within gfx942's per-block limits.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from workers.isolation.sandbox import run_child

MARKER_KERNEL = re.compile(r"FillFunctor<signed char>")
# Metrics that add up over the kernels of one call; the rest are averaged weighted by duration.
_ADDITIVE = {"tensor_insts", "dram_bytes", "duration_ns", "mfma_insts", "mfma_bf16_insts", "mfma_f16_insts",
             "mfma_f32_insts", "mfma_f64_insts", "mfma_i8_insts", "lds_insts", "lds_bank_conflicts",
             "async_copy_bytes", "tma_load_bytes"}
# Why a call has no coalescing figure, where its global loads took a path the formula does not
# cover (`coalescing_na`, shown as "coalescing n/a" with this text).
TMA_ONLY = ("n/a: global loads through TMA only (tiles moved whole by the Tensor Memory Accelerator, "
            "no per-request coalescing)")


def explain_missing(counters: dict) -> dict:
    """A call with no coalescing figure and loads through TMA says so (`coalescing_na`)."""
    if "coalescing_pct" not in counters and counters.get("tma_load_bytes", 0) > 0:
        return {**counters, "coalescing_na": TMA_ONLY}
    return counters


def child_argv(spec_file: str, result_file: str) -> list[str]:
    return [sys.executable, "-m", "workers.job.child", spec_file, result_file]


def combine(per_kernel: list[dict[str, float]]) -> dict[str, float]:
    """One row for the whole call: sums for counts, duration-weighted means for rates."""
    if not per_kernel:
        return {}
    total_ns = sum(k.get("duration_ns", 0.0) for k in per_kernel) or float(len(per_kernel))
    out: dict[str, float] = {"kernels": float(len(per_kernel))}
    names = {n for k in per_kernel for n in k}
    for name in names:
        present = [k for k in per_kernel if name in k]
        if name in _ADDITIVE:
            out[name] = sum(k[name] for k in present)
        else:
            weight = [k.get("duration_ns", total_ns / len(per_kernel)) for k in present]
            out[name] = sum(k[name] * w for k, w in zip(present, weight)) / (sum(weight) or 1.0)
    return {k: round(v, 4) for k, v in out.items()}


def profile_cuda(work: Path, spec_file: str, timeout_s: float, env: dict) -> tuple[dict, str]:
    """Run the profile child under ncu; returns (counters, diagnostic)."""
    from workers.cuda import metrics, ncu
    from workers.cuda.toolchain import find_ncu

    tool = find_ncu()
    if not tool:
        return {}, "ncu not found on this node"
    table = metrics.load_table("sm90")
    csv_path = work / "ncu.csv"
    argv = ncu.ncu_command(tool, metrics.required_metrics(table), child_argv(spec_file, "profile.json"),
                           output_csv=str(csv_path))
    outcome = run_child(argv, timeout_s, work, env)
    if not csv_path.exists():
        return {}, f"ncu wrote no report (exit {outcome.returncode}): {outcome.stderr_tail[-500:]}"
    text = csv_path.read_text()
    try:
        launches = ncu.parse_raw_csv(text)
    except ValueError:
        launches = []
    if not launches:
        # e.g. a device-to-device copy done by a copy engine launches no kernel at all
        notes = [line for line in text.splitlines() if line.startswith("==")][-3:]
        return {}, "ncu profiled no kernel inside the timed range: " + " ".join(notes)[:400]
    counters = explain_missing(combine([metrics.derive(launch.metrics, table) for launch in launches]))
    counters["kernel_names"] = sorted({launch.kernel for launch in launches})[:8]
    return counters, ""


def rocm_plan(arch: str = "gfx942"):
    """The metric table and the counter passes that cover it within the per-pass limits."""
    from workers.rocm import metrics, passes

    table = metrics.load_metric_table(arch)
    groups = [sorted(metrics.required_counters(table, [name])) for name in table.metrics]
    return table, passes.plan_passes([g for g in groups if g])


def calls_dispatches(dispatches: list) -> list:
    """Dispatches strictly between the last two marker kernels (the timed call's launches)."""
    marks = [i for i, d in enumerate(dispatches) if MARKER_KERNEL.search(d.kernel_name)]
    if len(marks) < 2:
        return []
    return dispatches[marks[-2] + 1:marks[-1]]


def profile_rocm(work: Path, spec_file: str, timeout_s: float, env: dict, arch: str) -> tuple[dict, str]:
    """Run the profile child under rocprofv3 (one run per counter pass); returns (counters, diagnostic)."""
    from workers.rocm import commands, metrics, rocprof

    tool = shutil.which("rocprofv3")
    if not tool:
        return {}, "rocprofv3 not found on this node"
    table, plan = rocm_plan(arch if arch in ("gfx942",) else "gfx942")
    out_dir = work / "rocprof"
    inv = commands.rocprofv3_command(plan, child_argv(spec_file, "profile.json"), str(out_dir), "flopwatch",
                                     input_file=str(work / "counters.txt"), rocprofv3=tool)
    if inv.input_file:
        Path(inv.input_file).write_text(inv.input_text)
    outcome = run_child(list(inv.argv), timeout_s, work, env)
    passes = rocprof.read_pass_directories(out_dir) if len(plan) > 1 else \
        [rocprof.parse_counter_collection(p.read_text()) for p in sorted(out_dir.rglob("*counter_collection.csv"))]
    if not any(passes):
        return {}, f"rocprofv3 wrote no counters (exit {outcome.returncode}): {outcome.stderr_tail[-500:]}"
    merged = sorted(rocprof.merge_passes(passes), key=lambda d: d.dispatch_id)
    chosen = calls_dispatches(merged)
    if not chosen:
        return {}, "the timed call's dispatches were not found between the marker kernels"
    rows = []
    for d in chosen:
        values = metrics.dispatch_values(d)
        row = metrics.compute_metrics(table, values)
        if d.duration_ns:
            row["duration_ns"] = float(d.duration_ns)
        rows.append({k: v for k, v in row.items() if v is not None})
    counters = combine(rows)
    counters["kernel_names"] = sorted({d.kernel_name[:120] for d in chosen})[:8]
    return counters, ""
