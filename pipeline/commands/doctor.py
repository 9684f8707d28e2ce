"""flopwatch doctor: what this machine offers flopwatch, and how to get what is missing; with
`--github OWNER/REPO`, whether the repository's GitHub settings are what docs/ci.md requires
(`pipeline.ci.repo_settings`), one line each, exit 1 when one is not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from rich.console import Console
from rich.table import Table

from pipeline.commands.common import UsageError, add_store_options, store_location
from pipeline.project.checkout import CheckoutError
from pipeline.store import LocationError, checks
from workers.backends.build import toolchains
from workers.measure import device

HELP = ("report the results store, compilers, devices, profilers and Ray on this machine; with --github, "
        "the repository's GitHub settings that docs/ci.md requires")

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


def gather(args=None) -> list[dict]:
    rows = [store_row(args)] if args is not None else []
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
    """flopwatch's kept local Ray heads of this user (pipeline/fleet/local_ray.py): where, in use or idle."""
    from pipeline.fleet import local_ray
    from pipeline.fleet.ray_access import ClusterError

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


def store_row(args) -> dict:
    """The results store: where, which schema, how many results, whether it is healthy.
    Only reads (`checks.inspect`): doctor never creates, migrates or repairs a store."""
    try:
        where = store_location(args)
    except (CheckoutError, LocationError) as exc:
        return {"what": "store", "found": False, "detail": str(exc),
                "hint": "run inside the benchmarked repository, or give --store / set FLOPWATCH_STORE"}
    state = checks.inspect(where, count=True)
    if state.problem is not None:
        return {"what": "store", "found": False, "detail": f"{state.problem.where}: {state.problem.problem}",
                "hint": state.problem.recovery}
    if state.schema_version is None:
        return {"what": "store", "found": True, "detail": f"{state.shown}: no store yet (the first run creates it)",
                "hint": ""}
    size = f", {state.size_bytes / 1e6:.1f} MB" if state.size_bytes is not None else ""
    migrate = (f"; schema {state.schema_version} is migrated to {checks.SCHEMA_VERSION} (after a backup) "
               f"when flopwatch next opens it" if state.needs_migration else "")
    return {"what": "store", "found": True,
            "detail": f"{state.shown} ({state.dialect}, schema {state.schema_version}, {state.results} results"
                      f"{size}, integrity {state.integrity}){migrate}", "hint": ""}


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
    add_store_options(p)
    p.add_argument("--github", metavar="OWNER/REPO",
                   help="check this repository's GitHub settings (docs/ci.md) instead of this machine")
    p.add_argument("--token-env", metavar="NAME", default="GITHUB_TOKEN",
                   help="environment variable holding the GitHub token (default: GITHUB_TOKEN; never a command-line "
                        "value, which every process of the machine can read)")
    p.add_argument("--api-url", metavar="URL",
                   help="GitHub REST API base URL (default: $GITHUB_API_URL, else https://api.github.com; GitHub "
                        "Enterprise Server: https://HOST/api/v3)")


def github_main(args) -> int:
    """One line per setting docs/ci.md requires: `ok` or `WRONG`, what was found, and the fix."""
    import os

    from pipeline.ci import github, repo_settings

    token = os.environ.get(args.token_env, "")
    if not token:
        raise UsageError(f"--github needs a token in ${args.token_env} (a token that may read the repository's "
                         f"administration settings and, for runner groups, the organization's)")
    url = (args.api_url or os.environ.get("GITHUB_API_URL") or github.DEFAULT_API_URL).rstrip("/")
    api = github.Api(token=token, url=url, retries=2, max_wait_s=30.0)
    try:
        checks = repo_settings.check_repository(api, args.github)
    except repo_settings.SettingsError as exc:
        raise UsageError(str(exc)) from None
    except github.GitHubError as exc:
        raise UsageError(f"GitHub API: {exc}") from None
    if args.json:
        print(json.dumps([c.__dict__ for c in checks]))
    else:
        for c in checks:
            print(f"{'ok   ' if c.ok else 'WRONG'} {c.what}: {c.detail}" + ("" if c.ok else f" — fix: {c.fix}"))
    return 0 if all(c.ok for c in checks) else 1


def main(args) -> int:
    if args.github:
        return github_main(args)
    rows = gather(args)
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
