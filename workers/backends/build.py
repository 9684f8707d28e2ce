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


def toolchains(record: dict | None = None) -> dict[str, dict]:
    """What this node can build with: {backend: {"ident", "compiler", "version"}} or a reason.

    The back ends are asked at once, each in a thread of its own: most of a probe is waiting on
    `--version` subprocesses and on imports (torch, triton), and asked one after the other they
    added up. `record`, when given, receives {backend: [start, end]} in seconds from the probe's
    start (what ran beside what)."""
    import sysconfig
    from concurrent.futures import ThreadPoolExecutor

    # sysconfig fills its table lazily and not thread-safely (Python 3.11): a thread importing
    # triton (whose knobs read `EXE` at import) could see the table half-filled, get None and
    # report "no triton toolchain" one probe in a dozen. Filled here, before any thread starts.
    sysconfig.get_config_vars()
    began = time.perf_counter()

    def ask(backend):
        start = time.perf_counter() - began
        try:
            tc = backend.toolchain()
        except Exception as exc:  # a broken toolchain is a finding, not a crash of the probe
            tc, reason = None, f"{type(exc).__name__}: {exc}"
        else:
            reason = "not found"
        found = ({"ident": tc.ident, "compiler": tc.compiler, "version": tc.version, **tc.detail}
                 if tc else {"ident": None, "reason": reason})
        return found, [round(start, 4), round(time.perf_counter() - began, 4)]

    with ThreadPoolExecutor(max_workers=len(BACKENDS), thread_name_prefix="flopwatch-toolchain") as pool:
        asked = {name: pool.submit(ask, backend) for name, backend in BACKENDS.items()}
        answers = {name: future.result() for name, future in asked.items()}
    if record is not None:
        record.update({name: span for name, (_, span) in answers.items()})
    return {name: found for name, (found, _) in answers.items()}


TOOLCHAIN_CACHE_ENV = "FLOPWATCH_TOOLCHAIN_CACHE"  # a folder; "0": no cache, every probe asks the tools


def toolchain_cache_dir(env: dict | None = None) -> Path | None:
    """Where probed toolchains are kept between commands: $FLOPWATCH_TOOLCHAIN_CACHE, else
    $XDG_CACHE_HOME/flopwatch/toolchains, else ~/.cache/flopwatch/toolchains; None when the
    variable is "0"."""
    env = os.environ if env is None else env
    given = env.get(TOOLCHAIN_CACHE_ENV)
    if given == "0":
        return None
    if given:
        return Path(given)
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "flopwatch" / "toolchains"


_WORKERS = Path(__file__).resolve().parents[1]


def _source_digest() -> str:
    """The node code that makes a toolchain's ident (every back end and tool finder)."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted(_WORKERS.rglob("*.py")):
        h.update(str(path.relative_to(_WORKERS)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _tool_paths(found: dict[str, dict]) -> list[str]:
    """The files a probe's answer names (compilers, nvcc, ncu, cuobjdump...): an entry of the
    cache holds only while each of them is unchanged."""
    paths = set()
    for tc in found.values():
        for value in tc.values():
            if isinstance(value, str) and value.startswith("/") and os.path.isfile(value):
                paths.add(os.path.realpath(value))
    return sorted(paths)


def _stat_mark(path: str) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def cached_toolchains(env: dict | None = None, cache: Path | None = None) -> tuple[dict[str, dict], dict]:
    """`toolchains()`, answered from the disk when nothing it depends on changed: the entry's
    key is the toolchain fingerprint (the tools on PATH by path, size and time; the compiling
    packages' versions; the variables that choose a toolkit), the Python interpreter and
    flopwatch's node code, and the entry holds only while every file its answer names still has
    the size and time it had when probed. Returns (toolchains, what happened: {"source":
    "cache" or "probed", "key", "seconds", and for a probe "backends": {name: [start, end]}})."""
    import hashlib
    import json
    import sys

    env = os.environ if env is None else env
    began = time.perf_counter()
    folder = cache if cache is not None else toolchain_cache_dir(env)
    choosers = [f"{name}={env.get(name, '')}" for name in ("CXX", "CUDA_PATH", "HIP_PATH", "HIP_PLATFORM")]
    key = hashlib.sha256("\n".join([toolchain_fingerprint(env), sys.executable, _source_digest(), *choosers])
                         .encode()).hexdigest()[:20]
    entry = folder / f"{key}.json" if folder is not None else None
    if entry is not None:
        try:
            kept = json.loads(entry.read_text())
            if all(_stat_mark(path) == mark for path, mark in kept["files"].items()):
                return kept["toolchains"], {"source": "cache", "key": key,
                                            "seconds": round(time.perf_counter() - began, 4)}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    spans: dict = {}
    found = toolchains(spans)
    if entry is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = entry.with_name(f".{entry.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"toolchains": found, "files": {p: _stat_mark(p) for p in _tool_paths(found)}}))
            os.replace(tmp, entry)
        except OSError:
            pass  # an unwritable cache only costs the next command a probe
    return found, {"source": "probed", "key": key, "seconds": round(time.perf_counter() - began, 4),
                   "backends": spans}


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
