"""Entries written in Python, as repositories have them: a function of a file or of a package
module (`liger_kernel.transformers.functional:liger_rms_norm`), an `nn.Module` class
(KernelBench's `ModelNew`, built once per job and then called), or a `torch.library` op
(`torch.ops.mylib.rms_norm`), each either writing into an output it is handed or returning
its output (`binding.returns`).

The artifact of a `python`, `triton` or `torch` variant holds the repository files its build
shipped under `repo/` at their repository-relative paths, and `python.json`: the variant's
folder and the import roots (the repository's shared folders of flopwatch.toml, where a
package such as Liger's `src/liger_kernel` lives). Torch extensions built for the variant lie
under `ext/` (`workers.torch_ext.runtime` hands them to the code that asks for them).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from types import ModuleType

from workers.core.entries import entry_parts  # noqa: F401 - re-exported: the manifest and back ends read it here
from workers.core.records import Variant
from workers.toolkit.artifact_index import INDEX, TREE, read_index

# Back ends whose entries are Python (a function, an nn.Module class, a torch.library op, which
# may launch Triton kernels) and whose artifact is the shipped repository tree.
PYTHON_SIDE = ("python", "triton", "torch")
# Import roots every python-side variant has beyond flopwatch.toml's shared folders, as a
# checkout imports its own packages (repository-relative; the planner checks entries against
# the same list: `pipeline.project.manifest`).
REPOSITORY_ROOTS = (".", "src")


def write_index(out: Path, folder: str, roots: list[str], extensions: dict | None = None) -> None:
    """The build's note of where things lie in the artifact (read by `resolve`), and whether
    any shipped Python file names torch.utils.cpp_extension (only then does the job route its
    `load` calls: importing that module costs a job process 0.1 s)."""
    calls_builder = any(b"cpp_extension" in p.read_bytes() for p in (out / TREE).rglob("*.py"))
    (out / INDEX).write_text(json.dumps({"folder": folder, "roots": roots, "extensions": extensions or {},
                                         "calls_cpp_extension": calls_builder}))




def import_file(path: Path, name: str) -> ModuleType:
    """Import one Python file as module `name` (its folder need not be a package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        # as Python's own import does: a half-run module is not kept, so the next caller (the
        # reference after the peer) sees the file's own error, not a module missing its names
        sys.modules.pop(name, None)
        raise
    return module


def repo_path(folder: str, file: str) -> str:
    """A path written from the variant folder, as a repository-relative path (pure); refuses one
    that leads outside the repository."""
    parts: list[str] = []
    for part in PurePosixPath(folder, file).parts:
        if part == "..":
            if not parts:
                raise ValueError(f"{file!r} leads outside the repository")
            parts.pop()
        elif part not in (".", ""):
            parts.append(part)
    return "/".join(parts)


def resolve(variant: Variant, artifact: Path, entry: str = "", key: str = "binding.entry",
            folder: str | None = None) -> object:
    """The object the entry names (or `entry`, another callable written the same way: a
    `[reference]` call, named `key` in errors, its file written from `folder`), its module
    imported the way its repository imports it."""
    entry = entry or variant.binding.entry
    index = read_index(artifact)
    # An artifact without the index holds the variant folder's files at its top (as one a test
    # packs by hand does): the folder is the tree.
    tree = artifact / TREE if (artifact / INDEX).exists() else artifact
    if not (artifact / INDEX).exists():
        index["folder"] = ""
    _add_import_roots(tree, index)
    from workers.torch_ext import runtime

    if index.get("extensions") or index.get("calls_cpp_extension"):
        runtime.install(artifact, index.get("extensions") or {})
    kind, where, attr = entry_parts(entry)
    if kind == "torch_op":
        for src in variant.sources:  # the files that register the op with torch.library
            if src.endswith(".py"):
                _import_file(tree, repo_path(index["folder"], src), variant.name)
        for name in index.get("extensions") or {}:  # TORCH_LIBRARY registers when its library loads
            runtime.import_extension(artifact, name)
        import torch

        _, _, ns, name = where.split(".")
        try:
            return getattr(getattr(torch.ops, ns), name)
        except (AttributeError, RuntimeError) as exc:
            raise AttributeError(f"{where} is not registered after importing the variant's sources "
                                 f"({list(variant.sources)}): {exc}") from None
    if kind == "file":
        module = _import_file(tree, repo_path(index["folder"] if folder is None else folder, where), variant.name)
    else:
        module = importlib.import_module(where)
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AttributeError(f"{key} {entry!r}: {where} has no {attr!r}") from None
    return obj


def problem_files(variant: Variant) -> None:
    """A challenge problem's files importable by their names (`workers.ops.challenge.install`),
    for an import of the entry outside a job, which loads the op first: a submission's `from
    task import input_t` (gpu-mode's load_inline solutions) found no `task` in the torch
    extension's build process and failed the build on an H100."""
    from workers.ops import challenge

    if variant.repo_op and challenge.is_challenge(variant.repo_op):
        challenge.install(challenge.ChallengeOp.from_dict(variant.repo_op).modules)


def _add_import_roots(tree: Path, index: dict) -> None:
    roots = [tree / r for r in index.get("roots") or ()]
    for root in reversed(roots):
        if root.is_dir() and str(root) not in sys.path:
            sys.path.insert(0, str(root))


def _import_file(tree: Path, rel: str, variant_name: str) -> ModuleType:
    """The module of a shipped file: by its package name where it lies in a package below an
    import root (its relative imports then work), else by its path; its folder is on sys.path,
    as it is for a script run from there."""
    path = tree / rel
    if not path.is_file():
        raise FileNotFoundError(f"{rel} is not in the build artifact (is it listed in sources?)")
    dotted = _dotted_name(path)
    if dotted:
        return importlib.import_module(dotted)
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    name = f"flopwatch_variant_{''.join(c if c.isalnum() else '_' for c in variant_name)}_{path.stem}"
    known = sys.modules.get(name)
    if known is not None and getattr(known, "__file__", None) == str(path):
        return known  # the entry and its [reference] in one file: one module, run once
    return import_file(path, name)


def _dotted_name(path: Path) -> str:
    """`pkg.sub.mod` for a file inside packages whose top lies directly on sys.path, else ""."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    if len(parts) == 1 or str(folder) not in sys.path:
        return ""
    return ".".join(parts)


def is_module_class(obj: object) -> bool:
    import torch

    return isinstance(obj, type) and issubclass(obj, torch.nn.Module)


def positional(variant: Variant, op, inputs: dict, out, dims: dict, alpha: float, beta: float) -> list:
    """The entry's positional arguments: `binding.args` by name, else the op's inputs then its
    output (an entry that writes) or then its scalars (one that returns)."""
    from workers.ops import scalars

    values = {**inputs, op.OUTPUT: out, **{d: int(v) for d, v in dims.items()},
              **scalars(op, dims), "alpha": float(alpha), "beta": float(beta)}
    if variant.binding.args:
        return [values[name] for name in variant.binding.args]
    if variant.binding.returns:
        return [*inputs.values(), *scalars(op, dims).values()]
    return list(op.tensor_args(inputs, out))


def entry(variant: Variant, artifact: Path, op, device_kind: str, dims: dict, dtype) -> Callable:
    """`call(inputs, out, alpha, beta)` for a python, triton or torch variant; with
    `call.returns` it returns the output instead of writing `out`."""
    target = resolve(variant, artifact)
    returns = variant.binding.returns
    if is_module_class(target):
        target = build_module(target, op, dims, device_kind, dtype, variant.binding.entry)
        returns = True
    return wrap(target, variant, op, dims, returns)


def wrap(fn, variant: Variant, op, dims: dict, returns: bool) -> Callable:
    kwargs = dict(variant.binding.kwargs)
    if returns:
        import torch

        # What a returning entry hands back must not carry an autograd graph (a module's
        # weights require grad): outputs are checked and dropped, as KernelBench's evaluation
        # runs its models under no_grad. The job's process runs nothing else.
        torch.set_grad_enabled(False)

    def call(inputs: dict, out=None, alpha: float = 1.0, beta: float = 0.0):
        result = fn(*positional(variant, op, inputs, out, dims, alpha, beta), **kwargs)
        return result if returns else None

    call.returns = returns
    call.target = fn  # keeps a module (and what it loaded) alive while the callable lives
    return call


def build_module(cls, op, dims: dict, device_kind: str, dtype, entry_name: str):
    """An nn.Module entry, built once per job: with the problem's constructor arguments under
    its seed (the Model and the variant's module then share their weights), else with none."""
    import torch

    device = "cpu" if device_kind == "cpu" else "cuda"
    if hasattr(op, "build_module"):
        return op.build_module(cls, dims, device, dtype, f"{entry_name}(*get_init_inputs())")
    from workers.ops.problem import INIT_SEED

    torch.manual_seed(INIT_SEED)
    with torch.device("cpu"):
        module = cls()
    return module.to(device=device, dtype=dtype).eval()
