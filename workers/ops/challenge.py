"""Ops defined by a problem folder in the kernel-challenge format (GPU MODE's reference-kernels,
the AMD developer challenges): `reference.py` holds `generate_input(**keywords) -> data`,
`ref_kernel(data) -> output` and often `check_implementation(data, output)` (a reason string,
"" when right, or a `(passed, reason)` pair); `task.yml` lists `tests:` and `benchmarks:`
(keyword dicts for generate_input, a seed each) and the `files:` the problem's code imports by
name (`task.py` as `task`, `../utils.py` as `utils`); a variant's entry is a submission's
`custom_kernel(data)`, which returns its output.

The folder is read as text on the driver (`pipeline.project.challenge`, nothing runs there)
into a `ChallengeOp`: the keywords of the benchmarks (the shapes, without `seed`) and of the
tests (the check points), and the text of every Python file task.yml lists, which travels with
the variant to the job's child. There `load` makes those files importable under their listed
names (a meta-path finder: `from task import input_t`, `from utils import
make_match_reference` resolve as the challenge's own runner lays the files out) and runs the
problem's code:

- inputs: `generate_input(**keywords, seed=<the check's seed>)` with the job's device as torch's
  default device. Each check draws a fresh seed, as every flopwatch check does; the seeds of
  task.yml are not sizes (two entries differing only in their seed are one shape). A problem
  whose code names the CUDA device itself cannot run on a CPU job: that job is `skipped`
  (`NeedsDevice`), saying so, rather than its code being rewritten to another device.
- the entry gets the data; the reference (`ref_kernel`) and the problem's check get copies made
  before the call, as the challenge's runner hands the submission a clone: data may hold an
  output buffer the kernel writes (`c` of an fp8 GEMM), so writing into it is no fault here.
- verdict: the problem's `check_implementation` where it has one (its reason text kept as the
  diagnostic), else flopwatch's comparison with `ref_kernel`'s output at the dtype's default
  tolerances. flopwatch's own figures (relative error, tile map) are computed either way.
- the peer is `ref_kernel` on the same data, timed the same way.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.abc
import importlib.util
import json
import sys
import types
from dataclasses import dataclass, field

from workers.core.records import Record
from workers.ops.problem import TOLERANCE, flatten_outputs
from workers.ops.repo import HarnessOpNames, OpCodeError

KIND = "challenge"
SEED = "seed"  # the keyword of task.yml entries that is a seed, not a size
REFERENCE = "reference"  # the module of the problem's reference (reference.py)
# Copies of the inputs kept for the reference and the problem's check: a check's, and the
# timed check's, which is judged after the timing loop.
_PRISTINE_KEPT = 3


class NeedsDevice(RuntimeError):
    """The problem's code asked for a device this job does not have (status `skipped`)."""


