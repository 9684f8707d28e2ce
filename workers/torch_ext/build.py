"""Build a variant's torch extensions with torch's own machinery, in a child process:
(`python -m workers.backends.torch_ext_child`, which also imports the entry once afterwards).

Each extension is built by the call its repository makes (`torch.utils.cpp_extension.load`, or
`load_inline` with the same strings), with the flags read from that call or from setup.py, in
a build folder of the artifact: so the compiler, the flags torch adds, the ABI and — on a ROCm
build of torch — the hipify pass are torch's, as on the author's machine. The module is then
imported once here (an undefined symbol shows now, not in a timed job). Compiler output goes to
this process's stdout (ninja's, with `verbose=True`), which the caller keeps as the build log;
CUDA builds add `--resource-usage` so ptxas reports registers and shared memory per kernel.

Request: {"root": unpacked repository files, "out": the artifact folder, "specs": [ExtensionSpec
dicts], "variant": the Variant as a dict (its entry is imported once after the build)}. Result:
{"built": {name: {"path", "module", "is_python_module"}}, "failed": {name: error}, "import_error"}.
"""

from __future__ import annotations

import json
import shutil
import sys
import sysconfig
import traceback
from pathlib import Path
from types import ModuleType

from workers.torch_ext.spec import ExtensionSpec

EXT_DIR = "ext"


def flags(spec: dict, torch_cuda: str | None, torch_hip: str | None) -> tuple[list[str], list[str]]:
    """(extra_cflags, extra_cuda_cflags) as the repository gives them, plus the resource report
    of the device compiler (pure)."""
    cflags = list(spec.get("extra_cflags") or ())
    cuda = list(spec.get("extra_cuda_cflags") or ())
    if _has_cuda(spec):
        if torch_cuda:
            cuda.append("--resource-usage")
        elif torch_hip:
            cuda.append("-Rpass-analysis=kernel-resource-usage")
    return cflags, cuda


def _has_cuda(spec: dict) -> bool:
    return ExtensionSpec.from_dict(spec).cuda


def build_one(spec: dict, root: Path, out: Path) -> dict:
    """Build and import one extension; returns its entry of the artifact's index."""
    import torch
    from torch.utils import cpp_extension

    name = spec["name"]
    build_dir = out / EXT_DIR / name
    build_dir.mkdir(parents=True, exist_ok=True)
    cflags, cuda_flags = flags(spec, torch.version.cuda, getattr(torch.version, "hip", None))
    # library folders inside the repository are read repository-relative; torch links elsewhere
    ldflags = [f"-L{root / f[2:]}" if f.startswith("-L") and not f[2:].startswith("/") else f
               for f in spec.get("extra_ldflags") or ()]
    common = {"extra_cflags": cflags, "extra_cuda_cflags": cuda_flags, "extra_ldflags": ldflags,
              "extra_include_paths": [str(root / d) for d in spec.get("include_dirs") or ()],
              "build_directory": str(build_dir), "verbose": True, "with_cuda": spec.get("with_cuda"),
              "is_python_module": bool(spec.get("is_python_module", True))}
    print(f"flopwatch: building extension {name} ({spec['kind']} at {spec.get('origin', '?')})", flush=True)
    if spec["kind"] == "load_inline":
        loaded = cpp_extension.load_inline(name, list(spec.get("cpp_sources") or ()),
                                           cuda_sources=list(spec.get("cuda_sources") or ()) or None,
                                           functions=list(spec.get("functions") or ()) or None, **common)
    else:
        sources = [str(root / s) for s in spec.get("sources") or ()]
        try:
            loaded = cpp_extension.load(name, sources, **common)
        except ImportError as exc:
            if "module export function" not in str(exc) or not common["is_python_module"]:
                raise
            # A library with no PyInit_ (only TORCH_LIBRARY operators, as a py_limited_api
            # build may be): loaded into torch.ops instead; ninja finds it up to date.
            print(f"flopwatch: {name} defines no Python module: loaded with torch.ops.load_library", flush=True)
            common["is_python_module"] = False
            spec = {**spec, "is_python_module": False}
            loaded = cpp_extension.load(name, sources, **common)
    sys.stdout.flush()
    path = Path(loaded.__file__) if hasattr(loaded, "__file__") else Path(str(loaded))
    module = spec.get("module") or name
    if "." in module:
        # The library is loaded now; the entry's import below must get this one, not dlopen the
        # copy made for the package (a second copy registers its TORCH_LIBRARY twice: abort).
        sys.modules[module] = loaded if isinstance(loaded, ModuleType) else _library_module(module, path)
    if spec["kind"] == "setup" and "." in module:
        # Where `setup.py build_ext --inplace` puts it: inside its package, below the import root.
        package = Path(spec.get("package_dir") or "", *module.split(".")[:-1])
        target = out / "repo" / package / (module.split(".")[-1] + sysconfig.get_config_var("EXT_SUFFIX"))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        path = target
    return {"path": path.relative_to(out).as_posix(), "module": module,
            "is_python_module": bool(spec.get("is_python_module", True)), "cuda": _has_cuda(spec)}


def _library_module(name: str, path: Path) -> ModuleType:
    module = ModuleType(name)
    module.__file__ = str(path)
    return module


def build_all(request: dict) -> dict:
    """Every extension of the request built (and loaded) in this process: {"built": {name:
    where it lies}, "failed": {name: the error}}."""
    root, out = Path(request["root"]), Path(request["out"])
    result: dict = {"built": {}, "failed": {}}
    for spec in request["specs"]:
        try:
            result["built"][spec["name"]] = build_one(spec, root, out)
        except Exception as exc:  # noqa: BLE001 - a compile or import error of the repository's extension
            sys.stdout.flush()
            traceback.print_exc()
            result["failed"][spec["name"]] = f"{type(exc).__name__}: {exc}"
    return result


def main(argv: list[str]) -> int:
    Path(argv[2]).write_text(json.dumps(build_all(json.loads(Path(argv[1]).read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
