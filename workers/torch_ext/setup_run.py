"""The extensions a `setup.py` builds, found by running it where the static read
(`workers.torch_ext.spec`) gives up: a conditional extension class (`extension = CUDAExtension
if use_cuda else CppExtension`, as PyTorch's own extension-cpp tutorial writes it), sources
from a helper function, the environment.

The setup.py runs in a sandboxed child (`workers.isolation.sandbox.run_child`, the containment
of a build: it is the repository's code) as a GPU node's `pip install` would run it:
`sys.argv = ["setup.py", "build_ext"]`, cwd = its folder, `torch.cuda.is_available()` true,
CUDA_HOME set (a placeholder where this node has none) and FORCE_CUDA=1. `setuptools.setup`
(and distutils') only record their arguments, and torch's CUDAExtension / CppExtension record
what the file passes them (not what torch adds: the build's `load()` adds torch's own include
folders and libraries again), so nothing is compiled and nothing needs nvcc. The records are
turned into the same `ExtensionSpec` the static read makes (`specs_from_record`, pure).

`python -m workers.torch_ext.setup_run SETUP.py RESULT.json REPO_ROOT` is the child.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import posixpath
import sys
import tempfile
import traceback
from pathlib import Path

from workers.torch_ext.spec import ExtensionReadError, ExtensionSpec, find_extensions

# Importing torch takes seconds on a loaded CI machine; a setup.py that computes its list
# runs in well under a second after that.
SETUP_TIMEOUT_S = 120.0
_CLASSES = ("CUDAExtension", "CppExtension")
_CACHE: dict[str, list[ExtensionSpec]] = {}


class SetupRunError(ValueError):
    """Running the setup.py to record its extensions failed (an exception, a timeout)."""


def read_extensions(origin: str, text: str, repo_root: Path | None, files: frozenset[str] | set[str],
                    name: str | None = None, *, tree: ast.Module | None = None,
                    content: bytes | None = None) -> list[ExtensionSpec]:
    """The extensions of the file `origin` (repository-relative): read statically first (fast,
    nothing run); a setup.py the static read cannot read, or in which it sees no extension
    call, is then run (`record`). The static read's error stands for any other file, or where
    there is no checkout to run in (`repo_root` None). A caller that has read the file already
    hands its syntax `tree` and its bytes (`content`), so that it is neither parsed nor read
    again."""
    try:
        specs = find_extensions(origin, text, files, name=name, tree=tree)
        if specs or not _is_setup(origin, text):
            return specs
        static_error = None
    except ExtensionReadError as exc:
        if not _is_setup(origin, text) or repo_root is None:
            raise
        static_error = exc
    if repo_root is None:
        return []
    if static_error is not None and static_error.key == "syntax":
        raise static_error
    try:
        specs = record(repo_root, origin, files, content)
    except SetupRunError as exc:
        if static_error is None:
            raise
        # both ways failed: what the static read could not read, and what running it said
        e = static_error
        raise ExtensionReadError(e.path, e.line, e.key, f"{e.message}; {exc}") from None
    return [s for s in specs if name is None or name in (s.name, s.module)]


def _is_setup(origin: str, text: str) -> bool:
    """A setup script that builds torch extensions (only those are worth running)."""
    return posixpath.basename(origin) == "setup.py" and "cpp_extension" in text


def record(repo_root: Path, origin: str, files: frozenset[str] | set[str],
           content: bytes | None = None) -> list[ExtensionSpec]:
    """Run `origin` (a repository-relative setup.py) in a sandboxed child and return the
    extensions it passes to setup(); cached per content of the file (`content`: its bytes, read
    here when not given) and the repository's file list (what its globs see), since every
    manifest load would run it again."""
    setup_py = (repo_root / origin).resolve()
    key = hashlib.sha256((setup_py.read_bytes() if content is None else content) + "\n".join(sorted(files)).encode()
                         + str(repo_root.resolve()).encode()).hexdigest()
    if key not in _CACHE:
        _CACHE[key] = specs_from_record(_run(setup_py, repo_root), origin)
    return list(_CACHE[key])


def _run(setup_py: Path, repo_root: Path) -> dict:
    from workers.isolation.sandbox import run_child

    project = str(Path(__file__).resolve().parents[2])
    with tempfile.TemporaryDirectory(prefix="flopwatch-setup-") as work:
        work_dir = Path(work)
        env = {**os.environ, "PYTHONPATH": project + os.pathsep + os.environ.get("PYTHONPATH", ""),
               "FORCE_CUDA": "1", "CUDA_HOME": os.environ.get("CUDA_HOME") or _cuda_home(work_dir)}
        outcome = run_child([sys.executable, "-m", "workers.torch_ext.setup_run", str(setup_py), "result.json",
                             str(repo_root)],
                            SETUP_TIMEOUT_S, work_dir, env)
        result = work_dir / "result.json"
        if outcome.timed_out:
            raise SetupRunError(f"running it to record its extensions timed out after {SETUP_TIMEOUT_S:.0f} s")
        if not result.exists():
            last = _last_line(outcome.stderr_tail) or f"exited with {outcome.returncode or outcome.signal_name}"
            raise SetupRunError(f"running it to record its extensions failed: {last}")
        data = json.loads(result.read_text())
    if data.get("error"):
        raise SetupRunError(f"running it to record its extensions failed: {data['error']}")
    return data


def _cuda_home(work: Path) -> str:
    """Where the node has no CUDA toolkit: a folder that stands for one, so the file's
    `CUDA_HOME is not None` test is as a GPU node's (the list is wanted here, not a build)."""
    for known in ("/usr/local/cuda", "/opt/cuda"):
        if Path(known, "bin", "nvcc").exists():
            return known
    (work / "cuda" / "bin").mkdir(parents=True, exist_ok=True)
    return str(work / "cuda")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


