"""Ops defined by a problem file, as KernelBench writes them: `class Model(nn.Module)` computes
the op (it is the reference and the peer), `get_inputs()` makes one call's inputs and
`get_init_inputs()` the Model's constructor arguments. A variant names the file in
`[problem] file` and its entry (often `ModelNew`) is measured against that Model.

The file is the repository's code, so it is read as text on the driver (`parse_problem`: the
class and functions exist, the integer globals that size the problem) and run only inside the
job's sandboxed child (`load`), where an exception in it is an `OpCodeError` (status
`invalid`) naming the file and the function.

Sizes: the file's module-level integer globals (`batch_size = 4096`, `dim = 393216`) are the
shape's dimensions. A shape of the manifest sets them before `get_inputs()` runs, so a problem
can be measured at other sizes than its own; without shapes, the file's values are the one
shape. Inputs are drawn under a seed per check, on the job's device (the default device
during `get_inputs()`), floating tensors cast to the job's dtype; the Model and the variant's
module are built under one seed, so their weights agree (as KernelBench's evaluation builds
them), then moved to the device and dtype.
"""

from __future__ import annotations

import ast
import hashlib
import re
import types
from dataclasses import dataclass, field

from workers.core.records import Record
from workers.ops import kernelbench
from workers.ops.repo import HarnessOpNames, OpCodeError, OpDefinitionError

