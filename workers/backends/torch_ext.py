"""`torch` back end: a variant whose kernels are torch C++/CUDA extensions, built with
`torch.utils.cpp_extension` as the repository builds them (setup.py's CUDAExtension /
CppExtension, or its `load(...)` / `load_inline(...)` call, read statically by
`workers.torch_ext.spec`). The build runs torch's own machinery in a child process
(`workers.torch_ext.build`): nvcc on a CUDA build of torch, hipcc after torch's hipify on a
ROCm build, the host compiler for a C++ extension. The repository's Python files are shipped
as the `python` back end ships them; CUDA kernels are analysed like the `cuda` back end's
(registers, shared memory, spills from ptxas; the SASS histogram from cuobjdump), and, where
the node has a HIP compiler, like the `hip` back end's for gfx942 after torch's hipify
(`workers.backends.torch_ext_gfx942`), whatever build of torch the node has."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from workers.backends.base import BuildOutput, Toolchain, first_errors
from workers.backends.python import repository_root, ship_tree
from workers.core.records import Variant
from workers.isolation.sandbox import run_child
from workers.rocm.toolchain import HipToolchain, find_hip_toolchain
from workers.backends import torch_ext_gfx942 as gfx942
from workers.torch_ext.spec import ExtensionSpec

# An extension build compiles several translation units with nvcc (minutes for a large one);
# the build's own limit (`pipeline.project.config.Limits.build_timeout_s`) bounds it as a whole.
EXTENSION_TIMEOUT_S = 1800.0


def toolchain() -> Toolchain | None:
    """torch and the compiler its extensions build with on this node."""
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError:
        return None
    device, compiler = _device_compiler(torch, cpp_extension)
    ninja = "ninja" if cpp_extension.is_ninja_available() else "no ninja"
    # The gfx942 analysis is part of what a build produces: its compiler enters the ident, so a
    # node that gains or changes it rebuilds instead of reusing builds without those rows.
    hip = find_hip_toolchain()
    amd = f"; {gfx942.ARCH} analysis {hip.kind} {hip.version}" if isinstance(hip, HipToolchain) else ""
    return Toolchain("torch", compiler or "c++", f"torch {torch.__version__} {device or 'cpu'} {ninja}{amd}",
                     {"cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None),
                      "device_compiler": compiler, "cuobjdump": shutil.which("cuobjdump"),
                      "demangler": shutil.which("cu++filt") or shutil.which("c++filt"),
                      "gfx942_compiler": hip.compiler if isinstance(hip, HipToolchain) else None})


def _device_compiler(torch, cpp_extension) -> tuple[str, str]:
    if torch.version.cuda and cpp_extension.CUDA_HOME:
        return f"cuda {torch.version.cuda}", os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc")
    if getattr(torch.version, "hip", None) and cpp_extension.ROCM_HOME:
        return f"rocm {torch.version.hip}", os.path.join(cpp_extension.ROCM_HOME, "bin", "hipcc")
    return "", ""


def cpu_part(specs: list[dict], variant: Variant, tc: Toolchain) -> tuple[list[dict], str]:
    """On a node whose torch has neither CUDA nor ROCm, a variant that runs on the CPU too
    builds what this node can: a setup.py extension's C++ sources without its CUDA ones (the
    `CppExtension` branch its setup.py takes without a GPU; extension-cpp's CPU kernels live in
    the .cpp that registers the ops). The specs to build and a note for the log (pure)."""
    if "cpu" not in variant.devices or tc.detail.get("cuda") or tc.detail.get("hip"):
        return specs, ""
    out, dropped = [], []
    for s in specs:
        cuda = [f for f in s.get("sources") or () if f.endswith((".cu", ".cuh"))]
        rest = [f for f in s.get("sources") or () if f not in cuda]
        if s.get("kind") == "setup" and ExtensionSpec.from_dict(s).cuda and rest:
            s = {**s, "sources": rest, "with_cuda": False}
            dropped += cuda
        out.append(s)
    note = (f"flopwatch: this node's torch has no CUDA: built the C++ sources only, without {dropped}\n"
            if dropped else "")
    return out, note


def skip_reason(specs: list[dict], tc: Toolchain) -> str:
    """Why this node cannot build these extensions, if it cannot (pure): a CUDA extension needs
    a CUDA or ROCm build of torch and that build's compiler."""
    cuda = [s["name"] for s in specs if ExtensionSpec.from_dict(s).cuda]
    if not cuda:
        return ""
    if not (tc.detail.get("cuda") or tc.detail.get("hip")):
        return (f"extension(s) {cuda} have CUDA sources: they build on a node with a CUDA or ROCm build of torch; "
                f"this one has {tc.version.split(' ')[1]}")
    if not tc.detail.get("device_compiler"):
        return f"extension(s) {cuda}: torch finds no CUDA_HOME / ROCM_HOME (nvcc or hipcc) on this node"
    return ""


