"""The sizes a draft measures at, in the op's dimensions: each op's default shape and the axes of
its tensors (to read sizes off tensors a script makes or a test passes); the sizes a launching
script uses (through the kernel's argument list, by name, or off the tensors it passes); an
entry's sizes from a test's call, a row-wise op's leading dimensions folded into its rows.

Where a repository keeps the sizes it benchmarks at — a `triton.testing.Benchmark` sweep, a
benchmark script's loop, a problem's `benchmarks:` list — a reader gives a `Sweep`
(`source.records`); the sizes of a draft are then taken from the sweeps that call its entry
(`conventions.found(repo, Sweep, files)`), ahead of those of its tests. Decisions over records."""

from __future__ import annotations

from pipeline.onboarding.decide.arguments import ALIASES, args_per_param, norm_name
from pipeline.onboarding.decide.dtypes import default_dtype, dtype_of
from pipeline.onboarding.decide.evidence import tensors_passed
from pipeline.onboarding.decide.inputs import equivalent_for
from pipeline.onboarding.source.records import (
    Calls,
    Entry,
    Equivalent,
    Evidence,
    Kernel,
    Reference,
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


def builtin_sizes(repo, entry: Entry, ref: Reference, same_as: list[Equivalent], calls: list[Calls],
                  backend: str) -> tuple[list, str, list[str]]:
    """(shapes, dtype, the fields that are guesses) of an entry drafted as a built-in op: from a
    test's call, else from the tensors the scripts calling it make, else the op's default."""
    op = ref.op
    module = OPS[op]
    shapes, dtype, made = op_shape_from_tests(entry, ref, same_as, calls)
    if not shapes:  # the scripts that call it, as for kernels
        made = tensors_passed(repo, (entry.name,), len(module.INPUTS))
        dtype, _ = dtype_of(made, default_dtype(backend))
        shapes = shape_of(made, op)
    dtype = dtype or default_dtype(backend)
    guessed = [] if made and shapes else ["shapes"] + ([] if made else ["dtypes"])
    default = DEFAULT_SHAPES.get(op) or [list(getattr(module, "DEFAULT_SHAPE", ())) or [4096, 4096]]
    return shapes or default, dtype, guessed