@dataclass(frozen=True)
class ChallengeOp(HarnessOpNames, Record):
    """A challenge problem folder as the driver read it. `modules`: {module name: {"path":
    repository-relative file, "source": its text}} for every Python file task.yml lists but the
    submission; `dims`: the keywords of an entry without the seed, in task.yml's order;
    `bools`: those whose values are booleans (carried as 0/1 in a shape); `tests` and
    `benchmarks`: the entries' keywords as shapes' dims."""

    name: str
    folder: str  # repository-relative problem folder
    path: str  # repository-relative reference.py: named in every error
    task: str  # the text of task.yml (its lists and files move the op)
    modules: dict = field(default_factory=dict)
    dims: tuple[str, ...] = ()
    bools: tuple[str, ...] = ()
    tests: tuple[dict, ...] = ()
    benchmarks: tuple[dict, ...] = ()
    seeded: bool = True  # generate_input takes `seed`
    checks_itself: bool = False  # reference.py defines check_implementation
    flops_expr: str = ""
    kind: str = KIND
    functions: tuple[str, ...] = ("peer_returns",)
    peer_name: str = ""

    @property
    def INPUTS(self) -> tuple[str, ...]:
        return ("data",)

    @property
    def OUTPUT(self) -> str:
        return "out"

    @property
    def digest(self) -> str:
        """The problem's files as the measurement depends on them: task.yml, every module it
        lists (reference.py, task.py, utils.py one folder up), and the FLOPs expression."""
        texts = {name: m["source"] for name, m in sorted(self.modules.items())}
        return hashlib.sha256(json.dumps([self.task, texts, self.flops_expr], sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: dict) -> ChallengeOp:
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("dims", "bools", "tests", "benchmarks", "functions"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**data)


def is_challenge(repo_op: dict | None) -> bool:
    return bool(repo_op) and repo_op.get("kind") == KIND


def keywords(spec: ChallengeOp, dims: dict) -> dict:
    """generate_input's keywords of a shape: booleans as the task wrote them."""
    return {d: bool(dims[d]) if d in spec.bools else int(dims[d]) for d in spec.dims if d in dims}


def failure(check: dict) -> str:
    """A check the problem's own check_implementation failed, in words ("" otherwise)."""
    own = check.get("problem_check")
    if not own or own["passed"] or check.get("returned"):
        return ""
    reason = " ".join(str(own.get("reason") or "").split()) or "returned False"
    return f"check_implementation ({own['where']}): {reason[:600]}"


# -- in the job's child only ----------------------------------------------------------------------

def load(spec: ChallengeOp) -> types.SimpleNamespace:
    """The problem as an op namespace (the built-in ops' functions), running its code."""
    return _Challenge(spec).namespace()


class _Files(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The modules task.yml lists, by the names it gives them, from the texts the op carries:
    found before anything on sys.path, so `utils` is the problem's and not another package's."""

    def __init__(self, modules: dict):
        self.modules = modules

    def find_spec(self, fullname, path=None, target=None):
        entry = self.modules.get(fullname)
        return importlib.util.spec_from_loader(fullname, self, origin=entry["path"]) if entry else None

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        entry = self.modules[module.__name__]
        module.__file__ = entry["path"]
        exec(compile(entry["source"], entry["path"], "exec"), module.__dict__)  # noqa: S102 - the sandboxed child


def install(modules: dict) -> None:
    """Make the problem's files importable by their names in this process (the entry's
    `from task import input_t` too, which is imported after the op)."""
    for finder in [f for f in sys.meta_path if isinstance(f, _Files)]:
        sys.meta_path.remove(finder)
    for name in modules:
        sys.modules.pop(name, None)  # a module of that name imported before is not the problem's
    sys.meta_path.insert(0, _Files(modules))


class _Inputs(dict):
    """A check's inputs ({"data": what generate_input returned}) and a copy of them made before
    anything ran on them, for the reference and the problem's check."""

    pristine: object = None


def _clone(data):
    """Tensors copied, containers rebuilt, anything else as it is (as the challenge's runner
    copies the data it hands a submission)."""
    import torch

    if isinstance(data, torch.Tensor):
        return data.clone()
    if isinstance(data, tuple):
        return tuple(_clone(x) for x in data)
    if isinstance(data, list):
        return [_clone(x) for x in data]
    if isinstance(data, dict):
        return {k: _clone(v) for k, v in data.items()}
    return data


def _tensors(data) -> list:
    import torch

    if isinstance(data, torch.Tensor):
        return [data]
    if isinstance(data, (tuple, list)):
        return [t for x in data for t in _tensors(x)]
    if isinstance(data, dict):
        return [t for x in data.values() for t in _tensors(x)]
    return []


class _Challenge:
    def __init__(self, spec: ChallengeOp):
        self.spec = spec
        install(spec.modules)
        try:
            module = importlib.import_module(REFERENCE)
        except Exception as exc:
            raise OpCodeError(f"{spec.path}: importing the problem's reference raised {type(exc).__name__}: "
                              f"{exc}") from exc
        self.generate = getattr(module, "generate_input", None)
        self.ref_kernel = getattr(module, "ref_kernel", None)
        self.check = getattr(module, "check_implementation", None)
        for name, fn in (("generate_input", self.generate), ("ref_kernel", self.ref_kernel)):
            if not callable(fn):
                raise OpCodeError(f"{spec.path}: {name} is not a function after importing it")
        self.work: tuple[int, int] | None = None  # (input bytes, output bytes) of the last reference
        self.kept: collections.deque = collections.deque(maxlen=_PRISTINE_KEPT)

    def _what(self, fn: str) -> str:
        return f"problem {self.spec.name!r} ({self.spec.path}): {fn}"

    def _guarded(self, what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except OpCodeError:
            raise
        except Exception as exc:
            raise OpCodeError(f"{self._what(what)} raised {type(exc).__name__}: {exc}") from exc

    def make_inputs(self, dims: dict, dtype, layout: str, device: str, generator) -> dict:
        """generate_input at these keywords and the check's seed, on the job's device (torch's
        default device while it runs); a copy is kept for the reference and the check."""
        import torch

        seed = int(generator.initial_seed())
        kwargs = keywords(self.spec, dims)
        if self.spec.seeded:
            kwargs[SEED] = seed
        call = "generate_input(" + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")"
        torch.manual_seed(seed)
        try:
            with torch.device(device):
                data = self.generate(**kwargs)
        except Exception as exc:
            if device == "cpu" and not torch.cuda.is_available() and "CUDA" in f"{type(exc).__name__}: {exc}":
                raise NeedsDevice(f"{self._what(call)} makes its inputs on the CUDA device, which this CPU job does "
                                  f"not have ({type(exc).__name__}: {str(exc)[:120]}); it runs where a GPU is "
                                  "(devices = [\"cuda\"])") from exc
            raise OpCodeError(f"{self._what(call)} raised {type(exc).__name__}: {exc}") from exc
        inputs = _Inputs(data=data)
        inputs.pristine = _clone(data)
        self.kept.append(inputs)
        return inputs

    @staticmethod
    def _source(inputs: dict):
        pristine = getattr(inputs, "pristine", None)
        return pristine if pristine is not None else inputs["data"]

    def reference(self, inputs: dict, layout: str = "default", *unused):
        """ref_kernel on a copy of the check's inputs as generate_input made them, in the
        problem's own precision; records the bytes one call moves (every tensor of the data,
        the output)."""
        import torch

        with torch.no_grad():
            out = self._guarded("ref_kernel(data)", self.ref_kernel, _clone(self._source(inputs)))
        out = flatten_outputs(out, self._what("ref_kernel(data)"))
        self.work = (sum(t.numel() * t.element_size() for t in _tensors(inputs["data"])),
                     out.numel() * out.element_size())
        return out

    def peer_returns(self, inputs: dict, layout: str = "default"):
        return self._guarded("ref_kernel(data)", self.ref_kernel, inputs["data"])

    def verdict(self, inputs: dict, output) -> tuple[bool, str] | None:
        """The problem's check_implementation on the inputs as made and the entry's output:
        (passed, reason), or None where the problem has no check of its own."""
        if self.check is None:
            return None
        got = self._guarded("check_implementation(data, output)", self.check, self._source(inputs), output)
        if isinstance(got, tuple) and len(got) == 2:  # (passed, reason), the newer form
            return bool(got[0]), str(got[1] or "")
        if isinstance(got, bool):
            return got, ""
        return not got, str(got or "")  # a reason string: "" when right

    def bytes_moved(self, dims: dict, itemsize: int) -> float:
        """Every tensor of the data read and the output written, once the reference ran; 0
        before (the data's sizes are the problem's code's to decide)."""
        return float(sum(self.work)) if self.work is not None else 0.0

    def flops(self, dims: dict) -> float:
        if not self.spec.flops_expr:
            return 0.0
        from workers.core.formula import ExpressionError, evaluate

        try:
            return float(evaluate(self.spec.flops_expr, {d: int(dims[d]) for d in self.spec.dims if d in dims}))
        except ExpressionError as exc:
            raise OpCodeError(f"[challenge] flops of {self.spec.folder}: {exc}") from exc

    def namespace(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            NAME=self.spec.name, INPUTS=("data",), OUTPUT="out", DIMS=self.spec.dims, LAYOUTS=("default",),
            SCALARS=(), TOLERANCE=TOLERANCE, PEER_NAME=self.spec.peer_name, REPO_PATH=self.spec.path,
            RETURNS=True,
            # The data is the entry's own (a copy of it is checked): writing into it is allowed.
            OWN_INPUTS=True,
            # The output is expected in the reference's dtype (a wider float passes, as for a
            # repository's reference): the problem, not the job's dtype label, decides it.
            REFERENCE_DTYPE=True, WIDER_OUTPUT_OK=True,
            make_inputs=self.make_inputs, reference=self.reference, peer_returns=self.peer_returns,
            verdict=self.verdict if self.check is not None else None, flops=self.flops,
            bytes_moved=self.bytes_moved, output_dtype=lambda dtype: dtype, scalars=lambda dims: {},
            VERDICT_WHERE=f"{self.spec.path}")