def build(variant: Variant, src: Path, out: Path, tc: Toolchain, include_dirs: list[Path]) -> BuildOutput:
    specs = [dict(s) for s in variant.extensions]
    roots = tuple(dict.fromkeys(s["package_dir"] for s in specs if s.get("kind") == "setup" and s.get("package_dir")))
    ship_tree(variant, src, out, include_dirs, extra_roots=roots)
    full = specs  # the gfx942 analysis reads the CUDA sources a CPU node's build leaves out
    specs, note = cpu_part(specs, variant, tc)
    reason = skip_reason(specs, tc)
    if reason:
        # The node cannot build the module, but the gfx942 analysis needs no CUDA torch.
        amd, notes = amd_analysis(variant, full, src, out, tc)
        return BuildOutput(False, "\n".join([reason, *notes]), skip_reason=reason,
                           analysis=_with_amd({}, amd, notes))
    work = out.parent / "torch-ext"
    work.mkdir(exist_ok=True)
    request = {"root": str(repository_root(variant, src)), "out": str(out), "specs": specs,
               # the entry imported once after the build (a [reference] op's peer has none)
               "variant": variant.to_dict() if variant.backend == "torch" else None}
    (work / "request.json").write_text(json.dumps(request))
    env = {**os.environ, "PYTHONPATH": _project_root() + os.pathsep + os.environ.get("PYTHONPATH", ""),
           # torch caches JIT builds per user; the build folder given here is the only one used
           "TORCH_EXTENSIONS_DIR": str(work / "torch_extensions")}
    outcome = run_child([sys.executable, "-m", "workers.backends.torch_ext_child", "request.json", "result.json"],
                        EXTENSION_TIMEOUT_S, work, env)
    log = note + (work / "stdout.txt").read_text(errors="replace") + (work / "stderr.txt").read_text(errors="replace")
    result_file = work / "result.json"
    if outcome.timed_out or not result_file.exists():
        how = "timed out" if outcome.timed_out else f"exited with {outcome.returncode or outcome.signal_name}"
        return BuildOutput(False, log, f"the extension build process {how}:\n{first_errors(log)}")
    result = json.loads(result_file.read_text())
    index = json.loads((out / "python.json").read_text())
    index["extensions"] = result["built"]
    (out / "python.json").write_text(json.dumps(index))
    if result["failed"]:
        name, error = next(iter(result["failed"].items()))
        return BuildOutput(False, log, f"extension {name!r} failed to build:\n{first_errors(log) or error}")
    if result.get("import_error"):
        return BuildOutput(False, log, f"importing {variant.binding.entry} after the build failed: "
                                       f"{result['import_error']}")
    amd, notes = amd_analysis(variant, full, src, out, tc)
    return BuildOutput(True, "\n".join([log, *notes]),
                       analysis=_with_amd(analyse(log, out, result["built"], tc), amd, notes))


def amd_analysis(variant: Variant, specs: list[dict], src: Path, out: Path, tc: Toolchain) -> tuple[dict, list[str]]:
    """gfx942 rows of the CUDA extensions, and notes of what could not be analysed; nothing
    where the node has no HIP compiler or the variant's arches leave gfx942 out."""
    cuda = [s for s in specs if ExtensionSpec.from_dict(s).cuda]
    if not cuda or not tc.detail.get("gfx942_compiler") or not gfx942.wanted(variant.arches):
        return {}, []
    found = find_hip_toolchain()
    if not isinstance(found, HipToolchain):
        return {}, [f"{gfx942.ARCH} analysis: {found.reason}"]
    from torch.utils import cpp_extension

    # torch's own include folders (never CUDA's: the code is HIP now) and Python's, which
    # torch/extension.h includes
    python = sysconfig.get_paths().get("include")
    host = [*cpp_extension.include_paths(), *([python] if python else [])]
    launch = {"*": {k: int(v) for k, v in variant.launch.items() if k in ("block_threads", "dynamic_lds_bytes")}}
    return gfx942.analyse(cuda, repository_root(variant, src), out.parent / "torch-ext-gfx942", found, host, launch)


def _with_amd(analysis: dict, amd: dict, notes: list[str]) -> dict:
    """The NVIDIA rows (kernel name) and the gfx942 rows (`kernel@gfx942`) side by side; the
    vendor stays the NVIDIA build's where there is one."""
    if not amd and not notes:
        return analysis
    merged = {"vendor": analysis.get("vendor") or ("amd" if amd else ""),
              "kernels": {**(analysis.get("kernels") or {}), **amd}}
    return {**merged, **({"notes": notes} if notes else {})}


def analyse(log: str, out: Path, built: dict, tc: Toolchain) -> dict:
    """Per kernel of the CUDA extensions: ptxas's resources from the build log, the SASS
    histogram of the built library; a C++ extension has no device kernels to report."""
    if not tc.detail.get("cuda") or not any(e.get("cuda") for e in built.values()):
        return {}
    from workers.backends.cuda import analyse as cuda_analyse

    kernels: dict = {"vendor": "nvidia", "kernels": {}}
    for entry in built.values():
        try:
            found = cuda_analyse(log, out / entry["path"], tc, 0)
        except (OSError, subprocess.SubprocessError, ValueError):
            continue
        kernels["kernels"].update(found.get("kernels") or {})
    return kernels


def _project_root() -> str:
    return str(Path(__file__).resolve().parents[2])
