"""Turn a built artifact into a callable `call(inputs, out)` for the harness.

One function per binding kind; `load` picks by the manifest's `binding.kind`.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from workers.records import Variant


def load(variant: Variant, artifact: Path, op: ModuleType, device_kind: str, dims: dict) -> Callable:
    kind = variant.binding.kind
    if kind == "c":
        return _c_entry(variant, artifact, op, device_kind, dims)
    if kind in ("python", "triton"):
        # A Triton variant's launcher is plain Python taking tensors; its kernel is compiled by
        # Triton's JIT for this device on the first call (a correctness check, never timed).
        return _python_entry(variant, artifact, op)
    if kind == "pybind11":
        return _pybind11_entry(variant, artifact, op)
    if kind == "raw":
        from workers.bindings.raw import raw_entry

        return raw_entry(variant, artifact, op, device_kind, dims)
    if kind == "builtin":
        return _builtin_peer(variant, op)
    raise ValueError(f"binding kind {kind!r} is not supported")


def _find_library(artifact: Path) -> Path:
    libs = sorted(artifact.glob("*.so"))
    if not libs:
        raise FileNotFoundError(f"no shared library in the build artifact ({sorted(p.name for p in artifact.iterdir())})")
    return libs[0]


def _c_entry(variant: Variant, artifact: Path, op: ModuleType, device_kind: str, dims: dict) -> Callable:
    """extern "C" entry: op arguments (pointers, sizes[, α, β]) and, on a GPU, the stream."""
    lib = ctypes.CDLL(str(_find_library(artifact)))
    try:
        fn = getattr(lib, variant.binding.entry)
    except AttributeError:
        raise AttributeError(f"entry point {variant.binding.entry!r} not exported by the library "
                             f"(is it declared extern \"C\"?)") from None
    fn.restype = None

    def call(inputs: dict, out, alpha: float = 1.0, beta: float = 0.0) -> None:
        args = op.c_args(inputs, out, dims, alpha, beta, variant.alpha_beta)
        if device_kind != "cpu":
            import torch

            args.append(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        fn(*args)

    return call


def _import_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _python_entry(variant: Variant, artifact: Path, op: ModuleType) -> Callable:
    """`file.py:function` taking the op's tensors, e.g. (A, B, C) for gemm."""
    file, _, func = variant.binding.entry.partition(":")
    module = _import_file(artifact / file, f"flopwatch_variant_{variant.name}")
    fn = getattr(module, func)

    def call(inputs: dict, out, alpha: float = 1.0, beta: float = 0.0) -> None:
        fn(*op.tensor_args(inputs, out))

    return call


def _pybind11_entry(variant: Variant, artifact: Path, op: ModuleType) -> Callable:
    """A module built from the sources, called like `tk_kernel.dispatch_micro(A, B, C)`."""
    import torch  # noqa: F401  (the extension links against torch's libraries)

    module_name = variant.binding.module or "tk_kernel"
    candidates = sorted(artifact.glob(f"{module_name}*.so"))
    if not candidates:
        raise FileNotFoundError(f"pybind11 module {module_name!r} not found in the build artifact")
    spec = importlib.util.spec_from_file_location(module_name, candidates[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, variant.binding.entry)

    def call(inputs: dict, out, alpha: float = 1.0, beta: float = 0.0) -> None:
        fn(*op.tensor_args(inputs, out))

    return call


def _builtin_peer(variant: Variant, op: ModuleType) -> Callable:
    """The op's own peer (torch on the device: `op.peer`), for a repository that declares none."""
    if not hasattr(op, "peer"):
        raise ValueError(f"op {variant.op!r} has no peer function")

    def call(inputs: dict, out, alpha: float = 1.0, beta: float = 0.0) -> None:
        op.peer(inputs, out, variant.layout, alpha, beta)

    return call
