"""Torch extensions at run time, in the job's process: the modules the build made are handed to
the code that asks for them, so nothing is compiled inside a job.

The repository's code runs as written. Where it calls `torch.utils.cpp_extension.load(name=...)`
or `load_inline(name=...)` (KernelBench's `ModelNew` files do at import), the call returns the
module built for that name ahead of time; a name the variant did not declare fails with the
manifest line that fixes it instead of starting a compiler. An extension a `setup.py` builds
(`mypkg._C`) is found under its dotted name by a meta-path finder installed here, whichever
folder the artifact holds it in: a package whose `__init__` does `from . import _C` (PyTorch's
extension-cpp) loads it as it would after `pip install`, and its `TORCH_LIBRARY` static
initialisers register `torch.ops.<ns>.<op>`. A library with no `PyInit_` (only operators) is
loaded with `torch.ops.load_library` and stands as an empty module.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from workers.toolkit.artifact_index import read_index

_INSTALLED: dict = {"artifact": None, "extensions": {}}


class UndeclaredExtension(RuntimeError):
    """The code builds an extension at run time that the manifest does not declare."""


def install(artifact: Path, extensions: dict) -> None:
    """Route torch's JIT build calls in this process to the extensions of `artifact`
    (`extensions`: name → {"path", "module", "is_python_module"}, from the build's index)."""
    from torch.utils import cpp_extension

    _INSTALLED.update(artifact=artifact, extensions=dict(extensions))
    if not any(isinstance(f, _PrebuiltFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PrebuiltFinder())
    if getattr(cpp_extension.load, "_flopwatch", False):
        return

    def load(name, *args, **kwargs):
        return _prebuilt(name, "load")

    def load_inline(name, *args, **kwargs):
        return _prebuilt(name, "load_inline")

    for fn in (load, load_inline):
        fn._flopwatch = True
    cpp_extension.load, cpp_extension.load_inline = load, load_inline


def _prebuilt(name: str, call: str):
    known = _INSTALLED["extensions"]
    if name not in known:
        declared = sorted(known) or "none"
        raise UndeclaredExtension(
            f"the code calls torch.utils.cpp_extension.{call}(name={name!r}) at run time, which would compile "
            f"inside the timed job; declare it so it is built once per node: [[extensions]] from = \"<the file "
            f"with that call>\" in the variant.toml (declared here: {declared})")
    return import_extension(_INSTALLED["artifact"], name)


def import_extension(artifact: Path | None, name: str) -> ModuleType | str:
    """The built extension `name`: its Python module, or for an extension built with
    `is_python_module=False` (operators registered with torch.library) its library's path,
    loaded into torch.ops, as torch's own `load` returns it."""
    known = _INSTALLED["extensions"] if artifact is _INSTALLED["artifact"] and _INSTALLED["extensions"] \
        else read_index(artifact).get("extensions", {}) if artifact else {}
    info = known.get(name) or next((e for e in known.values() if e.get("module") == name), None)
    if info is None:
        raise FileNotFoundError(f"extension {name!r} is not in the build artifact (built: {sorted(known) or 'none'})")
    path = artifact / info["path"]
    module_name = info.get("module") or name
    if not info.get("is_python_module", True):
        import torch

        torch.ops.load_library(str(path))
        return str(path)
    if module_name in sys.modules:
        return sys.modules[module_name]
    import torch  # (the extension links against torch's libraries: loaded first)

    if "." in module_name:  # a setup.py extension inside its package (below an import root)
        return importlib.import_module(module_name)
    loader = importlib.machinery.ExtensionFileLoader(module_name, str(path))
    spec = importlib.util.spec_from_file_location(module_name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    loader.exec_module(module)
    return module


class _PrebuiltFinder(importlib.abc.MetaPathFinder):
    """`import pkg._C` (or `from . import _C` inside pkg) → the prebuilt library of the
    extension whose dotted module that is; every other name is left to the usual finders."""

    def find_spec(self, fullname, path=None, target=None):
        artifact = _INSTALLED["artifact"]
        if artifact is None or "." not in fullname:
            return None
        info = next((e for e in _INSTALLED["extensions"].values() if e.get("module") == fullname), None)
        if info is None:
            return None
        location = str(artifact / info["path"])
        return importlib.util.spec_from_file_location(fullname, location, loader=_PrebuiltLoader(fullname, location))


class _PrebuiltLoader(importlib.machinery.ExtensionFileLoader):
    """A Python extension module as usual; a library without `PyInit_<name>` (a pure
    torch.library one, built with py_limited_api or as a plain shared object) is loaded into
    torch.ops and stands as an empty module, so `from . import _C` still succeeds."""

    def create_module(self, spec):
        import torch  # noqa: F401 - the library links against torch's: loaded first

        try:
            return super().create_module(spec)
        except ImportError as exc:
            if "module export function" not in str(exc):
                raise
            torch.ops.load_library(self.path)
            module = ModuleType(spec.name)
            module.__file__ = self.path
            module._flopwatch_library_only = True
            return module

    def exec_module(self, module):
        if not getattr(module, "_flopwatch_library_only", False):
            super().exec_module(module)
