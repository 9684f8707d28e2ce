"""A built artifact turned into a callable `call(inputs, out)` for the harness.
May import: workers.core, workers.ops, workers.toolkit, workers.torch_ext.

One function per binding kind; `load` picks by the manifest's `binding.kind`. A callable whose
`returns` attribute is true returns the output it allocated (`O = f(Q, K, V)`) and ignores
`out`; the others write into `out`.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from workers.core.records import Variant


def load(variant: Variant, artifact: Path, op: ModuleType, device_kind: str, dims: dict, dtype=None) -> Callable:
    kind = variant.binding.kind
    if kind == "c":
        return _c_entry(variant, artifact, op, device_kind, dims)
    if kind in ("python", "triton"):
        # A Triton variant's launcher is plain Python taking tensors; its kernel is compiled by
        # Triton's JIT for this device on the first call (a correctness check, never timed).
        from workers.bindings import python_entry

        return python_entry.entry(variant, artifact, op, device_kind, dims, dtype)
    if kind == "pybind11":
        return _pybind11_entry(variant, artifact, op, dims)
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


def _pybind11_entry(variant: Variant, artifact: Path, op: ModuleType, dims: dict) -> Callable:
    """A module built from the sources, called like `tk_kernel.dispatch_micro(A, B, C)`, or a
    torch extension built as its repository builds it (`O = minimal_attn.forward(q, k, v)`)."""
    import torch  # noqa: F401  (the extension links against torch's libraries)

    from workers.bindings import python_entry

    module_name = variant.binding.module or "tk_kernel"
    if variant.backend == "torch":
        from workers.torch_ext import runtime

        module = runtime.import_extension(artifact, module_name)
    else:
        candidates = sorted(artifact.glob(f"{module_name}*.so"))
        if not candidates:
            raise FileNotFoundError(f"pybind11 module {module_name!r} not found in the build artifact")
        spec = importlib.util.spec_from_file_location(module_name, candidates[0])
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    try:
        fn = getattr(module, variant.binding.entry)
    except AttributeError:
        exported = sorted(n for n in dir(module) if not n.startswith("_"))
        raise AttributeError(f"module {module_name!r} has no function {variant.binding.entry!r} "
                             f"(it exports: {exported})") from None
    return python_entry.wrap(fn, variant, op, dims, variant.binding.returns)


def _builtin_peer(variant: Variant, op: ModuleType) -> Callable:
    """The op's own peer (torch on the device: `op.peer`, or `op.peer_returns` for an op whose
    torch form returns its output), for a repository that declares none."""
    from workers.ops import returns_peer

    # A backward or full pass starts from what the call returns: the returning form, where the
    # op's peer writes into an output for its forward (softmax).
    if returns_peer(op) or (variant.mode != "forward" and hasattr(op, "peer_returns")):
        import torch

        torch.set_grad_enabled(False)  # a problem's Model has weights that require grad

        def returning(inputs: dict, out=None, alpha: float = 1.0, beta: float = 0.0):
            return op.peer_returns(inputs, variant.layout)

        returning.returns = True
        return returning
    if not hasattr(op, "peer"):
        raise ValueError(f"op {variant.op!r} has no peer function")

    def call(inputs: dict, out, alpha: float = 1.0, beta: float = 0.0) -> None:
        op.peer(inputs, out, variant.layout, alpha, beta)

    return call
