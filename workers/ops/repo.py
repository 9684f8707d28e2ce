"""Ops declared in the benchmarked repository: an `op.py` next to its kernels, with the same
contract as the built-in ops (`workers/ops/gemm.py`; docs/ops.md lists it).

The module is the repository's code, so it is treated like the kernels: the driver never
imports it. `parse_op` reads it as text (Python's `ast`) and checks the contract statically —
the constants are literals, the functions exist and take the arguments flopwatch passes — so a
broken op is an `invalid` row with the file, the name and what is wrong before anything runs.
The functions run only inside the job's sandboxed child (`load`), where an exception they raise
becomes `OpCodeError` (status `invalid`), not a crash of the kernel under test.
"""

from __future__ import annotations

import ast
import hashlib
import re
import types
from dataclasses import dataclass

from workers.core.records import Record

FILE_NAME = "op.py"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# function name → (positional arguments flopwatch passes, what they are)
REQUIRED_FUNCTIONS = {
    "flops": (1, "dims"),
    "bytes_moved": (2, "dims, itemsize"),
    "output_shape": (1, "dims"),
    "make_inputs": (5, "dims, dtype, layout, device, generator"),
    "reference": (2, "inputs, layout[, alpha, beta, c_init]"),
}
OPTIONAL_FUNCTIONS = {
    "peer": (2, "inputs, out, layout[, alpha, beta]"),
    "peer_returns": (2, "inputs, layout"),
    "output_dtype": (1, "dtype"),
    "scalars": (1, "dims"),
    "c_args": (6, "inputs, out, dims, alpha, beta, alpha_beta"),
    "tensor_args": (2, "inputs, out"),
}
DTYPE_NAMES = ("fp32", "fp16", "bf16")


class OpDefinitionError(ValueError):
    """An `op.py` breaks the contract; `str()` is `<file>: <name>: <what is wrong>`."""

    def __init__(self, path: str, key: str, message: str):
        self.path, self.key = path, key
        super().__init__(f"{path}: {key}: {message}")


class OpCodeError(RuntimeError):
    """A function of a repository op raised while a job ran it (status `invalid`)."""


class HarnessOpNames:
    """The op-module names DIMS, LAYOUTS and SCALARS of an op a harness defines (a KernelBench
    problem, a `[reference]` table, a challenge problem): its own `dims`, the one default
    layout, no scalars — so validation code reads them as it reads a built-in op module."""

    @property
    def DIMS(self) -> tuple[str, ...]:
        return self.dims

    @property
    def LAYOUTS(self) -> tuple[str, ...]:
        return ("default",)

    @property
    def SCALARS(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True)
