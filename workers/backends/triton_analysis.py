"""Static analysis of Triton's compiled kernels through the parsers the `cuda` and `hip` back
ends use: ptxas resource use and a SASS histogram for NVIDIA, code-object notes, CDNA3
occupancy and the MFMA histogram for AMD."""

from __future__ import annotations

import shutil
from pathlib import Path

from workers.backends.base import Toolchain, run_compiler


def triton_tool(name: str) -> str | None:
    """A binary the Triton wheel ships (ptxas, cuobjdump, nvdisasm), else one on PATH."""
    try:
        import triton
    except ImportError:
        return shutil.which(name)
    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return str(path) if path.is_file() else shutil.which(name)


def ptxas_command(ptxas: str, ptx: str, arch: str, cubin: str) -> list[str]:
    """ptxas as Triton runs it (`-lineinfo -v --gpu-name=`); `-v` prints the resource use the
    `cuda` back end parses. Triton drops that log, so the build assembles the PTX once more."""
    gpu = arch if arch.endswith("a") or int(arch[3:]) < 90 else arch + "a"
    return [ptxas, "-lineinfo", "-v", f"--gpu-name={gpu}", ptx, "-o", cubin]


def nvidia_row(work: Path, compiled: dict, tools: dict) -> tuple[dict, str]:
    """(row, problem) for one compilation: registers, spills, shared memory (Triton allocates
    it dynamically: `metadata.shared`), and SASS counts from the cubin Triton produced."""
    from workers.backends import cuda

    files = compiled["files"]
    if "ptx" not in files or "cubin" not in files:
        return {}, "Triton produced no PTX/cubin"
    ptxas = compiled.get("ptxas") or tools.get("ptxas")
    if not ptxas:
        return {}, "no ptxas (the Triton wheel ships one under triton/backends/nvidia/bin)"
    code, log = run_compiler(ptxas_command(ptxas, files["ptx"], compiled["arch"], "resource.cubin"), cwd=work)
    if code != 0:
        return {}, f"ptxas -v failed on Triton's PTX: {log[-800:]}"
    tc = Toolchain("triton", "ptxas", "", {"cuobjdump": tools.get("cuobjdump"), "demangler": None})
    # Triton's shared memory is dynamic (`metadata.shared`): the static figure stays ptxas's
    kernels = cuda.analyse(log, work / files["cubin"], tc, int(compiled.get("shared") or 0))["kernels"]
    row = next(iter(kernels.values()), {})
    if not row:
        return {}, "ptxas reported no entry function"
    row = {"arch": compiled["arch"], **{k: v for k, v in row.items() if k != "arch"}}
    row["num_warps"] = compiled.get("num_warps")
    return row, ""


def amd_row(work: Path, compiled: dict) -> tuple[dict, str]:
    """(row, problem) for one compilation: the code object's notes and disassembly through
    `workers.rocm`, with occupancy for Triton's workgroup (num_warps wavefronts) and its LDS,
    which Triton allocates at launch (`metadata.shared`), so the code object declares none."""
    from workers.backends.hip import flatten
    from workers.rocm import codeobject, disasm
    from workers.rocm.build import analyse_kernels

    hsaco = compiled["files"].get("hsaco")
    if not hsaco:
        return {}, "Triton produced no code object"
    readelf, objdump = codeobject.find_readelf(), disasm.find_objdump()
    if not readelf:
        return {}, "no llvm-readelf (apt-get install llvm-19) to read the code object's notes"
    path = str(work / hsaco)
    notes = codeobject.read_notes(path, readelf)
    text = disasm.disassemble(path, objdump, compiled["arch"]) if objdump else None
    threads = int(compiled.get("num_warps") or 4) * 64
    launch = {"*": {"block_threads": threads, "dynamic_lds_bytes": int(compiled.get("shared") or 0)}}
    kernels = analyse_kernels("", notes, text, launch)
    rows = flatten({compiled["arch"]: kernels})["kernels"]
    row = next(iter(rows.values()), {})
    if not row:
        return {}, "the code object lists no kernel"
    row["num_warps"] = compiled.get("num_warps")
    return row, ""
