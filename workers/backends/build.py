"""Build stage, node side: unpack shipped sources, run the back end, pack the artifact.

Nothing assumes a shared filesystem: sources arrive as a {relative path: bytes} bundle and
the artifact leaves the same way, so the driver can cache it and ship it to any run node.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from workers.backends import BACKENDS
from workers.backends.base import BuildOutput
from workers.core.records import BuildResult, Variant
from workers.isolation import containment
from workers.toolkit import include_dirs as node_include_dirs
from workers.toolkit.bundle import pack, unpack


def toolchains() -> dict[str, dict]:
    """What this node can build with: {backend: {"ident", "compiler", "version"}} or a reason."""
    found = {}
    for name, backend in BACKENDS.items():
        try:
            tc = backend.toolchain()
        except Exception as exc:  # a broken toolchain is a finding, not a crash of the probe
            tc, reason = None, f"{type(exc).__name__}: {exc}"
        else:
            reason = "not found"
        found[name] = ({"ident": tc.ident, "compiler": tc.compiler, "version": tc.version, **tc.detail}
                       if tc else {"ident": None, "reason": reason})
    return found


# What a toolchain probe depends on: the compilers found on PATH and the Python packages that
# compile (torch for extensions, triton). A change to any of them changes the fingerprint.
_TOOL_BINARIES = ("c++", "g++", "nvcc", "clang++-19", "hipcc", "amdclang++", "llvm-readelf-19", "cuobjdump", "ncu")
_TOOL_PACKAGES = ("torch", "triton", "pybind11")


def toolchain_fingerprint(env: dict | None = None) -> str:
    """A cheap stand-in for `toolchains()`: what the probe would find changes only when this
    does (binaries' paths, sizes and times; package versions). Lets a long-lived slot keep its
    probe between commands and probe again after an upgrade."""
    import hashlib
    import importlib.metadata
    import shutil

    env = os.environ if env is None else env
    parts = [env.get("PATH", ""), env.get("ROCM_PATH", ""), env.get("CUDA_HOME", ""), env.get("FLOPWATCH_HIP_DEVLIB", "")]
    for name in _TOOL_BINARIES:
        path = shutil.which(name, path=env.get("PATH"))
        if path:
            st = os.stat(path)
            parts.append(f"{name}={os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}")
    for pkg in _TOOL_PACKAGES:
        try:
            parts.append(f"{pkg}=={importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{pkg} absent")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def build_variant(variant: Variant, bundle: dict[str, bytes], build_hash: str,
                  include_dirs: list[str] = (), timeout_s: float | None = None) -> tuple[BuildResult, dict[str, bytes]]:
    """Build one variant from its shipped bundle (the variant folder plus the project's shared
    include folders, repository-relative); returns the record and the artifact files.

    Every process the build starts is ended with it, daemons included (`workers.isolation.containment`),
    and counted in `left_behind`. Past `timeout_s` the build's processes are killed and the
    build fails with the limit named."""
    start = time.perf_counter()
    backend = BACKENDS.get(variant.backend)
    with containment.Scope() as scope:
        tc = backend.toolchain() if backend else None  # it runs the compiler too (`--version`)
        if tc is None:
            msg = f"no {variant.backend} toolchain on this node (see `flopwatch doctor`)"
            return BuildResult(variant.name, build_hash, False, "", msg, msg), {}
        watchdog = _Watchdog(scope, timeout_s)
        try:
            with tempfile.TemporaryDirectory(prefix="flopwatch-build-") as tmp:
                root, out = Path(tmp) / "src", Path(tmp) / "out"
                result = _build_in(variant, bundle, include_dirs, backend, tc, root, out)
                if watchdog.expired.is_set():
                    limit = f"the build took longer than its {timeout_s:g} s limit (build_timeout_s in pipeline/project/config.py)"
                    result = BuildOutput(False, f"{result.log}\n{limit}", limit)
                artifact = pack(out) if result.ok else {}
        finally:
            watchdog.stop()
            left = scope.end()
    # Compiler output names the temporary folder; show repository-relative paths instead.
    log = result.log.replace(str(root) + "/", "")
    errors = result.first_errors.replace(str(root) + "/", "")
    if left:
        log += f"\n{containment.note(left)}"
        errors = f"{errors}\n{containment.note(left)}" if not result.ok else errors
    return BuildResult(
        variant=variant.name, build_hash=build_hash, ok=result.ok, toolchain=tc.ident,
        log=log[-20000:], first_errors=errors, analysis=result.analysis,
        seconds=round(time.perf_counter() - start, 3), skip_reason=result.skip_reason, left_behind=left,
    ), artifact


def _build_in(variant: Variant, bundle: dict[str, bytes], include_dirs, backend, tc, root: Path, out: Path) -> BuildOutput:
    unpack(bundle, root)
    out.mkdir()
    src = root / variant.folder
    node = node_include_dirs.expand(variant.include_dirs, tc.detail.get("include_vars") or {}, os.environ)
    if node.problem:
        # The node lacks a checkout the variant needs: not the variant's fault, so its
        # jobs are skipped with the variable named, not reported as a compile error.
        return BuildOutput(False, node.problem, skip_reason=node.problem)
    includes = [root / d for d in include_dirs] + [Path(d) for d in node.folders]
    return backend.build(variant, src, out, tc, includes)


class _Watchdog:
    """Past the deadline, kill the build's processes (again every 0.2 s, for the steps that
    follow): a compiler killed fails its step, and the build reports the limit. Killing without
    reaping keeps `subprocess` from reading a killed compiler as a success."""

    def __init__(self, scope: containment.Scope, timeout_s: float | None):
        self.expired, self._done = threading.Event(), threading.Event()
        self._thread = None
        if timeout_s is not None:
            self._thread = threading.Thread(target=self._watch, args=(scope, timeout_s), daemon=True)
            self._thread.start()

    def _watch(self, scope: containment.Scope, timeout_s: float) -> None:
        if self._done.wait(timeout_s):
            return
        self.expired.set()
        while True:
            scope.kill()
            if self._done.wait(0.2):
                return

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
