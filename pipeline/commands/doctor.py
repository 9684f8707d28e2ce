"""flopwatch doctor: what this machine offers flopwatch, and how to get what is missing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from rich.console import Console
from rich.table import Table

from workers import device
from workers.build import toolchains

HELP = "report compilers, devices, profilers and Ray on this machine"

_HINTS = {
    "cpp": "install a C++ compiler (apt-get install g++)",
    "python": "pip install torch",
    "cuda": "install the CUDA toolkit (nvcc) or set CUDA_HOME",
    "hip": "on a ROCm node put hipcc on PATH (ROCM_PATH); elsewhere run tools/install-hip-cross.sh",
    "ncu": "Nsight Compute ships with the CUDA toolkit (ncu on PATH)",
    "rocprofv3": "ships with ROCm 6.2+ (/opt/rocm/bin)",
    "cuobjdump": "pip install nvidia-cuda-cuobjdump (or the CUDA toolkit)",
    "triton": "pip install triton (its wheel ships ptxas; gfx942 analysis also needs llvm-readelf-19)",
}


def _version(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    return lines[-1].strip() if lines else "found"


def gather() -> list[dict]:
    rows = []
    for backend, tc in toolchains().items():
        found = bool(tc.get("ident"))
        rows.append({"what": f"build: {backend}", "found": found,
                     "detail": tc.get("version") or tc.get("reason", ""), "hint": "" if found else _HINTS.get(backend, "")})
    rows.append(_hip_pybind11_row())
    for kind in device.kinds_here():
        info = device.info(kind)
        rows.append({"what": f"device: {kind}", "found": True,
                     "detail": f"{info.name} {info.arch} {info.runtime}".strip(), "hint": ""})
    if device.gpu_kind() is None:
        rows.append({"what": "device: gpu", "found": False, "detail": "torch sees no CUDA/ROCm GPU",
                     "hint": "GPU nodes install torch built for CUDA or ROCm (README)"})
    from workers.cuda.toolchain import find_cuobjdump, find_ncu

    # The same lookups the build and profile stages use (CUDA_HOME, the pip wheels' bin folders).
    for tool, path in (("ncu", find_ncu()), ("rocprofv3", shutil.which("rocprofv3")), ("cuobjdump", find_cuobjdump())):
        found = _version([path, "--version"]) if path else None
        rows.append({"what": f"profiler: {tool}", "found": bool(found), "detail": found or "not found",
                     "hint": "" if found else _HINTS[tool]})
    import ray

    rows.append({"what": "ray", "found": True, "detail": ray.__version__, "hint": ""})
    return rows + _local_ray_rows()


def _local_ray_rows() -> list[dict]:
    """flopwatch's kept local Ray heads of this user (pipeline/local_ray.py): where, in use or idle."""
    from pipeline import local_ray
    from pipeline.ray_access import ClusterError

    what = "ray: flopwatch's local Ray"
    try:
        found = local_ray.heads()
    except ClusterError as exc:
        return [{"what": what, "found": False, "detail": str(exc), "hint": ""}]
    if not found:
        return [{"what": what, "found": True, "detail": "none running; the next command without an address starts one",
                 "hint": ""}]
    return [{"what": what, "found": True,
             "detail": f"{record.address} (pid {record.pid}), {'in use' if local_ray.attached(folder) else 'idle'}, "
                       f"stops after {record.idle_s:g} s idle",
             "hint": f"to stop it now: kill {record.pid}"} for folder, record in found]


def _hip_pybind11_row() -> dict:
    """HipKittens-style `tk_kernel` modules: what this node can build of them."""
    from workers.rocm import pybind_build
    from workers.rocm.toolchain import HipToolchain, find_hip_toolchain

    tc = find_hip_toolchain()
    found, detail, hint = pybind_build.capability(tc if isinstance(tc, HipToolchain) else None,
                                                  pybind_build.host_build_info())
    return {"what": "build: hip pybind11", "found": found, "detail": detail, "hint": hint}


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true")


def main(args) -> int:
    rows = gather()
    if args.json:
        print(json.dumps(rows))
        return 0
    table = Table(title="flopwatch doctor")
    for col in ("what", "found", "detail", "how to get it"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["what"], "yes" if r["found"] else "[yellow]no[/yellow]", r["detail"], r["hint"])
    Console(width=None if sys.stdout.isatty() else 120).print(table)
    print("Next: `flopwatch selftest` builds, checks, times and profiles the smallest kernel through "
          "every path found above, and says what to check for each one that fails.")
    return 0
