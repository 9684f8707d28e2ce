"""Ops whose reference the repository keeps: a variant's `[reference]` table names the callable
its output is checked against (`selective_scan_ref` beside `selective_scan_fn`, a function its
tests compare with, a torch function) and the arguments of one call, or says there is none
(`check = "none"`: the variant is measured as `unchecked`, its output's digest kept per commit).

The table is read on the driver (`pipeline.project.manifest`), which never runs the reference;
the record (`ReferenceOp`) travels in `Variant.repo_op` and the callable is imported only in the
job's sandboxed child (`load`), the way the entry is (`workers.bindings.python_entry.resolve`),
where an exception in it is an `OpCodeError` (status `invalid`) naming the callable and its
file. The reference runs in fp64 where it can, else in fp32 with TF32 off, else in the job's
dtype (as a problem's Model falls back); in the job's dtype it is the op's peer.
"""

from __future__ import annotations

import hashlib
import json
import types
from dataclasses import dataclass, field

from workers.core.records import Record
from workers.ops.problem import TOLERANCE, _no_tf32, flatten_outputs
from workers.ops.repo import HarnessOpNames, OpCodeError

KIND = "reference"
# The seed of an unchecked variant's first check: its output's digest is compared across
# commits, so its inputs must be the same at every commit (every other check draws fresh ones).
DIGEST_SEED = 20_261_127
SAMPLE_VALUES = 8  # values of an unchecked output kept beside its digest


@dataclass(frozen=True)
class ReferenceOp(HarnessOpNames, Record):
    """A `[reference]` table as the driver read it: the callable ("" with check = "none"), the
    inputs (plain dicts: name, shape, dtype, high, value, output), the sizes and their defaults,
    and the text of the reference's file when it is the repository's (`path`), for the digest."""

    name: str
    call: str = ""
    inputs: tuple[dict, ...] = ()
    dims: tuple[str, ...] = ()
    sizes: dict = field(default_factory=dict)  # not "defaults": a problem's peer also runs at those (plan)
    flops_expr: str = ""
    kwargs: dict = field(default_factory=dict)
    found: str = "hand"
    where: str = ""
    folder: str = ""  # the variant folder, from which a "file.py:name" call is written
    path: str = ""  # repository-relative file of the reference, when it is the repository's
    source: str = ""
    kind: str = KIND
    functions: tuple[str, ...] = ("peer_returns",)
    peer_name: str = ""
    # A built-in op timed as the peer instead of the reference (`[reference] peer`), and which of
    # its inputs each of the table's inputs is.
    peer_op: str = ""
    peer_inputs: dict = field(default_factory=dict)

    @property
    def INPUTS(self) -> tuple[str, ...]:
        return tuple(i["name"] for i in self.inputs if not i.get("output"))

    @property
    def OUTPUT(self) -> str:
        return next((i["name"] for i in self.inputs if i.get("output")), "out")

    @property
    def digest(self) -> str:
        """What defines the harness: the table itself and the text of the reference's file when
        the repository has it (a "file.py:name" call, or a "package.module:name" whose module
        lies in the checkout). Not covered: what that file imports, and a reference of an
        installed package (torch's own functions) — those change with the toolchain."""
        # What is only shown (found, where) and where the manifest lies (folder) are not the op.
        shown = ("source", "peer_name", "found", "where", "folder")
        table = {k: v for k, v in self.to_dict().items() if k not in shown}
        if self.call.partition(":")[0].endswith(".py"):
            table["call"] = f"{self.path}:{self.call.partition(':')[2]}"  # as written from the repository's root
        return hashlib.sha256((json.dumps(table, sort_keys=True) + "\0" + self.source).encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: dict) -> ReferenceOp:
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("inputs", "dims", "functions"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**data)


_FLOATS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}


def is_reference(repo_op: dict | None) -> bool:
    return bool(repo_op) and repo_op.get("kind") == KIND


def size_of(dim, dims: dict) -> int:
    return int(dim) if isinstance(dim, int) else int(dims[dim])


# -- in the job's child only ----------------------------------------------------------------------

def load(spec: ReferenceOp, resolve=None, peer=None) -> types.SimpleNamespace:
    """The reference as an op namespace (the built-in ops' functions). `resolve(call, key,
    folder)` imports the callable from the job's build as the entry is imported
    (`workers.bindings.python_entry.resolve`, handed in by the job: ops import no binding code);
    None where the job has no build to import from. `peer`: the built-in op `spec.peer_op`
    names, whose torch peer is timed instead of the reference (`workers.ops.for_variant`)."""
    return _Reference(spec, resolve, peer).namespace()