class RepoOp(Record):
    """A repository op as the driver knows it: the literal constants of its module and its
    source text (which travels to the job's child with the variant, like a kernel's source)."""

    name: str
    path: str  # repository-relative path of the module
    source: str
    inputs: tuple[str, ...]
    output: str
    dims: tuple[str, ...]
    tolerance: dict
    layouts: tuple[str, ...] = ("default",)
    scalar_names: tuple[str, ...] = ()
    peer_name: str = ""
    functions: tuple[str, ...] = ()

    # The names a built-in op module exposes, so validation code reads both alike.
    @property
    def INPUTS(self) -> tuple[str, ...]:
        return self.inputs

    @property
    def OUTPUT(self) -> str:
        return self.output

    @property
    def DIMS(self) -> tuple[str, ...]:
        return self.dims

    @property
    def LAYOUTS(self) -> tuple[str, ...]:
        return self.layouts

    @property
    def SCALARS(self) -> tuple[str, ...]:
        return self.scalar_names

    @property
    def has_peer(self) -> bool:
        return "peer" in self.functions or "peer_returns" in self.functions

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: dict) -> RepoOp:
        data = dict(data)
        for key in ("inputs", "dims", "layouts", "scalar_names", "functions"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def parse_op(path: str, source: str, default_name: str, builtin_names: tuple[str, ...] = ()) -> RepoOp:
    """Check `source` (the text of `path`) against the op contract without running it."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise OpDefinitionError(path, "(syntax)", f"line {exc.lineno}: {exc.msg}") from None
    constants: dict[str, object] = {}
    functions: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        targets = _assigned_names(node)
        for name in targets:
            if name.isupper():
                constants[name] = _literal(path, name, node)
    name = constants.get("NAME", default_name)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise OpDefinitionError(path, "NAME", f"{name!r} is not an op name: lower-case letters, digits and _, "
                                              "starting with a letter, at most 40 characters")
    if name in builtin_names:
        raise OpDefinitionError(path, "NAME", f"{name!r} is a built-in op; give the repository's op another name")
    inputs = _names(path, "INPUTS", constants, required=True)
    output = constants.get("OUTPUT")
    if not isinstance(output, str) or not _IDENT.fullmatch(output):
        raise OpDefinitionError(path, "OUTPUT", "missing or not a name: the output tensor's name, e.g. \"Y\"")
    dims = _names(path, "DIMS", constants, required=True)
    layouts = _names(path, "LAYOUTS", constants, required=False) or ("default",)
    scalar_names = _names(path, "SCALARS", constants, required=False)
    everything = [*inputs, output, *dims, *scalar_names, "alpha", "beta"]
    clash = sorted({n for n in everything if everything.count(n) > 1})
    if clash:
        raise OpDefinitionError(path, "INPUTS/OUTPUT/DIMS/SCALARS", f"{clash} used twice (alpha and beta are taken)")
    tolerance = _tolerance(path, constants.get("TOLERANCE"))
    for fname, (count, what) in {**REQUIRED_FUNCTIONS, **OPTIONAL_FUNCTIONS}.items():
        node = functions.get(fname)
        if node is None:
            if fname in REQUIRED_FUNCTIONS:
                raise OpDefinitionError(path, fname, f"missing: def {fname}({what})")
            continue
        if not _accepts(node, count):
            raise OpDefinitionError(path, fname, f"must accept {count} positional argument(s): ({what})")
    if scalar_names and "scalars" not in functions:
        raise OpDefinitionError(path, "scalars", "SCALARS is declared: def scalars(dims) must return their values")
    peer_name = constants.get("PEER_NAME", "")
    if not isinstance(peer_name, str):
        raise OpDefinitionError(path, "PEER_NAME", "must be a string naming the peer, e.g. \"torch.nn.functional.gelu\"")
    if ("peer" in functions or "peer_returns" in functions) and not peer_name:
        peer_name = f"{name}.peer"
    return RepoOp(name=name, path=path, source=source, inputs=inputs, output=output, dims=dims,
                  tolerance=tolerance, layouts=layouts, scalar_names=scalar_names, peer_name=peer_name,
                  functions=tuple(sorted(f for f in functions if f in {**REQUIRED_FUNCTIONS, **OPTIONAL_FUNCTIONS})))


def _assigned_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return [node.target.id]
    return []


def _literal(path: str, name: str, node: ast.stmt):
    try:
        return ast.literal_eval(node.value)
    except ValueError:
        if name in ("NAME", "INPUTS", "OUTPUT", "DIMS", "LAYOUTS", "SCALARS", "TOLERANCE", "PEER_NAME"):
            raise OpDefinitionError(path, name, "must be a literal (strings, numbers, tuples, lists, dicts): "
                                                "flopwatch reads it without running the module") from None
        return None


def _names(path: str, key: str, constants: dict, required: bool) -> tuple[str, ...]:
    value = constants.get(key)
    if value is None:
        if required:
            raise OpDefinitionError(path, key, "missing: a tuple of names")
        return ()
    if (not isinstance(value, (tuple, list)) or not value
            or not all(isinstance(v, str) and _IDENT.fullmatch(v) for v in value)):
        raise OpDefinitionError(path, key, f"must be a non-empty tuple of names, got {value!r}")
    return tuple(value)


def _tolerance(path: str, value) -> dict:
    if not isinstance(value, dict) or not value:
        raise OpDefinitionError(path, "TOLERANCE", "missing: {dtype: (rtol, atol)}, e.g. {\"fp32\": (1e-5, 1e-4)}")
    out = {}
    for dtype, pair in value.items():
        if dtype not in DTYPE_NAMES:
            raise OpDefinitionError(path, "TOLERANCE", f"{dtype!r} is not one of {list(DTYPE_NAMES)}")
        if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in pair)):
            raise OpDefinitionError(path, "TOLERANCE", f"{dtype}: {pair!r} is not (rtol, atol), two numbers ≥ 0")
        out[dtype] = (float(pair[0]), float(pair[1]))
    return out


def _accepts(node: ast.FunctionDef, count: int) -> bool:
    args = node.args
    return bool(args.vararg) or len(args.posonlyargs) + len(args.args) >= count


# -- in the job's child only ----------------------------------------------------------------------

def load(spec: RepoOp) -> types.SimpleNamespace:
    """Run the module's source and give it the built-in ops' shape: the constants, its functions
    guarded (an exception names the op, the function and the file), defaults for the optional
    ones (output in the input dtype; tensors passed as inputs then output)."""
    module = types.ModuleType(f"flopwatch_op_{spec.name}")
    module.__file__ = spec.path
    try:
        exec(compile(spec.source, spec.path, "exec"), module.__dict__)  # noqa: S102 - the sandboxed child
    except Exception as exc:
        raise OpCodeError(f"{spec.path}: importing the op raised {type(exc).__name__}: {exc}") from exc
    op = types.SimpleNamespace(
        NAME=spec.name, INPUTS=spec.inputs, OUTPUT=spec.output, DIMS=spec.dims, LAYOUTS=spec.layouts,
        SCALARS=spec.scalar_names, TOLERANCE=_DtypeTable(spec.path, spec.tolerance),
        PEER_NAME=spec.peer_name, REPO_PATH=spec.path)
    for fname in (*REQUIRED_FUNCTIONS, *OPTIONAL_FUNCTIONS):
        fn = getattr(module, fname, None)
        if fn is not None:
            setattr(op, fname, _guarded(spec, fname, fn))
    if not hasattr(op, "output_dtype"):
        op.output_dtype = lambda dtype: dtype
    if not hasattr(op, "scalars"):
        op.scalars = lambda dims: {}
    if not hasattr(op, "tensor_args"):
        op.tensor_args = lambda inputs, out: (*(inputs[n] for n in spec.inputs), out)
    if not hasattr(op, "c_args"):
        op.c_args = _default_c_args(spec, op)
    return op


class _DtypeTable(dict):
    """TOLERANCE that names the op's file when a dtype has no entry."""

    def __init__(self, path: str, table: dict):
        super().__init__(table)
        self.path = path

    def __missing__(self, dtype: str):
        raise OpCodeError(f"{self.path}: TOLERANCE has no entry for {dtype} (has {sorted(self)})")


def _guarded(spec: RepoOp, fname: str, fn):
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except OpCodeError:
            raise
        except Exception as exc:
            raise OpCodeError(f"op {spec.name!r} ({spec.path}): {fname}() raised {type(exc).__name__}: {exc}") from exc

    call.__name__ = fname
    return call


def _default_c_args(spec: RepoOp, op):
    """(inputs…, output, dims… as int, scalars… as float[, alpha, beta]) for an extern "C" entry."""
    import ctypes

    def c_args(inputs, out, dims, alpha, beta, alpha_beta):
        args = [ctypes.c_void_p(inputs[n].data_ptr()) for n in spec.inputs] + [ctypes.c_void_p(out.data_ptr())]
        args += [ctypes.c_int(int(dims[d])) for d in spec.dims]
        values = op.scalars(dims)
        args += [ctypes.c_float(float(values[s])) for s in spec.scalar_names]
        if alpha_beta:
            args += [ctypes.c_float(alpha), ctypes.c_float(beta)]
        return args

    return c_args
