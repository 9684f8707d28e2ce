"""An entry's inputs for one call: its leading parameters as a test passes them (through what it
forwards to: a call of `LigerDyTFunction.apply` passes the entry's parameters in the Function's
order), trailing optional ones left to the entry's defaults, checked against the reference's
call; else the parameters of any test's call; else its required parameters, guessed. Then the
`[reference]` rows (`InputRow`) and sizes they make, the constant keywords the test passes, and a
looser rtol the test trusts. Decisions over records."""

from __future__ import annotations

import dataclasses
import re

from pipeline.onboarding.source.pytest_file import ends_with
from pipeline.onboarding.source.records import (
    Arg,
    Calls,
    Comparison,
    Entry,
    Equivalent,
    InputRow,
    Inputs,
    Reference,
)
from pipeline.project.schema import REFERENCE_FLOAT_DTYPES, REFERENCE_INT_DTYPES
from workers.ops.problem import TOLERANCE

# Parameter names of scalars, not tensors (a guess for entries no test calls).
_SCALAR = re.compile(r"^(eps|epsilon|dim|axis|dims|num_\w+|n_\w+|\w+_size|size|stride|padding|dilation|groups|"
                     r"scale|softmax_scale|sm_scale|temperature|p|mode|reduction|\w+_index|\w+_mode|offset|"
                     r"casting_mode|in_place|inplace|causal|training|\w+_eps|alpha_\w+|tmax)$")
_GUESSED_SIZE = 1024
_SIZE_NAMES = ("N", "M", "K", "L", "P", "Q", "R", "S", "T", "U")


def equivalent_for(callee: str, same_as: list[Equivalent]) -> Equivalent:
    """The equivalent a test's call goes through (`LigerDyTFunction.apply`), else the entry itself."""
    return next((e for e in same_as if ends_with(callee, e.callee)), same_as[0])


def from_calls(params, required, same_as, calls: list[Calls]):
    """The inputs of the first test call that gives every argument, else of the first that
    gives the required ones, else None."""
    best = None
    for c in calls:
        inputs = inputs_of(params, required, same_as, c.callee, c.args, c.kwargs, None)
        if inputs is not None:
            inputs = dataclasses.replace(inputs, where=f"{c.file}:{c.line}")
        if inputs is not None and all(i.known for i in inputs.args):
            return inputs
        best = best or inputs
    return best


def inputs_of(params, required, same_as, callee: str, args, kwargs, output_index) -> Inputs | None:
    """The entry's leading parameters as the test passes them (a call of an equivalent passes
    them in its own order: `Equivalent`); None when a required one is missing."""
    if any(a.text.startswith("*") for a in args):
        return None  # spread from something the test does not write out
    equivalent = equivalent_for(callee, same_as)
    by_param = equivalent.params_of(args, kwargs)
    if output_index is not None and args:
        index = output_index % len(args)
        at = equivalent.positional[index] if index < len(equivalent.positional) else ""
        output_index = params.index(at) if at in params else None
        if output_index is None:
            return None
    names = []
    for i, p in enumerate(params):
        if p not in by_param:
            if i < required:
                return None
            break
        names.append(p)
    # a trailing optional argument the test passes as None or as something unread: the entry's
    # own default stands in (an input is a tensor or a constant, never None)
    while len(names) > max(required, 1) and not by_param[names[-1]].known \
            and (output_index is None or output_index < len(names) - 1):
        names.pop()
    if not names or (output_index is not None and output_index >= len(names)):
        return None
    return Inputs(tuple(names), tuple(by_param[n] for n in names), output_index)


def lines_up(inputs: Inputs, c: Comparison) -> bool:
    """Whether the reference takes the entry's inputs (those not written into) in order: its
    positional arguments are the entry's first ones, and what it is given by keyword is the
    entry's next ones under the same names."""
    given = [a for i, a in enumerate(inputs.args) if i != inputs.output]
    names = [n for i, n in enumerate(inputs.names) if i != inputs.output]
    theirs = list(c.other_args)
    if len(theirs) > len(given):
        return False
    for mine, other in zip(given, theirs):
        if not _same(mine, other):
            return False
    for n, a in zip(names[len(theirs):], given[len(theirs):]):
        if n not in c.other_kwargs or not _same(a, c.other_kwargs[n]):
            return False
    return True


def _same(a: Arg, b: Arg) -> bool:
    if a.text == b.text:
        return True
    if a.tensor and b.tensor:
        return a.shape == b.shape and a.dtype == b.dtype
    return a.value is not None and a.value == b.value