# --- records → specs (pure) -----------------------------------------------------------------------


def specs_from_record(data: dict, origin: str) -> list[ExtensionSpec]:
    """The ExtensionSpecs of a recorded run (`data`: {"extensions": [...], "package_dir": {...}})
    of the setup.py at repository-relative `origin`: paths relative to its folder become
    repository-relative; the flags are made as the static read makes them."""
    folder = posixpath.dirname(origin)
    out = []
    for ext in data.get("extensions") or ():
        notes = [f"read by running {origin} with the GPU condition true (as pip install on a GPU node)"]
        module = ext["name"]
        macros = [f"-D{n}" if v is None else f"-D{n}={v}" for n, v in ext.get("define_macros") or ()]
        macros += [f"-U{n}" for n in ext.get("undef_macros") or ()]
        args = ext.get("extra_compile_args") or []
        cxx, nvcc = (list(args.get("cxx") or ()), list(args.get("nvcc") or ())) if isinstance(args, dict) \
            else (list(args), [])
        ldflags = [f"-L{d}" for d in (_inside(folder, p) for p in ext.get("library_dirs") or ()) if d is not None]
        ldflags += [f"-l{lib}" for lib in ext.get("libraries") or ()] + list(ext.get("extra_link_args") or ())
        sources = []
        for src in ext.get("sources") or ():
            rel = _inside(folder, src)
            if rel is None:
                raise SetupRunError(f"extension {module}: source {src} lies outside the repository")
            sources.append(rel)
        includes = [d for d in (_inside(folder, p) for p in ext.get("include_dirs") or ()) if d is not None]
        dropped = len(ext.get("include_dirs") or ()) - len(includes)
        if dropped:
            notes.append(f"{dropped} include folder(s) outside the repository dropped")
        out.append(ExtensionSpec(
            name=module.rsplit(".", 1)[-1], module=module, kind="setup", origin=f"{origin}:{ext.get('line', 1)}",
            sources=tuple(sources), extra_cflags=tuple(macros + cxx), extra_cuda_cflags=tuple(macros + nvcc),
            extra_ldflags=tuple(ldflags), include_dirs=tuple(d or "." for d in includes),
            with_cuda=True if ext.get("class") == "CUDAExtension" else None,
            is_python_module=True, package_dir=_package_dir(module, data.get("package_dir") or {}, folder),
            notes=tuple(notes)))
    return out


def _inside(folder: str, path: str) -> str | None:
    """`path` (absolute, or relative to the setup.py's folder, as its authors run it) as a
    repository-relative path, or None outside the repository (the child reports absolute
    paths relative to the repository as `@/...`)."""
    if path.startswith("@/"):
        norm = posixpath.normpath(path[2:] or ".")
    elif path.startswith("/"):
        return None
    else:
        norm = posixpath.normpath(posixpath.join(folder, path))
    if norm == "..":
        return None
    return None if norm.startswith("../") else ("" if norm == "." else norm)


