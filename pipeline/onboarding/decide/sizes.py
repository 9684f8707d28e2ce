"""The sizes a draft measures at, in the op's dimensions: each op's default shape and the axes of
its tensors (to read sizes off tensors a script makes or a test passes); the sizes a launching
script uses (through the kernel's argument list, by name, or off the tensors it passes); an
entry's sizes from a test's call, a row-wise op's leading dimensions folded into its rows.

Where a repository keeps the sizes it benchmarks at — a `triton.testing.Benchmark` sweep, a
benchmark script's loop, a script's calls recorded as it ran — a `Sweep` (`source.records`)
gives them; a built-in op's draft takes the sweeps that call its entry (`builtin_sizes`, through
`decide.bench_sizes`), else its test's sizes scaled by the rule (`decide.scaling`), the test's
own then a check point. Decisions over records."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from pipeline.onboarding.decide.arguments import ALIASES, args_per_param, norm_name
from pipeline.onboarding.decide.bench_sizes import concrete_calls, label, pick
from pipeline.onboarding.decide.dtypes import default_dtype, dtype_of
from pipeline.onboarding.decide.evidence import tensors_passed
from pipeline.onboarding.decide.inputs import equivalent_for
from pipeline.onboarding.decide.scaling import Target, itemsize, scaled_builtin, token_like
from pipeline.onboarding.source.records import (
    Calls,
    Entry,
    Equivalent,
    Evidence,
    Kernel,
    Reference,
    Sweep,
    TensorMade,
)
from workers.ops import OPS

DEFAULT_SHAPES = {"gemm": [[4096, 4096, 4096]], "attention": [[4, 16, 1024, 64]],
                  "attention_causal": [[4, 16, 1024, 64]], "softmax": [[4096, 4096]], "copy": [[67108864]],
                  "rms_norm": [[4096, 4096]], "swiglu": [[4096, 4096]]}
# The dimensions of each op's tensors, axis by axis (gemm's B by layout; copy is flat: n is the
# element count), to read sizes off tensors a script makes or a host wrapper is given.
TENSOR_DIMS: dict[str, dict[str, tuple[str, ...]]] = {
    "gemm": {"A": ("M", "K"), "B:nt": ("N", "K"), "B:nn": ("K", "N"), "C": ("M", "N")},
    "attention": {t: ("B", "H", "S", "D") for t in ("Q", "K", "V", "O")},
    "softmax": {"X": ("M", "N"), "Y": ("M", "N")},
    "copy": {"src": ("n",), "dst": ("n",)},
    "rms_norm": {"X": ("M", "N"), "W": ("N",), "Y": ("M", "N")},
    "swiglu": {"A": ("M", "N"), "B": ("M", "N"), "Y": ("M", "N")},
}
TENSOR_DIMS["attention_causal"] = TENSOR_DIMS["attention"]
# The ops of LLM blocks (docs/ops.md): sizes as Llama-class models use them (a 4096 hidden size,
# a 32000 vocabulary, Llama-3-8B's heads) and their tensors' axes (outputs of two tensors, which
# are checked flattened, and the rope tables, whose first axis is 1, have none to read).
_ROWS = {"X": ("M", "N"), "Y": ("M", "N")}
DEFAULT_SHAPES.update({op: [[4096, 4096]] for op in ("layer_norm", "fused_add_rms_norm", "poly_norm", "dyt", "gelu",
                                                      "geglu", "silu", "relu_squared", "log_softmax", "sparsemax")})
DEFAULT_SHAPES.update({op: [[4096, 32000]] for op in ("cross_entropy", "kl_div", "jsd", "tvd")})
DEFAULT_SHAPES.update({"group_norm": [[16, 48, 8192, 12]], "rope": [[4, 32, 8, 2048, 128]]})
# The loss heads at M = 4096 tokens of a Llama-class model (H 4096, V 32000); modulated_rms_norm
# as a DiT/Flux block's (4 samples of 1024 tokens, hidden 4096: 4096 rows, as rms_norm's).
DEFAULT_SHAPES.update({op: [[4096, 4096, 32000]] for op in ("fused_linear_cross_entropy", "fused_linear_jsd")})
DEFAULT_SHAPES["modulated_rms_norm"] = [[4, 1024, 4096]]
# Elementwise arithmetic: one vector of 2^24 elements (64 MiB in fp32), long enough to time.
DEFAULT_SHAPES.update({op: [[1 << 24]] for op in ("elementwise_add", "elementwise_mul")})
TENSOR_DIMS.update({op: {"A": ("N",), "B": ("N",), "Y": ("N",)} for op in ("elementwise_add", "elementwise_mul")})
TENSOR_DIMS.update({op: _ROWS for op in ("gelu", "silu", "relu_squared", "log_softmax", "sparsemax", "poly_norm")})
TENSOR_DIMS.update({
    "layer_norm": {**_ROWS, "W": ("N",), "B": ("N",)},
    "group_norm": {"X": ("M", "C", "N"), "Y": ("M", "C", "N"), "W": ("C",), "B": ("C",)},
    "fused_add_rms_norm": {"X": ("M", "N"), "R": ("M", "N"), "W": ("N",)},
    "dyt": {**_ROWS, "Gamma": ("N",), "Beta": ("N",)},
    "geglu": {"A": ("M", "N"), "B": ("M", "N"), "Y": ("M", "N")},
    "cross_entropy": {"input": ("M", "V"), "target": ("M",)},
    **{op: {"input": ("M", "V"), "target": ("M", "V")} for op in ("kl_div", "jsd", "tvd")},
    "rope": {"q": ("B", "H", "S", "D"), "k": ("B", "HKV", "S", "D")},
    "fused_linear_cross_entropy": {"input": ("M", "H"), "weight": ("V", "H"), "target": ("M",)},
    "fused_linear_jsd": {"student_input": ("M", "H"), "student_weight": ("V", "H"), "teacher_input": ("M", "H"),
                         "teacher_weight": ("V", "H")},
    "modulated_rms_norm": {"X": ("B", "T", "N"), "Y": ("B", "T", "N"), "W": ("N",), "scale": ("B", "N"),
                           "shift": ("B", "N")},
})
MAX_SCRIPT_SHAPES = 4  # shapes taken from a script's sweep: enough to see a trend, cheap to run


def tensor_axes(op: str, tensor: str, layout: str = "") -> tuple[str, ...]:
    """The op dimension of each axis of one of its tensors (gemm's B by layout), () if unknown."""
    table = TENSOR_DIMS.get(op, {})
    return table.get(f"{tensor}:{layout or 'nt'}", table.get(tensor, ()))


def script_shapes(op: str, kernel: Kernel, args: tuple[str | None, ...], layout: str,
                  evidence: Evidence) -> list[list[int]]:
    """The shapes the launching script uses, in the op's dimensions: each dimension's values
    from the script's sizes passed as it (through the argument list), named like it, or read
    off the tensors passed as the op's tensors; [] unless every dimension gets one (a square
    kernel's missing dimensions take the values of the one it has)."""
    if not evidence.script:
        return []
    dims = OPS[op].DIMS
    per_param = args_per_param(kernel, args)
    values: dict[str, list[int]] = {}
    made = {t.name: t for t in evidence.tensors if t.name}
    passed = list(zip(evidence.call_args, per_param))
    for text, op_arg in passed:  # tensors first: their shapes are the sizes as used
        tensor = made.get(text.strip())
        axes = tensor_axes(op, op_arg or "", layout) if tensor else ()
        if tensor and len(axes) == len(tensor.shape):
            for dim, size in zip(axes, tensor.shape):
                if isinstance(size, int) and size > 0:
                    values.setdefault(dim, [size])
            continue
        if tensor and axes == ("n",) and all(isinstance(s, int) for s in tensor.shape):
            count = 1
            for s in tensor.shape:
                count *= s
            values.setdefault("n", [count])
    for text, op_arg in passed:
        if op_arg in dims and op_arg not in values:
            key = text.strip()
            found = evidence.sizes.get(key) or evidence.sizes.get(key.rsplit(".", 1)[-1])
            if found:
                values[op_arg] = list(found)
    for name, found in evidence.sizes.items():
        dim = next((d for d in dims if name == d or norm_name(name) in ALIASES[op].get(d, ())), None)
        if dim and dim not in values and found:
            values[dim] = list(found)
    missing = [d for d in dims if d not in values]
    taken = [values[d] for d in dims if d in values]
    if missing and taken and all(v == taken[0] for v in taken) and all(d not in args for d in missing):
        for d in missing:
            values[d] = taken[0]
    if any(d not in values for d in dims):
        return []
    count = min(max(len(values[d]) for d in dims), MAX_SCRIPT_SHAPES)
    return [[values[d][min(i, len(values[d]) - 1)] for d in dims] for i in range(count)]


def shape_of(made: list[TensorMade], op: str) -> list[list[int]]:
    """The op's sizes from the first input tensor a script makes, where its rank fits the op."""
    dims = OPS[op].DIMS if op in OPS else ()
    for t in made:
        if all(isinstance(d, int) for d in t.shape):
            shape = [int(d) for d in t.shape]
            if op in ("attention", "attention_causal") and len(shape) == 4:
                return [shape]
            if tuple(dims) in (("M", "N"), ("M", "V")) and len(shape) >= 2:  # row-wise ops: rows × last dim
                rows = 1
                for d in shape[:-1]:
                    rows *= d
                return [[rows, shape[-1]]]
            if op == "copy" and shape:
                n = 1
                for d in shape:
                    n *= d
                return [[n]]
            if op == "gemm" and len(shape) == 2 and len(dims) == 3:
                other = next((u for u in made[1:] if len(u.shape) == 2 and all(isinstance(d, int) for d in u.shape)),
                             None)
                if other is not None:
                    return [[shape[0], other.shape[0] if other.shape[1] == shape[1] else other.shape[1], shape[1]]]
    return []


def op_shape_from_tests(entry: Entry, ref: Reference, same_as: list[Equivalent],
                        calls: list[Calls]) -> tuple[list, str, list]:
    """The op's sizes and dtype from a test's call of the entry: each tensor argument's
    dimensions read as the op's axes for that input (`TENSOR_DIMS`), a row-wise op's
    leading dimensions folded into its rows. ([], "", []) when no call gives every axis."""
    params = entry.params
    op = ref.op
    axes = TENSOR_DIMS.get(op, {})
    dims = OPS[op].DIMS
    for c in calls:
        equivalent = equivalent_for(c.callee, same_as)
        by_param = equivalent.params_of(c.args, c.kwargs)
        made, found = [], {}
        for p, arg in zip(params, ref.mapped):
            a = by_param.get(p)
            if a is None or not a.tensor or not a.shape:
                continue
            shape = [d if type(d) is int else a.sizes.get(d) for d in a.shape]
            if None in shape:
                continue
            made.append(TensorMade(p, tuple(shape), a.dtype, True, "", c.line))
            wanted = axes.get(arg, ())
            if len(wanted) == len(shape):
                for axis, value in zip(wanted, shape):
                    found.setdefault(axis, value)
            elif len(wanted) == 2 and len(shape) > 2 and tuple(wanted) == tuple(dims[:2]):
                rows = 1
                for d in shape[:-1]:
                    rows *= d
                found.setdefault(wanted[0], rows)
                found.setdefault(wanted[1], shape[-1])
        dtypes = [t.dtype for t in made if t.dtype in ("fp32", "fp16", "bf16")]
        if made and all(d in found for d in dims):
            return [[found[d] for d in dims]], (dtypes[0] if dtypes else ""), made
        folded = shape_of(made, op)
        if folded:
            return folded, (dtypes[0] if dtypes else ""), made
    return [], "", []


@dataclass(frozen=True)
class Sized:
    """A draft's timed shapes, their dtype, the fields that are guesses, where the shapes come
    from in words (`label`), and the test's own shapes, checked beside them (`check`, read at
    `check_where`)."""

    shapes: list
    dtype: str
    guessed: list
    label: str = ""
    check: list = field(default_factory=list)
    check_where: str = ""


def builtin_sizes(repo, entry: Entry, ref: Reference, same_as: list[Equivalent], calls: list[Calls],
                  backend: str, sweeps: list[Sweep] = (), goal: Target | None = None, note: str = "") -> Sized:
    """The shapes, dtype and guessed fields of an entry drafted as a built-in op: from the
    sweeps that call it (a benchmark of the repository, `decide.bench_sizes`), else a test's
    call scaled by the rule (`decide.scaling`, toward `goal`), else the tensors the scripts
    calling it make, else the op's default. The test's shape is a check point where the timed
    ones are others. `note`: why a script that reaches the entry gave no sizes."""
    op = ref.op
    module = OPS[op]
    shapes, dtype, made, where, used = [], "", [], "", None
    for c in calls:
        shapes, dtype, made = op_shape_from_tests(entry, ref, same_as, [c])
        if shapes:
            where, used = f"{c.file}:{c.line}", c
            break
    if not shapes:  # the scripts that call it, as for kernels
        made = tensors_passed(repo, (entry.name,), len(module.INPUTS))
        dtype, _ = dtype_of(made, default_dtype(backend))
        shapes = shape_of(made, op)
    dtype = dtype or default_dtype(backend)
    guessed = [] if made and shapes else ["shapes"] + ([] if made else ["dtypes"])
    taken = _from_sweeps(entry, ref, same_as, sweeps)
    if taken is not None:
        found, found_dtype, label = taken
        guessed = [g for g in guessed if g != "shapes" and not (g == "dtypes" and found_dtype)]
        return Sized(found, found_dtype or dtype, guessed, label,
                     [s for s in shapes if s not in found] if where else [], where)
    prefix = f"{note}; " if note else ""
    if shapes and where and goal is not None:
        grown, why, stop = _scaled(entry, ref, same_as, used, shapes[0], dtype, goal)
        if grown != shapes[0]:
            return Sized([grown], dtype, guessed, f"{prefix}scaled from {where}: {why}; {stop}", shapes, where)
        return Sized(shapes, dtype, guessed, f"{prefix}the test's own sizes, {where} (not scaled: {stop})")
    if shapes:
        return Sized(shapes, dtype, guessed, f"{prefix}the tensors a script calling {entry.name} makes")
    default = DEFAULT_SHAPES.get(op) or [list(getattr(module, "DEFAULT_SHAPE", ())) or [4096, 4096]]
    return Sized(default, dtype, guessed, f"{prefix}the op's default sizes (nothing of the repository sizes a call)")


def _scaled(entry: Entry, ref: Reference, same_as: list[Equivalent], call: Calls, shape: list[int], dtype: str,
            goal: Target) -> tuple[list[int], str, str]:
    """The test call's shape grown by the rule (`decide.scaling`) in the op's dims: those with a
    batch- or token-like name (`M`, `B`, `S`) and those a size the test varies or names batch-
    or token-like feeds (`bs`, `sl` fold into M; the varied `hd` is N). (shape, what grew and
    why, why it stopped)."""
    module = OPS[ref.op]
    tensors = [a for a in (*call.args, *call.kwargs.values()) if a.tensor]
    sizes = {n: v for a in tensors for n, v in a.sizes.items()}
    varied = {n for a in tensors for n in a.varied}

    def at(values: dict) -> list[int]:
        def moved(a):
            return dataclasses.replace(a, sizes={n: values.get(n, v) for n, v in a.sizes.items()})
        grown = dataclasses.replace(call, args=tuple(moved(a) if a.tensor else a for a in call.args),
                                    kwargs={k: moved(a) if a.tensor else a for k, a in call.kwargs.items()})
        found, _, _ = op_shape_from_tests(entry, ref, same_as, [grown])
        return found[0] if found else shape

    fed: dict[str, set[str]] = {d: set() for d in module.DIMS}
    for name, value in sizes.items():  # which of the op's dims each size of the test feeds
        for d, before, after in zip(module.DIMS, shape, at({**sizes, name: value * 2})):
            if before != after:
                fed[d].add(name)
    by_test = {d: sorted(n for n in names if n in varied or token_like(n)) for d, names in fed.items()}
    return scaled_builtin(module, shape, dtype, goal, {d: ns for d, ns in by_test.items() if ns})


def _from_sweeps(entry: Entry, ref: Reference, same_as: list[Equivalent],
                 sweeps: list[Sweep]) -> tuple[list, str, str] | None:
    """(shapes in the op's dims, dtype, where from) of the sweeps' calls of the entry."""
    module = OPS[ref.op]
    found: dict[tuple, tuple[Sweep, str]] = {}
    for s, by_param in concrete_calls(list(sweeps), same_as):
        call = Calls(s.file, s.line, "", (), by_param, entry.name)
        itself = [Equivalent((entry.name,), (), {p: p for p in by_param})]
        shapes, dtype, _ = op_shape_from_tests(entry, ref, itself, [call])
        if shapes:
            found.setdefault(tuple(shapes[0]), (s, dtype))

    def work(shape: tuple) -> float:
        return module.bytes_moved(dict(zip(module.DIMS, shape)), itemsize(found[shape][1] or "fp32"))

    kept = pick(list(found), work)
    if not kept:
        return None
    dtype = next((found[k][1] for k in reversed(kept) if found[k][1]), "")
    return [list(k) for k in kept], dtype, label([found[k][0] for k in kept])
