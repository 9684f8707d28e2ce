"""Compile a variant's Triton kernel ahead of time for explicit targets, in a child process.

Run as `python -m workers.triton_aot.compile REQUEST.json RESULT.json` by the `triton` back
end: importing the variant's file runs its code, and Triton's compiler can abort the process,
so neither happens inside the build worker. The request names the file, the kernel, the
manifest's `[triton]` table, the arches and dtypes and an output folder; the result lists
every compilation with the files it wrote (PTX and cubin, or the AMD code object) or its error.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from workers.bindings.python_entry import import_file
from workers.triton_aot.spec import SpecError, compile_jobs, constexpr_names, describe_kernel, parse_arch


def _import(path: Path):
    return import_file(path, f"flopwatch_triton_{path.stem}")


def compile_all(request: dict) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    module = _import(Path(request["file"]))
    name = request["kernel"]
    if not hasattr(module, name):
        raise SpecError(f"triton.kernel: {request['file']} defines no {name!r}")
    fn, configs = describe_kernel(getattr(module, name))
    jobs = compile_jobs(request["table"], name, list(fn.arg_names), constexpr_names(fn), configs,
                        request["arches"], request["dtypes"])
    out = Path(request["out"])
    out.mkdir(parents=True, exist_ok=True)
    done = []
    for i, job in enumerate(jobs):
        t = parse_arch(job.arch)
        entry = {**job.to_dict(), "files": {}}
        try:
            src = ASTSource(fn, job.signature, job.constexprs, {(k,): v for k, v in job.attrs.items()})
            kernel = triton.compile(src, target=GPUTarget(t.backend, t.arch, t.warp_size), options=job.options)
        except Exception as exc:  # the variant's fault: recorded per compilation, the others go on
            entry["error"] = _compile_error(exc)
            done.append(entry)
            continue
        for ext in ("ptx", "cubin", "hsaco", "amdgcn"):
            if ext in kernel.asm:
                data = kernel.asm[ext]
                path = out / f"{i}.{ext}"
                path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data)
                entry["files"][ext] = path.name
        if t.backend == "cuda":
            entry["ptxas"] = _ptxas_for(t.arch)
        meta = kernel.metadata
        entry.update(name=meta.name, shared=int(getattr(meta, "shared", 0) or 0),
                     num_warps=int(getattr(meta, "num_warps", 0) or 0), target_arch=str(getattr(meta, "arch", "")))
        done.append(entry)
    return {"triton": triton.__version__, "compiled": done}


def _ptxas_for(capability: int) -> str | None:
    """The ptxas Triton itself used for this arch: releases differ (3.9 assembles sm_90 with
    the wheel's `ptxas-blackwell`, whose PTX version the older `ptxas` rejects)."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        return get_ptxas(capability).path
    except Exception:  # an older or newer layout: the back end falls back to the wheel's ptxas
        return None


def _compile_error(exc: Exception) -> str:
    """Triton's CompilationError carries the source line and a caret; keep it whole but short."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text[-3000:]


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text())
    try:
        result = compile_all(request)
    except SpecError as exc:
        result = {"error": str(exc)}
    except Exception as exc:
        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
    tmp = Path(argv[2]).with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
