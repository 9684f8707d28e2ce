"""Build HIP sources for AMD GPUs and analyse what came out.

``build_hip`` runs the compiler (the only subprocess edge besides the analysis tools) and
returns a plain record: success, the compiler log and its first error lines, the artifacts,
and per kernel the merged static analysis (compiler remarks, code-object notes, disassembly
histogram, recomputed occupancy). For a shared library, the device code is analysed from a
second, code-object-only compile of the same sources and flags: simpler and more robust than
unbundling the fat binary embedded in the library, and it costs about a second.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import codeobject, disasm, occupancy, remarks
from .toolchain import (
    HipToolchain,
    ToolchainMissing,
    code_object_path,
    find_hip_toolchain,
    hip_compile_command,
)

MAX_FIRST_ERRORS = 10


@dataclass(frozen=True)
class HipBuild:
    """Outcome of one build; every field is JSON-serialisable."""

    ok: bool
    mode: str
    log: str
    first_errors: list[str]
    artifacts: list[str]
    code_objects: dict[str, str] = field(default_factory=dict)  # arch -> .hsaco
    kernels: dict[str, dict] = field(default_factory=dict)  # arch -> {mangled name: analysis}
    toolchain: dict | None = None


def first_error_lines(log: str, limit: int = MAX_FIRST_ERRORS) -> list[str]:
    """The compiler's first ``error:`` lines (pure)."""
    return [line for line in log.splitlines() if "error:" in line][:limit]


def _run(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> tuple[int, str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **env}, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def analyse_kernels(remark_text: str, notes_text: str | None, disasm_text: str | None,
                    launch: Mapping[str, Mapping[str, int]] | None = None,
                    demangle=None) -> dict[str, dict]:
    """Merge the three static views of one arch's code into one dict per kernel (pure unless
    ``demangle`` runs a tool). Keys are mangled names; ``launch`` maps a mangled or demangled
    name, or "*", to ``{"block_threads": n, "dynamic_lds_bytes": b}``."""
    launch = launch or {}
    found = remarks.parse_remarks(remark_text, demangle)
    # remarks print the kernels of one compile in the order of the notes; unnamed remarks
    # (hipcc) are matched by position
    notes = codeobject.parse_notes(notes_text)[1] if notes_text else []
    hist = {h.name: h for h in disasm.parse_disassembly(disasm_text)} if disasm_text else {}
    out: dict[str, dict] = {}
    for index, note in enumerate(notes):
        rem = next((r for r in found if r.mangled == note.name), None)
        if rem is None and index < len(found) and found[index].mangled is None:
            rem = found[index]
        entry: dict = {"name": rem.name if rem and rem.name else note.name,
                       "remarks": dataclasses.asdict(rem) if rem else None,
                       "code_object": dataclasses.asdict(note)}
        h = hist.get(note.name)
        if h is not None:
            entry["disassembly"] = {**dataclasses.asdict(h), "mfma_total": h.mfma_total}
        cfg = launch.get(note.name) or launch.get(entry["name"]) or launch.get("*") or {}
        threads = cfg.get("block_threads") or note.max_flat_workgroup_size or 256
        occ = occupancy.occupancy_gfx942(
            arch_vgprs=rem.vgprs if rem and rem.vgprs is not None else note.vgpr_count or 0,
            agprs=(rem.agprs or 0) if rem else note.agpr_count or 0,
            sgprs=note.sgpr_count or (rem.sgprs if rem else 0) or 0,
            block_threads=threads,
            static_lds_bytes=note.group_segment_fixed_size or 0,
            dynamic_lds_bytes=cfg.get("dynamic_lds_bytes", 0),
            unified_vgpr_count=note.vgpr_count)
        entry["occupancy"] = {**dataclasses.asdict(occ), "block_threads": threads,
                              "dynamic_lds_bytes": cfg.get("dynamic_lds_bytes", 0)}
        out[note.name] = entry
    return out


def build_hip(sources: Sequence[str], include_dirs: Sequence[str], flags: Sequence[str],
              arches: Sequence[str], workdir: str, mode: str,
              launch: Mapping[str, Mapping[str, int]] | None = None,
              toolchain: HipToolchain | None = None, output_name: str = "kernel") -> HipBuild:
    """Compile ``sources`` for ``arches`` into ``workdir`` and analyse every kernel."""
    found = toolchain or find_hip_toolchain()
    if isinstance(found, ToolchainMissing):
        return HipBuild(False, mode, found.reason, [found.reason], [])
    tc = found
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    sources = [str(Path(s).resolve()) for s in sources]
    include_dirs = [str(Path(d).resolve()) for d in include_dirs]
    logs: list[str] = []
    artifacts: list[str] = []
    if mode == "shared-library":
        lib = str(work / f"lib{output_name}.so")
        (cmd,) = hip_compile_command(tc, sources, include_dirs, flags, arches, lib, mode)
        rc, log = _run(cmd.argv, cmd.env, work)
        logs.append(log)
        if rc != 0:
            return HipBuild(False, mode, log, first_error_lines(log), [],
                            toolchain=dataclasses.asdict(tc))
        artifacts.append(lib)
    # The device code to analyse: the artifact itself in code-object mode, a code-object
    # rebuild of the same sources for a shared library.
    co_template = str(work / f"{output_name}.hsaco")
    code_objects: dict[str, str] = {}
    remark_logs: dict[str, str] = {}
    for arch, cmd in zip(arches, hip_compile_command(tc, sources, include_dirs, flags, arches,
                                                     co_template, "code-object")):
        rc, log = _run(cmd.argv, cmd.env, work)
        if mode == "code-object":
            logs.append(log)
        if rc != 0:
            text = "\n".join(logs + ([log] if mode != "code-object" else []))
            return HipBuild(False, mode, text, first_error_lines(text), artifacts,
                            toolchain=dataclasses.asdict(tc))
        code_objects[arch] = code_object_path(co_template, arch)
        remark_logs[arch] = log
    if mode == "code-object":
        artifacts += list(code_objects.values())
    kernels = _analyse_all(tc, code_objects, remark_logs, launch)
    return HipBuild(True, mode, "\n".join(logs), [], artifacts, code_objects, kernels,
                    dataclasses.asdict(tc))


def _analyse_all(tc: HipToolchain, code_objects: Mapping[str, str],
                 remark_logs: Mapping[str, str],
                 launch: Mapping[str, Mapping[str, int]] | None) -> dict[str, dict]:
    rocm = tc.rocm_path if tc.kind == "rocm" else None
    readelf, objdump = codeobject.find_readelf(rocm), disasm.find_objdump(rocm)
    demangler = remarks.find_demangler()
    demangle = (lambda names: remarks.demangle_names(names, demangler)) if demangler else None
    result: dict[str, dict] = {}
    for arch, path in code_objects.items():
        notes = codeobject.read_notes(path, readelf) if readelf else None
        text = disasm.disassemble(path, objdump, arch) if objdump else None
        result[arch] = analyse_kernels(remark_logs[arch], notes, text, launch, demangle)
    return result