KIND = "problem"
INIT_SEED = 42  # one seed for every module a job builds: Model and ModelNew get equal weights
MODEL = "Model"
# A problem without integer globals has one shape, named by this pseudo-size.
NO_SIZES = "problem"
# fp32 models run with torch's defaults, which compute cuDNN convolutions in TF32 on NVIDIA
# GPUs since Ampere (about 3e-4 relative error against the fp64 reference); KernelBench's own
# evaluation allows 1e-4 elementwise between two fp32 runs, and 1e-2 for fp16 and bf16.
TOLERANCE = {"fp32": (1e-3, 1e-2), "fp16": (1e-2, 5e-2), "bf16": (3e-2, 1e-1)}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class ProblemOp(HarnessOpNames, Record):
    """A problem file as the driver knows it: its source (which travels to the job's child),
    the sizes it declares and their values, the Model's input names, the FLOPs expression."""

    name: str
    path: str  # repository-relative
    source: str
    inputs: tuple[str, ...]
    dims: tuple[str, ...]
    defaults: dict = field(default_factory=dict)
    flops_expr: str = ""
    kind: str = KIND
    functions: tuple[str, ...] = ("peer",)
    peer_name: str = ""
    rule: str = kernelbench.FP64  # the correctness rule a row's verdict follows (`workers.ops.kernelbench`)

    @property
    def INPUTS(self) -> tuple[str, ...]:
        return self.inputs

    @property
    def OUTPUT(self) -> str:
        return "out"

    @property
    def digest(self) -> str:
        # The rule moves the verdict, so it is part of the op; the default adds nothing, so the
        # series measured before rules existed keep their identity.
        rule = "" if self.rule == kernelbench.FP64 else "\0" + self.rule
        return hashlib.sha256((self.source + "\0" + self.flops_expr + rule).encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: dict) -> ProblemOp:
        data = dict(data)
        for key in ("inputs", "dims", "functions"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def is_problem(repo_op: dict | None) -> bool:
    return bool(repo_op) and repo_op.get("kind") == KIND


def parse_problem(path: str, source: str, name: str, flops_expr: str = "", rule: str = kernelbench.FP64) -> ProblemOp:
    """Check a problem file without running it: `class Model` with a `forward`, a
    `get_inputs()`; its integer globals are the sizes."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise OpDefinitionError(path, "(syntax)", f"line {exc.lineno}: {exc.msg}") from None
    if not _NAME.fullmatch(name):
        raise OpDefinitionError(path, "op", f"{name!r} is not an op name: letters, digits, . _ -")
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    model = classes.get(MODEL)
    if model is None:
        raise OpDefinitionError(path, MODEL, "missing: a problem file defines class Model(nn.Module), the "
                                              "reference computation")
    forward = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if forward is None:
        raise OpDefinitionError(path, f"{MODEL}.forward", "missing: def forward(self, ...)")
    if "get_inputs" not in functions:
        raise OpDefinitionError(path, "get_inputs", "missing: def get_inputs() returning the inputs of one call")
    params = [a.arg for a in (*forward.args.posonlyargs, *forward.args.args)][1:]
    sizes: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _size_value(node.value, sizes)
            if value is not None:
                sizes[node.targets[0].id] = value
            elif node.targets[0].id in sizes:
                del sizes[node.targets[0].id]  # reassigned to something else: not a plain size
    dims = tuple(sizes) or (NO_SIZES,)
    defaults = dict(sizes) or {NO_SIZES: 1}
    return ProblemOp(name=name, path=path, source=source, inputs=tuple(params) or ("x",), dims=dims,
                     defaults=defaults, flops_expr=flops_expr, peer_name=f"{MODEL} of {path}", rule=rule)


def _size_value(node: ast.expr, sizes: dict[str, int]) -> int | None:
    """A positive integer a global is set to: a literal, or arithmetic of literals and earlier
    sizes (`N = 2048 * 2`, `dim2 = dim1 // 2`); None for anything else."""
    from workers.core.formula import ExpressionError, evaluate

    if isinstance(node, ast.Constant) and type(node.value) is not int:
        return None
    if not all(isinstance(n, (ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Load))
               for n in ast.walk(node)):
        return None
    if any(isinstance(n, ast.Constant) and type(n.value) is not int for n in ast.walk(node)):
        return None
    try:
        value = evaluate(ast.unparse(node), sizes)
    except (ExpressionError, ZeroDivisionError):
        return None
    return int(value) if value == int(value) and value > 0 else None


# -- in the job's child only ----------------------------------------------------------------------

def load(spec: ProblemOp) -> types.SimpleNamespace:
    """The problem as an op namespace (the built-in ops' functions), running the file's code."""
    return _Problem(spec).namespace()


class _Problem:
    """The problem file's module, and the Models built from it per shape and dtype."""

    def __init__(self, spec: ProblemOp):
        self.spec = spec
        self.module = types.ModuleType(f"flopwatch_problem_{re.sub(r'[^A-Za-z0-9_]', '_', spec.name)}")
        self.module.__file__ = spec.path
        try:
            exec(compile(spec.source, spec.path, "exec"), self.module.__dict__)  # noqa: S102 - the sandboxed child
        except Exception as exc:
            raise OpCodeError(f"{spec.path}: importing the problem raised {type(exc).__name__}: {exc}") from exc
        self.models: dict[tuple, object] = {}
        self.dims: dict = dict(spec.defaults)
        # (floating input elements, bytes of other inputs, output elements) of the last reference
        self.work: tuple[int, int, int] | None = None

    def _guarded(self, what: str, fn, *args):
        try:
            return fn(*args)
        except OpCodeError:
            raise
        except Exception as exc:
            raise OpCodeError(f"problem {self.spec.name!r} ({self.spec.path}): {what} raised "
                              f"{type(exc).__name__}: {exc}") from exc

    def _set_sizes(self, dims: dict) -> None:
        self.dims = {d: int(dims.get(d, self.spec.defaults.get(d, 1))) for d in self.spec.dims}
        for name, value in self.dims.items():
            if name != NO_SIZES:
                setattr(self.module, name, value)

    def init_inputs(self, dims: dict) -> list:
        """The constructor arguments of Model (and of the variant's module) at these sizes."""
        self._set_sizes(dims)
        fn = getattr(self.module, "get_init_inputs", None)
        return list(self._guarded("get_init_inputs()", fn)) if fn else []

    def make_inputs(self, dims: dict, dtype, layout: str, device: str, generator) -> dict:
        import torch

        self._set_sizes(dims)
        torch.manual_seed(int(generator.initial_seed()))
        with torch.device(device):
            values = self._guarded("get_inputs()", self.module.get_inputs)
        if not isinstance(values, (list, tuple)):
            raise OpCodeError(f"{self.spec.path}: get_inputs() returned {type(values).__name__}, not a list")
        out = {}
        for i, value in enumerate(values):
            name = self.spec.inputs[i] if i < len(self.spec.inputs) else f"input{i}"
            if isinstance(value, torch.Tensor):
                value = value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
            out[name] = value
        return out

    def build(self, cls, dims: dict, device: str, dtype, what: str):
        """A module of `cls` (Model, or the variant's ModelNew) at these sizes, built under the
        shared seed on the host (as KernelBench builds both), then moved."""
        import torch

        args = self.init_inputs(dims)
        torch.manual_seed(INIT_SEED)
        with torch.device("cpu"):
            module = self._guarded(what, lambda: cls(*args))
        return module.to(device=device, dtype=dtype).eval() if hasattr(module, "to") else module

    def _model(self, device: str, dtype):
        key = (tuple(sorted(self.dims.items())), device, str(dtype))
        if key not in self.models:
            self.models[key] = self.build(self.module.Model, self.dims, device, dtype, f"{MODEL}(*get_init_inputs())")
        return self.models[key]

    def reference(self, inputs: dict, layout: str, alpha: float = 1.0, beta: float = 0.0, c_init=None):
        """The Model in fp64 on the job's inputs; where a model cannot run in fp64, in fp32 with
        TF32 off. Also records the bytes one call moves (inputs read, output written)."""
        import torch

        device = next((v.device.type for v in inputs.values() if isinstance(v, torch.Tensor)), "cpu")
        args = [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in inputs.values()]
        # Gradients only where asked for: a backward pass's check hands in inputs that require
        # grad and differentiates what this returns (`workers.measure.passes`).
        grad = any(isinstance(v, torch.Tensor) and v.requires_grad for v in inputs.values())
        try:
            with torch.set_grad_enabled(grad):
                out = self._guarded(f"{MODEL}.forward (fp64 reference)", self._model(device, torch.float64), *args)
        except OpCodeError:
            args32 = [v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                      for v in inputs.values()]
            with torch.set_grad_enabled(grad), _no_tf32():
                out = self._guarded(f"{MODEL}.forward", self._model(device, torch.float32), *args32).double()
        out = flatten_outputs(out, f"{self.spec.path}: {MODEL}.forward")
        tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
        self.work = (sum(t.numel() for t in tensors if t.is_floating_point()),
                     sum(t.numel() * t.element_size() for t in tensors if not t.is_floating_point()), out.numel())
        return out.double() if out.is_floating_point() else out

    def peer_returns(self, inputs: dict, layout: str):
        import torch

        device = next((v.device.type for v in inputs.values() if isinstance(v, torch.Tensor)), "cpu")
        dtype = next((v.dtype for v in inputs.values() if isinstance(v, torch.Tensor) and v.is_floating_point()),
                     torch.float32)
        return self._model(device, dtype)(*inputs.values())

    def same_precision(self, inputs: dict):
        """The Model in the job's dtype on these inputs, flattened as the reference is: what
        KernelBench compares a solution with (`workers.ops.kernelbench`)."""
        import torch

        with torch.no_grad():
            out = self._guarded(f"{MODEL}.forward", self.peer_returns, inputs, "default")
        return flatten_outputs(out, f"{self.spec.path}: {MODEL}.forward")

    def bytes_moved(self, dims: dict, itemsize: int) -> float:
        """Inputs read and output written by one call: measured by the reference once it ran;
        before, the inputs' sizes from `get_inputs()` on torch's meta device (nothing
        allocated) and an output as large as the largest input, for the fit check."""
        if self.work is not None:
            float_elems, other_bytes, out_elems = self.work
            return float((float_elems + out_elems) * itemsize + other_bytes)
        import torch

        self._set_sizes(dims)
        try:
            with torch.device("meta"):
                values = self.module.get_inputs()
        except Exception:  # noqa: BLE001 - a problem that places its inputs itself: not known before it runs
            return 0.0
        sizes = [v.numel() for v in values if isinstance(v, torch.Tensor)]
        return float((sum(sizes) + max(sizes, default=0)) * itemsize)

    def flops(self, dims: dict) -> float:
        if not self.spec.flops_expr:
            return 0.0
        from workers.core.formula import ExpressionError, evaluate

        try:
            return float(evaluate(self.spec.flops_expr, {**self.spec.defaults, **dims}))
        except ExpressionError as exc:
            raise OpCodeError(f"[problem] flops of {self.spec.path}: {exc}") from exc

    def namespace(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            NAME=self.spec.name, INPUTS=self.spec.inputs, OUTPUT="out", DIMS=self.spec.dims, LAYOUTS=("default",),
            SCALARS=(), TOLERANCE=TOLERANCE, PEER_NAME=self.spec.peer_name, REPO_PATH=self.spec.path,
            RETURNS=True, make_inputs=self.make_inputs, reference=self.reference, peer_returns=self.peer_returns,
            flops=self.flops, bytes_moved=self.bytes_moved, output_dtype=lambda dtype: dtype,
            init_inputs=self.init_inputs, build_module=self.build, scalars=lambda dims: {},
            RULE=self.spec.rule, same_precision=self.same_precision)


def flatten_outputs(out, what: str):
    """One tensor to check: the output itself, or a tuple's tensors flattened end to end, in
    their dtype when they share one (a returning entry's `(q, k)` in bf16 is checked as bf16
    against the op's output dtype), else floating ones as fp64."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (list, tuple)) and out and all(isinstance(t, torch.Tensor) for t in out):
        if len({t.dtype for t in out}) == 1:
            return torch.cat([t.reshape(-1) for t in out])
        return torch.cat([t.reshape(-1).double() if t.is_floating_point() else t.reshape(-1) for t in out])
    raise OpCodeError(f"{what} returned {type(out).__name__}, not a tensor or a tuple of tensors")


class _no_tf32:
    """fp32 matmuls and convolutions computed in fp32, for a reference that cannot run in fp64."""

    def __enter__(self):
        import torch

        self.saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        with _mutable_flags():
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False

    def __exit__(self, *exc):
        import torch

        with _mutable_flags():
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.saved


def _mutable_flags():
    """Where the repository's code imported torch's test utilities (extension-cpp's test module,
    holding its reference, imports torch.testing._internal.common_utils), torch refuses to set
    cudnn flags outside its `flags()` context (`disable_global_flags`); this is torch's own way
    to allow it, a no-op context where torch has none."""
    import contextlib

    import torch

    allow = getattr(torch.backends, "__allow_nonbracketed_mutation", None)
    return allow() if allow is not None else contextlib.nullcontext()