class _Reference:
    def __init__(self, spec: ReferenceOp, resolve, peer=None):
        self.spec, self.resolve, self.peer = spec, resolve, peer
        self.fn = None
        self.output = next((i for i in spec.inputs if i.get("output")), None)
        self.dims: dict = dict(spec.sizes)
        self.work: tuple[int, int, int] | None = None  # as a problem's: float elements, other bytes, output elements

    def _what(self) -> str:
        return f"reference {self.spec.call!r}" + (f" ({self.spec.path})" if self.spec.path else "")

    def _callable(self):
        """The callable, imported on first use: by then the entry's import roots are set."""
        if self.fn is not None:
            return self.fn
        from workers.core.entries import entry_parts

        try:
            try:
                if self.resolve is None:
                    raise FileNotFoundError("no build artifact")
                self.fn = self.resolve(self.spec.call, "reference.call", self.spec.folder)
            except FileNotFoundError:
                if not (entry_parts(self.spec.call)[0] == "file" and self.spec.source):
                    raise
                # No Python tree in this artifact (a compiled variant's): the file's text the
                # record carries, run as a module of its own (its sibling imports cannot work).
                module = types.ModuleType(f"flopwatch_reference_{abs(hash(self.spec.path))}")
                module.__file__ = self.spec.path
                exec(compile(self.spec.source, self.spec.path, "exec"), module.__dict__)  # noqa: S102 - sandboxed child
                obj = module
                for part in entry_parts(self.spec.call)[2].split("."):
                    obj = getattr(obj, part)
                self.fn = obj
        except Exception as exc:
            raise OpCodeError(f"{self._what()}: importing it raised {type(exc).__name__}: {exc}") from exc
        return self.fn

    def _run(self, args: list, where: str):
        try:
            return self._callable()(*args, **self.spec.kwargs)
        except OpCodeError:
            raise
        except Exception as exc:
            raise OpCodeError(f"{self._what()}{where} raised {type(exc).__name__}: {exc}") from exc

    def _shape(self, item: dict, dims: dict) -> tuple[int, ...]:
        return tuple(size_of(d, {**self.spec.sizes, **dims}) for d in item.get("shape") or ())

    def make_inputs(self, dims: dict, dtype, layout: str, device: str, generator) -> dict:
        """Every input but the output, in order: floating tensors drawn in fp32 then cast (the
        same values at every dtype), integers in [0, high), constants as written."""
        import torch

        self.dims = dims  # the job's shape, for the reference's output (it is handed inputs only)
        out = {}
        for item in self.spec.inputs:
            if item.get("output"):
                continue
            if item.get("value") is not None:
                out[item["name"]] = item["value"]
                continue
            shape, kind = self._shape(item, dims), item.get("dtype")
            if kind in _FLOATS:  # a dtype of its own, whatever the job's (the test's fp32 coefficients)
                out[item["name"]] = torch.randn(shape, generator=generator, device=device).to(getattr(torch, _FLOATS[kind]))
            elif kind:
                high = item.get("high") or (2 if kind == "bool" else 100)
                t = torch.randint(0, high, shape, generator=generator, device=device, dtype=torch.int64)
                out[item["name"]] = t.bool() if kind == "bool" else t.to(getattr(torch, kind))
            else:
                out[item["name"]] = torch.randn(shape, generator=generator, device=device).to(dtype)
        return out

    def _args(self, inputs: dict, cast=None) -> list:
        """The reference's arguments by name; a constant an input snapshot lacks, from the table."""
        import torch

        args = []
        for item in self.spec.inputs:
            if item.get("output"):
                continue
            v = inputs.get(item["name"], item.get("value"))
            args.append(v.to(cast) if cast is not None and isinstance(v, torch.Tensor) and v.is_floating_point() else v)
        return args

    def reference(self, inputs: dict, layout: str = "default", *unused):
        """The expected output, flattened, in fp64 where the reference can run so, else fp32
        with TF32 off, else the inputs' own dtype; records the bytes one call moves."""
        import torch

        dtype = next((v.dtype for v in inputs.values() if isinstance(v, torch.Tensor) and v.is_floating_point()),
                     torch.float32)
        # Gradients only where asked for: a backward pass's check hands in inputs that require
        # grad and differentiates what this returns (`workers.measure.passes`).
        with torch.set_grad_enabled(_wants_grad(inputs)):
            try:
                out = self._run(self._args(inputs, torch.float64), " (fp64)")
            except OpCodeError:
                try:
                    with _no_tf32():
                        out = self._run(self._args(inputs, torch.float32), " (fp32)")
                except OpCodeError:
                    out = self._run(self._args(inputs, dtype), "")
        out = flatten_outputs(out, self._what())
        if self.output is not None:
            shape = self.output_shape(self.dims)
            if out.numel() == _numel(shape):
                out = out.reshape(shape)
        tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
        self.work = (sum(t.numel() for t in tensors if t.is_floating_point()),
                     sum(t.numel() * t.element_size() for t in tensors if not t.is_floating_point()), out.numel())
        return out.double() if out.is_floating_point() else out

    def peer_returns(self, inputs: dict, layout: str = "default"):
        if self.peer is not None:  # a built-in op's torch peer, on the same inputs under its own names
            op = self.peer
            mapped = {self.spec.peer_inputs[k]: v for k, v in inputs.items() if k in self.spec.peer_inputs}
            return op.peer_returns(mapped, op.LAYOUTS[0])
        return self._run(self._args(inputs), "")


    def output_shape(self, dims: dict) -> tuple[int, ...]:
        return self._shape(self.output, dims) if self.output is not None else ()

    def tensor_args(self, inputs: dict, out) -> list:
        """The entry's arguments: every input in order, the output buffer at its place."""
        return [out if item.get("output") else inputs.get(item["name"], item.get("value"))
                for item in self.spec.inputs]

    def bytes_moved(self, dims: dict, itemsize: int) -> float:
        """Inputs read and output written: measured by the reference once it ran; before (the
        fit check), from the inputs' shapes and an output as large as the largest input."""
        if self.work is not None:
            floats, other, outs = self.work
            return float((floats + outs) * itemsize + other)
        sizes = [_numel(self._shape(i, dims)) for i in self.spec.inputs if i.get("value") is None]
        return float((sum(sizes) + (0 if self.output is not None else max(sizes, default=0))) * itemsize)

    def flops(self, dims: dict) -> float:
        if not self.spec.flops_expr:
            return 0.0
        from workers.core.formula import ExpressionError, evaluate

        try:
            return float(evaluate(self.spec.flops_expr, {**self.spec.sizes, **dims}))
        except ExpressionError as exc:
            raise OpCodeError(f"[reference] flops {self.spec.flops_expr!r}: {exc}") from exc

    def namespace(self) -> types.SimpleNamespace:
        ns = types.SimpleNamespace(
            NAME=self.spec.name, INPUTS=self.spec.INPUTS, OUTPUT=self.spec.OUTPUT, DIMS=self.spec.dims,
            LAYOUTS=("default",), SCALARS=(), TOLERANCE=TOLERANCE, PEER_NAME=self.spec.peer_name,
            REPO_PATH=self.spec.path, RETURNS=self.output is None, UNCHECKED=not self.spec.call,
            # the repository's reference may keep a wider result than its inputs (Liger's fp32
            # coefficients of fp16 data): an entry doing the same is not wrong for it
            WIDER_OUTPUT_OK=True,
            make_inputs=self.make_inputs, flops=self.flops, bytes_moved=self.bytes_moved,
            output_dtype=lambda dtype: dtype, output_shape=self.output_shape, tensor_args=self.tensor_args,
            scalars=lambda dims: {})
        if self.spec.call:  # an unchecked op has neither reference nor peer
            ns.reference, ns.peer_returns = self.reference, self.peer_returns
        return ns


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def output_digest(out) -> dict:
    """What an unchecked variant keeps of its output at the fixed seed: the sha256 of its bytes
    (contiguous, on the CPU), its shape, dtype and first values (to say how far it moved)."""
    import torch

    t = out.detach().contiguous().cpu()
    raw = t.reshape(-1).view(torch.uint8)  # bytes as they are (numpy has no bf16)
    flat = t.reshape(-1)[:SAMPLE_VALUES]
    return {"sha256": hashlib.sha256(raw.numpy().tobytes()).hexdigest(), "shape": list(t.shape),
            "dtype": str(t.dtype).replace("torch.", ""),
            "sample": [float(v) for v in (flat.double() if flat.is_floating_point() else flat).tolist()]}


def _wants_grad(inputs: dict) -> bool:
    """Whether any input tensor requires grad (the reference of a backward pass's check)."""
    import torch

    return any(isinstance(v, torch.Tensor) and v.requires_grad for v in inputs.values())
