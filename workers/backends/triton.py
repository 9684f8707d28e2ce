"""`triton` back end: the variant is a Python file with a `@triton.jit` kernel and a launcher
taking the op's tensors. The build copies the sources (the launcher runs them) and compiles the
kernel ahead of time for every arch of the manifest (`sm_90a`, `gfx942`, ...) with Triton's own
compiler, which needs no GPU, then analyses each compilation like the `cuda` and `hip` back
ends do. At run time Triton's JIT compiles for the device it finds, with the same options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from workers.backends.base import BuildOutput, Toolchain
from workers.backends.python import ship_tree
from workers.backends.triton_analysis import amd_row, nvidia_row, triton_tool
from workers.bindings.python_entry import TREE, entry_parts, repo_path
from workers.core.records import Variant
from workers.isolation.sandbox import run_child
from workers.triton_aot.spec import SpecError, parse_arch

DEFAULT_ARCHES = ("sm_90a", "gfx942")


def toolchain() -> Toolchain | None:
    try:
        import triton
    except ImportError:
        return None
    return Toolchain("triton", "triton", f"triton {triton.__version__}",
                     {"ptxas": triton_tool("ptxas"), "cuobjdump": triton_tool("cuobjdump")})


def build(variant: Variant, src: Path, out: Path, tc: Toolchain, include_dirs: list[Path]) -> BuildOutput:
    ship_tree(variant, src, out, include_dirs)
    if not variant.triton:
        # A Triton module as repositories have it (a public function launching a @triton.jit
        # kernel): nothing to compile ahead of time; the job records the kernels Triton's JIT
        # compiled and the configuration its autotuner chose (`workers.job.triton_jit`).
        return BuildOutput(True, "sources copied; no [triton] table: the kernels are analysed from Triton's JIT "
                                 "at run time")
    try:
        file = kernel_file(variant, out)
    except (ValueError, FileNotFoundError) as exc:
        return BuildOutput(False, str(exc), str(exc))
    try:
        arches = resolve_arches(list(variant.arches) or list(DEFAULT_ARCHES))
        targets = [parse_arch(a) for a in arches]
    except (SpecError, RuntimeError) as exc:
        return BuildOutput(False, str(exc), str(exc))
    work = out.parent / "triton-aot"
    work.mkdir(exist_ok=True)
    request = {"file": str(file), "kernel": variant.triton.get("kernel", ""), "table": variant.triton,
               "arches": arches, "dtypes": list(variant.dtypes), "out": str(work)}
    (work / "request.json").write_text(json.dumps(request))
    env = {**os.environ, "PYTHONPATH": _project_root() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    outcome = run_child([sys.executable, "-m", "workers.triton_aot.compile", "request.json", "result.json"],
                        variant.timeout_s * 5, work, env)
    result_file = work / "result.json"
    if outcome.timed_out or not result_file.exists():
        how = "timed out" if outcome.timed_out else f"exited with {outcome.returncode or outcome.signal_name}"
        return BuildOutput(False, outcome.stderr_tail, f"the Triton compiler process {how}: "
                                                       f"{outcome.stderr_tail.strip()[-800:]}")
    result = json.loads(result_file.read_text())
    if "error" in result:
        return BuildOutput(False, outcome.stderr_tail + result["error"], result["error"])
    failed = [c for c in result["compiled"] if c.get("error")]
    log = "\n".join(f"{c['label']}: {c.get('error') or 'compiled'}" for c in result["compiled"])
    if failed:
        return BuildOutput(False, log, f"{len(failed)} of {len(result['compiled'])} Triton compilation(s) "
                                       f"failed; first ({failed[0]['label']}):\n{failed[0]['error']}")
    return BuildOutput(True, f"triton {result['triton']}\n{log}",
                       analysis=analyse(work, result["compiled"], tc, {t.label: t for t in targets}))


def kernel_file(variant: Variant, out: Path) -> Path:
    """The file holding `[triton] kernel`: the entry's file (`file.py:launcher`), or the module
    a package entry names (`liger_kernel.ops.rms_norm:fn`), found below the import roots."""
    kind, where, _ = entry_parts(variant.binding.entry)
    tree = out / TREE
    if kind == "file":
        return tree / repo_path(variant.folder, where)
    if kind == "module":
        from workers.bindings.python_entry import read_index

        rel = Path(*where.split("."))
        for root in read_index(out).get("roots", []):
            for candidate in (tree / root / rel.with_suffix(".py"), tree / root / rel / "__init__.py"):
                if candidate.is_file():
                    return candidate
        raise FileNotFoundError(f"[triton] kernel: module {where} is not below the import roots")
    raise ValueError(f"[triton] kernel needs an entry of a file or module, not {variant.binding.entry!r}")


def resolve_arches(arches: list[str]) -> list[str]:
    """`native` is the target of the build node's own GPU (the node's target, as the JIT would
    pick it); the explicit arches compile anywhere."""
    if "native" not in arches:
        return arches
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("arch 'native' needs a GPU on the build node; name the targets (sm_90a, gfx942)")
    props = torch.cuda.get_device_properties(0)
    if getattr(torch.version, "hip", None):
        native = props.gcnArchName.split(":")[0]
    else:
        native = f"sm_{props.major}{props.minor}{'a' if props.major >= 9 else ''}"
    return list(dict.fromkeys(native if a == "native" else a for a in arches))


def analyse(work: Path, compiled: list[dict], tc: Toolchain, targets: dict) -> dict:
    """One row per compilation, keyed by its label (`kernel[dtype(,config)]@arch`); a step of
    the analysis that cannot run here is noted in the row instead of failing the build."""
    kernels = {}
    for c in compiled:
        try:
            row, problem = nvidia_row(work, c, tc.detail) if targets[c["arch"]].vendor == "nvidia" \
                else amd_row(work, c)
        except (ValueError, OSError, subprocess.SubprocessError) as exc:
            # e.g. a configuration whose LDS exceeds a CU: it compiles, but cannot launch
            # there, and Triton's autotuner drops it at run time.
            row, problem = {}, f"{type(exc).__name__}: {exc}"
        kernels[c["label"]] = {**({"arch": c["arch"]} if not row else row),
                               **({"analysis_error": problem} if problem else {})}
    return {"vendor": "triton", "kernels": kernels}


def _project_root() -> str:
    return str(Path(__file__).resolve().parents[2])
