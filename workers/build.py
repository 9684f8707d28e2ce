"""Build stage, node side: unpack shipped sources, run the back end, pack the artifact.

Nothing assumes a shared filesystem: sources arrive as a {relative path: bytes} bundle and
the artifact leaves the same way, so the driver can cache it and ship it to any run node.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from workers import include_dirs as node_include_dirs
from workers.backends import BACKENDS
from workers.backends.base import BuildOutput
from workers.bundle import pack, unpack
from workers.records import BuildResult, Variant


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
                  include_dirs: list[str] = ()) -> tuple[BuildResult, dict[str, bytes]]:
    """Build one variant from its shipped bundle (the variant folder plus the project's shared
    include folders, repository-relative); returns the record and the artifact files."""
    start = time.perf_counter()
    backend = BACKENDS.get(variant.backend)
    tc = backend.toolchain() if backend else None
    if tc is None:
        msg = f"no {variant.backend} toolchain on this node (see `flopwatch doctor`)"
        return BuildResult(variant.name, build_hash, False, "", msg, msg), {}
    with tempfile.TemporaryDirectory(prefix="flopwatch-build-") as tmp:
        root, out = Path(tmp) / "src", Path(tmp) / "out"
        unpack(bundle, root)
        out.mkdir()
        src = root / variant.folder
        node = node_include_dirs.expand(variant.include_dirs, tc.detail.get("include_vars") or {}, os.environ)
        if node.problem:
            # The node lacks a checkout the variant needs: not the variant's fault, so its
            # jobs are skipped with the variable named, not reported as a compile error.
            result = BuildOutput(False, node.problem, skip_reason=node.problem)
        else:
            includes = [root / d for d in include_dirs] + [Path(d) for d in node.folders]
            result = backend.build(variant, src, out, tc, includes)
        artifact = pack(out) if result.ok else {}
    # Compiler output names the temporary folder; show repository-relative paths instead.
    log = result.log.replace(str(root) + "/", "")
    errors = result.first_errors.replace(str(root) + "/", "")
    return BuildResult(
        variant=variant.name, build_hash=build_hash, ok=result.ok, toolchain=tc.ident,
        log=log[-20000:], first_errors=errors, analysis=result.analysis,
        seconds=round(time.perf_counter() - start, 3), skip_reason=result.skip_reason,
    ), artifact