def guessed_inputs(params, required, out) -> Inputs:
    """No test calls the entry: its required parameters, tensors by their names' look."""
    names = params[:max(required, params.index(out) + 1 if out else 0)]
    args = []
    for p in names:
        if _SCALAR.match(p) and p != out:
            args.append(Arg(p, value=1e-6 if "eps" in p else 1))
        else:
            args.append(Arg(p, shape=("M", "N"), sizes={"M": _GUESSED_SIZE, "N": _GUESSED_SIZE},
                                       tensor=True))
    return Inputs(tuple(names), tuple(args), names.index(out) if out else None, guessed=True)


def table(inputs: Inputs) -> tuple[dict, list[InputRow], str, str]:
    """(sizes, one row per input, the job's dtype, why a part is a guess): each tensor's
    dimensions named after the test's sizes, a number the test writes a size of its own (equal
    numbers one size), a dimension that is neither a guessed size."""
    sizes: dict[str, int] = {}
    by_value: dict[int, str] = {}
    rows, why = [], ""
    dtypes = [a.dtype for a in inputs.args if a.tensor and a.dtype in ("fp32", "fp16", "bf16")]
    for a in inputs.args:
        for k, v in a.sizes.items():
            sizes.setdefault(k, v)
    for i, (n, a) in enumerate(zip(inputs.names, inputs.args)):
        if a.tensor:  # shape [] is a 0-d tensor
            shape = []
            for d in a.shape:
                if isinstance(d, str) and d in sizes:
                    shape.append(d)
                    continue
                if not (type(d) is int):
                    why = why or f"{n}'s dimension {d!r} is not a size the test names"
                    d = _GUESSED_SIZE
                if d not in by_value:  # a number the test writes: a size of its own, shared by equal ones
                    size = next(s for s in _SIZE_NAMES + tuple(f"N{j}" for j in range(64))
                                if s not in sizes)
                    sizes[size] = d
                    by_value[d] = size
                shape.append(by_value[d])
            dtype, high = "", None
            if a.dtype in REFERENCE_FLOAT_DTYPES and dtypes and a.dtype != dtypes[0]:
                dtype = a.dtype  # the test makes it so, whatever the others' dtype
            if a.dtype in REFERENCE_INT_DTYPES:
                dtype = a.dtype
                if a.dtype != "bool":
                    high = min((v for v in sizes.values() if v >= 2), default=2)
            rows.append(InputRow(n, tuple(shape), dtype, high, i == inputs.output))
        elif a.value is not None and isinstance(a.value, (bool, int, float, str)):
            rows.append(InputRow(n, value=a.value))
        elif _SCALAR.match(n):  # `padding=K // 2`: a scalar the test computes
            why = why or f"{n} ({a.text}) is not a constant flopwatch can read in the test"
            rows.append(InputRow(n, value=1e-6 if "eps" in n else 1))
        else:
            why = why or f"{n} ({a.text}) is not a tensor or constant flopwatch can read in the test"
            sizes.setdefault("M", _GUESSED_SIZE)
            sizes.setdefault("N", _GUESSED_SIZE)
            rows.append(InputRow(n, ("M", "N"), output=i == inputs.output))
    return sizes, rows, (dtypes[0] if dtypes else ""), why


def keywords(entry: Entry, ref: Reference, inputs: Inputs) -> tuple[dict, dict]:
    """The constant keyword arguments the comparing test passes beyond the inputs: the entry's
    (`allow_fp32=...`, `**cfg`), which the job passes too (binding.kwargs), and a named
    reference's (`mhc_coeffs_ref(..., **cfg)`: reference.kwargs)."""
    c = ref.comparison
    if c is None:
        return {}, {}
    accepted = {*entry.params, *entry.keywords}

    def constants(kwargs: dict, allowed) -> dict:
        return {k: a.value for k, a in kwargs.items() if k not in inputs.names and allowed(k)
                and isinstance(a.value, (bool, int, float, str)) and not a.tensor}

    entry = constants(c.entry_kwargs, lambda k: k in accepted or entry.any_keywords)
    other = {} if ref.sliced else constants(c.other_kwargs, lambda k: True)
    return entry, other


def looser_rtol(ref: Reference, dtype: str) -> tuple[float, float] | None:
    """(the comparing test's rtol, flopwatch's default for the dtype) where the test allows more:
    the repository trusts its kernel to that bound (Liger's fp32 attention, 5e-3 with TF32
    dots); None otherwise."""
    c = ref.comparison
    rtol = (c.tolerance if c is not None else {}).get("rtol")
    default = TOLERANCE.get(dtype, (None,))[0]
    if rtol is None or default is None or rtol <= default:
        return None
    return rtol, default