def _package_dir(module: str, mapping: dict, folder: str) -> str:
    """The folder the dotted module's top package lies under (setup(package_dir=...), else the
    setup.py's folder), repository-relative."""
    top = module.split(".")[0]
    where = None
    if top in mapping and posixpath.basename(posixpath.normpath(mapping[top])) == top:
        where = posixpath.dirname(posixpath.normpath(mapping[top]))
    elif "" in mapping:
        where = mapping[""]
    inside = _inside(folder, where) if where is not None else None
    return folder if inside is None else inside


# --- the child ----------------------------------------------------------------------------------------


def _child(setup_py: Path, result: Path, repo_top: Path) -> int:
    records: list[dict] = []
    state: dict = {"package_dir": {}, "setup_called": False}

    def rel(path) -> str:
        p = Path(os.fspath(path))
        if not p.is_absolute():
            return p.as_posix()
        try:
            return "@/" + p.resolve().relative_to(repo_top).as_posix()
        except ValueError:
            return p.as_posix()

    def extension_class(cls_name: str):
        def make(name, sources, *args, **kwargs):
            from types import SimpleNamespace

            frame = sys._getframe(1)  # the line of the setup.py that made it (through its helpers)
            while frame is not None and Path(frame.f_code.co_filename).resolve() != setup_py:
                frame = frame.f_back
            line = frame.f_lineno if frame is not None else 1
            positional = ("include_dirs", "define_macros", "undef_macros", "library_dirs", "libraries")
            kwargs.update(zip(positional, args))
            return SimpleNamespace(name=name, sources=list(sources), _flopwatch_class=cls_name,
                                   _flopwatch_line=line, **kwargs)
        make.__name__ = cls_name
        return make

    def setup(*args, **kwargs):
        state["setup_called"] = True
        state["package_dir"] = dict(kwargs.get("package_dir") or {})
        for ext in kwargs.get("ext_modules") or ():
            cls = getattr(ext, "_flopwatch_class", None)
            if cls is None:
                continue  # a plain setuptools Extension: not a torch extension
            args = getattr(ext, "extra_compile_args", None)
            records.append({
                "name": ext.name, "class": cls, "line": ext._flopwatch_line,
                "sources": [rel(s) for s in ext.sources],
                "include_dirs": [rel(d) for d in getattr(ext, "include_dirs", None) or ()],
                "library_dirs": [rel(d) for d in getattr(ext, "library_dirs", None) or ()],
                "libraries": list(getattr(ext, "libraries", None) or ()),
                "define_macros": [list(m) for m in getattr(ext, "define_macros", None) or ()],
                "undef_macros": list(getattr(ext, "undef_macros", None) or ()),
                "extra_compile_args": dict(args) if isinstance(args, dict) else list(args or ()),
                "extra_link_args": list(getattr(ext, "extra_link_args", None) or ())})

    import torch
    import torch.utils.cpp_extension as cpp_extension

    # The GPU condition as a GPU node's `pip install` sees it.
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: max(1, _real_count(torch))
    cpp_extension.CUDA_HOME = os.environ.get("CUDA_HOME")
    for cls_name in _CLASSES:
        setattr(cpp_extension, cls_name, extension_class(cls_name))
    import setuptools

    setuptools.setup = setup
    try:
        import distutils.core

        distutils.core.setup = setup
    except ImportError:
        pass  # Python 3.12 has no distutils; setuptools' is patched above
    os.chdir(setup_py.parent)
    sys.path.insert(0, str(setup_py.parent))
    sys.argv = ["setup.py", "build_ext"]
    error = ""
    try:
        import runpy

        runpy.run_path(str(setup_py), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = f"SystemExit: {exc.code}"
    except BaseException as exc:  # noqa: BLE001 - the repository's code: any failure is reported, by its last line
        traceback.print_exc()
        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if not error and not state["setup_called"]:
        error = "it never called setuptools.setup()"
    result.write_text(json.dumps({"extensions": records, "package_dir": state["package_dir"], "error": error}))
    return 0


def _real_count(torch) -> int:
    try:
        return torch._C._cuda_getDeviceCount() if torch.version.cuda else 0
    except Exception:  # noqa: BLE001 - no driver
        return 0


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve()))
