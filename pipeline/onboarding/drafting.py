"""Draft a `variant.toml` for a kernel found in a source file (`flopwatch new`, `flopwatch init`).

From the kernel's signature: which op it computes (names and parameter kinds matched against
each op's arguments), its dtype (the inputs' element type), gemm's layout (how the kernel
indexes B). From the kernel's launch in the repository's host code or Python scripts, if there
is one: grid, block and template arguments, in the op's sizes. From the scripts that launch it
(or call the module function): the dtype when the element type does not tell, and the sizes
to measure.

Every draft is a manifest that loads: what cannot be told is flopwatch's best guess, written
with a `# TODO (guess): why` comment on its line, named in `Draft.guessed` and listed as still
needing the user's hand (`flopwatch new` prints both). An op that no signature fits exactly is
the op whose arguments match best (or, with nothing to go on, the kernel's pointers as a copy);
parameters that are no op argument are left out of `binding.args`, and the draft says the
kernel cannot be launched as it is.

The draft goes into a folder of its own with a small source that includes the kernel's file
(and instantiates a template kernel at the launch's arguments); the kernel's folder becomes a
shared include folder of `flopwatch.toml`, so nothing of the user's code is copied. Pure
functions over `pipeline.onboarding.kernel_scan` and `pipeline.onboarding.python_scan` records and text.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import PurePosixPath

from pipeline.onboarding.source.c_text import split_top
from pipeline.onboarding.source.records import Draft, Evidence, Guess, Kernel, Launch, PyLaunch
from workers.core.formula import ExpressionError
from workers.ops import OPS
from workers.toolkit import launch_expr

DTYPE_OF = {
    "float": "fp32", "float32_t": "fp32",
    "__half": "fp16", "half": "fp16", "_Float16": "fp16", "__fp16": "fp16", "half_t": "fp16", "fp16_t": "fp16",
    "float16_t": "fp16", "hip_half": "fp16", "__hip_half": "fp16",
    "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16", "__hip_bfloat16": "bf16", "hip_bfloat16": "bf16",
    "__bf16": "bf16", "bfloat16": "bf16", "bf16_t": "bf16", "bfloat16_t": "bf16",
}
INT_TYPES = ("int", "unsigned int", "unsigned", "uint", "uint32_t", "int32_t", "int64_t", "long", "size_t",
             "long long", "unsigned long", "uint64_t", "unsigned long long")
# The names kernels give an op's arguments (lower case, without d_/p_ prefixes and _ptr suffixes).
ALIASES: dict[str, dict[str, tuple[str, ...]]] = {
    "gemm": {"A": ("a", "mat_a", "input_a", "lhs", "x"), "B": ("b", "mat_b", "input_b", "rhs", "w", "weight"),
             "C": ("c", "d", "out", "output", "mat_c", "result", "y"), "M": ("m",), "N": ("n",), "K": ("k",),
             "alpha": ("alpha",), "beta": ("beta",)},
    "attention": {"Q": ("q", "query"), "K": ("k", "key"), "V": ("v", "value"), "O": ("o", "out", "output"),
                  "B": ("b", "batch", "batch_size", "bs"), "H": ("h", "heads", "num_heads", "nheads", "n_heads"),
                  "S": ("s", "n", "seq", "seqlen", "seq_len", "l", "n_ctx", "len", "n_seq"),
                  "D": ("d", "head_dim", "headdim", "dim", "hd", "d_head"),
                  "scale": ("scale", "softmax_scale", "sm_scale")},
    "softmax": {"X": ("x", "in", "input", "src", "inp", "a"), "Y": ("y", "out", "output", "dst", "b"),
                "M": ("m", "rows", "n_rows", "nrows", "batch"), "N": ("n", "cols", "n_cols", "ncols", "dim", "d")},
    "copy": {"src": ("src", "in", "input", "a", "x"), "dst": ("dst", "out", "output", "b", "y"),
             "n": ("n", "size", "count", "len", "numel", "num")},
}
ALIASES["rms_norm"] = {"X": ("x", "in", "input", "inp", "hidden_states"), "W": ("w", "weight", "gamma", "g"),
                       "Y": ("y", "out", "output", "dst"), "M": ("m", "rows", "n_rows", "nrows", "batch"),
                       "N": ("n", "cols", "n_cols", "ncols", "dim", "hidden", "hidden_size"),
                       "eps": ("eps", "epsilon", "variance_epsilon")}
ALIASES["swiglu"] = {"A": ("a", "gate", "x"), "B": ("b", "up", "y"), "Y": ("c", "out", "output", "y"),
                     "M": ("m", "rows", "n_rows"), "N": ("n", "cols", "n_cols")}
ALIASES["attention_causal"] = ALIASES["attention"]
NAME_HINTS = (("attention_causal", ("causal",)), ("attention", ("attn", "attention", "flash", "sdpa")),
              ("rms_norm", ("rms", "rmsnorm", "rms_norm")), ("swiglu", ("swiglu", "silu_mul", "siluandmul")),
              ("softmax", ("softmax",)), ("copy", ("copy", "memcpy")),
              ("gemm", ("gemm", "matmul", "mm", "sgemm", "hgemm", "dot")))
DEFAULT_SHAPES = {"gemm": [[4096, 4096, 4096]], "attention": [[4, 16, 1024, 64]],
                  "attention_causal": [[4, 16, 1024, 64]], "softmax": [[4096, 4096]], "copy": [[67108864]],
                  "rms_norm": [[4096, 4096]], "swiglu": [[4096, 4096]]}
DEFAULT_ARCH = {"cuda": "sm_90a", "hip": "gfx942"}
_CEIL = ("CEIL_DIV", "ceil_div", "CEILDIV", "ceildiv", "cdiv", "DIV_UP", "div_up", "DIVUP", "iDivUp", "ceilDiv")
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
FLOAT_DTYPES = ("fp32", "fp16", "bf16")
# sizeof() of the element types launch expressions use (dynamic shared memory in bytes).
_SIZEOF = {**{t: {"fp32": 4, "fp16": 2, "bf16": 2}[d] for t, d in DTYPE_OF.items()},
           "double": 8, "int": 4, "unsigned": 4, "uint32_t": 4, "int32_t": 4, "int64_t": 8, "long": 8,
           "char": 1, "int8_t": 1, "uint8_t": 1, "short": 2, "uint16_t": 2, "int16_t": 2}
MAX_SCRIPT_SHAPES = 4  # shapes taken from a script's sweep: enough to see a trend, cheap to run


def backend_of(kernel_file: str, text: str, launch: Launch | PyLaunch | None = None, hint: str = "") -> str:
    """`cuda` or `hip` from the file's name, what it includes, and how scripts compile it
    (`hint`) or launch it (hiprtc kernels often include nothing that says HIP)."""
    suffix = PurePosixPath(kernel_file).suffix
    if suffix in (".cu", ".cuh"):
        return "cuda"
    if suffix == ".hip" or re.search(r"hip/hip_runtime|hipLaunchKernelGGL|hip_fp16|__HIP", text):
        return "hip"
    if hint:
        return hint
    if isinstance(launch, PyLaunch) and launch.api == "hip":
        return "hip"
    return "cuda"


def _norm(name: str) -> str:
    n = name.lower()
    n = re.sub(r"^(d_|p_|g_|dev_|gpu_)", "", n)
    return re.sub(r"(_ptr|_d|_p|_gmem|_global|_dev|ptr)$", "", n) or n


def _kind(param) -> str:
    if param.pointer or "Tensor" in param.type or "py::object" in param.type:
        return "tensor"
    el = param.element
    if el in INT_TYPES or el.endswith("int") or el in ("int64_t", "long"):
        return "int"
    if el in ("float", "double"):
        return "float"
    return "other"


def _wanted(op: str, returns: bool = False) -> dict[str, list[str]]:
    module = OPS[op]
    tensors = [*module.INPUTS, *(() if returns else (module.OUTPUT,))]
    scalars = [*getattr(module, "SCALARS", ()), *(("alpha", "beta") if op == "gemm" else ())]
    return {"tensor": tensors, "int": list(module.DIMS), "float": scalars}


def map_params(kernel: Kernel, op: str) -> tuple[tuple[str, ...] | None, str]:
    """(op argument per parameter, "") if the signature fits `op`, else (None, why)."""
    module = OPS[op]
    aliases = ALIASES[op]
    wanted = _wanted(op)
    tensors, dims = wanted["tensor"], wanted["int"]
    out: list[str | None] = []
    taken: set[str] = set()
    for p in kernel.params:
        kind = _kind(p)
        if kind not in wanted:
            return None, f"parameter {p.type} {p.name} is not a pointer, size or scalar"
        name = _norm(p.name)
        hit = next((a for a in wanted[kind] if a not in taken and name in aliases.get(a, ())), None)
        out.append(hit)
        if hit:
            taken.add(hit)
    # unnamed or unusually named parameters: in the op's order, inputs before the output
    for i, p in enumerate(kernel.params):
        if out[i] is None:
            kind = _kind(p)
            free = [a for a in wanted[kind] if a not in taken]
            if kind == "tensor" and "const" not in p.type:  # written: the output if it is still free
                free = [a for a in free if a == module.OUTPUT] or free
            if kind == "float" or not free:
                return None, f"parameter {p.type} {p.name} has no {op} argument to be"
            out[i] = free[0]
            taken.add(free[0])
    missing_tensors = [t for t in tensors if t not in taken]
    if missing_tensors:
        return None, f"no parameter for {missing_tensors}"
    if not any(d in taken for d in dims):
        return None, f"no size parameter among {dims}"
    return tuple(out), ""  # type: ignore[arg-type]


def guess_op(kernel: Kernel, file_text: str = "", evidence: Evidence | None = None) -> Guess:
    """The op a kernel computes, from its name and signature (pybind11 functions take tensors:
    their order is the op's `tensor_args`); when none fits exactly, the best guess with why."""
    evidence = evidence or Evidence()
    lowered = kernel.name.lower() + " " + (kernel.entry or "").lower()
    if kernel.kind == "pybind11":  # a module function's file and the kernels it launches name the op too
        lowered += " " + " ".join([PurePosixPath(kernel.file).stem.lower(), *(k.name.lower() for k in evidence.launched)])
    hinted = [op for op, words in NAME_HINTS if any(w in lowered for w in words)]
    if kernel.kind == "pybind11":
        return _guess_pybind(kernel, hinted, file_text, evidence)
    fits, why = {}, {}
    for op in ALIASES:
        mapped, reason = map_params(kernel, op)
        if mapped:
            fits[op] = mapped
        else:
            why[op] = reason
    elements = {_element(p, evidence) for p in kernel.params if p.pointer}
    if not fits:
        hint = f" (its name suggests {hinted[0]}: {why.get(hinted[0])})" if hinted else ""
        return _best_guess(kernel, hinted, file_text, evidence, f"the signature fits no op{hint}")
    if not hinted and elements and not elements & set(DTYPE_OF):
        return _best_guess(kernel, hinted, file_text, evidence,
                           f"its pointers are {sorted(elements)}, no floating-point data, and its name names no op")
    op = next((o for o in hinted if o in fits), None)
    if op is None:
        if "attention_causal" in fits and "attention" in fits:
            fits.pop("attention_causal")
        if len(fits) > 1:
            by_size = sorted(fits, key=lambda o: (-len(OPS[o].INPUTS), o))
            op = by_size[0]
        else:
            op = next(iter(fits))
    return _finish(kernel, op, fits[op], file_text, evidence)


def _finish(kernel: Kernel, op: str, mapped: tuple[str | None, ...], file_text: str, evidence: Evidence,
            guesses: tuple[tuple[str, str], ...] = (), reason: str = "") -> Guess:
    """The dtype and layout of a kernel whose op and arguments (`mapped`: per parameter) are
    settled (or guessed)."""
    args = tuple(a for a in mapped if a)
    notes = []
    guesses = list(guesses)
    absent = [d for d in OPS[op].DIMS if d not in args]
    if absent and not reason:
        notes.append(f"the kernel takes no {', '.join(absent)}: only shapes where they equal the sizes it does take "
                     f"are valid")
    dtype, output_dtype, origin, dguess = _dtypes(kernel, mapped, OPS[op], file_text, evidence)
    if dguess:
        guesses.append(("dtypes", dguess))
    layout = OPS[op].LAYOUTS[0]
    if op == "gemm":
        layout, lnote = gemm_layout(kernel, mapped)
        if lnote:
            guesses.append(("layout", lnote))
    return Guess(op, args, dtype, output_dtype, layout, reason=reason, notes=tuple(notes),
                 guesses=tuple(guesses), dtype_origin=origin, per_param=tuple(mapped))


def _partial_map(kernel: Kernel, op: str, returns: bool = False) -> list[str | None]:
    """Per parameter the op argument its name and kind make it, else None; pointers left over
    fill the op's free tensors by constness (read: an input, written: the output)."""
    aliases, wanted = ALIASES[op], _wanted(op, returns)
    out: list[str | None] = []
    taken: set[str] = set()
    for p in kernel.params:
        name = _norm(p.name)
        hit = next((a for a in wanted.get(_kind(p), []) if a not in taken and name in aliases.get(a, ())), None)
        out.append(hit)
        if hit:
            taken.add(hit)
    output = OPS[op].OUTPUT
    for i, p in enumerate(kernel.params):
        if out[i] is None and _kind(p) == "tensor":
            free = [t for t in wanted["tensor"] if t not in taken]
            written = "const" not in p.type and kernel.kind != "pybind11"
            pick = next((t for t in free if (t == output) == written), None)
            if pick:
                out[i] = pick
                taken.add(pick)
    return out


def _best_guess(kernel: Kernel, hinted: list[str], file_text: str, evidence: Evidence, reason: str) -> Guess:
    """The op whose arguments the parameters match best: the name's hint first, then how many
    parameters match an argument by name, then how close the pointer count is to the op's
    tensor count; with no name matching at all, the kernel's pointers as a copy."""
    pointers = [p for p in kernel.params if _kind(p) == "tensor"]

    def score(op: str) -> tuple:
        mapped = _partial_map(kernel, op)
        by_name = sum(1 for p, a in zip(kernel.params, mapped) if a and _norm(p.name) in ALIASES[op].get(a, ()))
        tensors = len(OPS[op].INPUTS) + 1
        return (op in hinted, by_name, -abs(len(pointers) - tensors), -len(OPS[op].DIMS), op == "copy")

    ranked = sorted(ALIASES, key=score, reverse=True)
    op = ranked[0]
    best = score(op)
    mapped = _partial_map(kernel, op)
    if not best[0] and not best[1]:
        op = "copy"
        mapped = _partial_map(kernel, op)
        why_op = f"{reason}; nothing in its name or parameters points to an op: its pointers are drafted as a copy"
    else:
        matched = ", ".join(f"{p.name}→{a}" for p, a in zip(kernel.params, mapped) if a)
        why_op = f"{reason}; {op}'s arguments match best ({matched})"
    left = [p.name or p.type for p, a in zip(kernel.params, mapped) if a is None]
    guesses = [("op", why_op)]
    if left:
        guesses.append(("binding.args", _not_arguments(left, op, f"flopwatch cannot launch {kernel.name} as it is (a "
                                                                 "host wrapper taking the op's arguments, or an op.py "
                                                                 "of the repository, would measure it)")))
    return _finish(kernel, op, tuple(mapped), file_text, evidence, tuple(guesses), reason=why_op)


def _not_arguments(left: list[str], op: str, consequence: str) -> str:
    return f"{', '.join(left)} {'is' if len(left) == 1 else 'are'} no {op} argument: {consequence}"


def _returns_tensor(returns: str) -> bool:
    return "Tensor" in returns or "py::object" in returns


def _guess_pybind(kernel: Kernel, hinted: list[str], file_text: str, evidence: Evidence) -> Guess:
    """A module function: the op from its tensors (names, count; a function returning a tensor
    takes the op's inputs only), its other parameters mapped to sizes and scalars by name."""
    returns = _returns_tensor(kernel.returns)
    tensors = [p for p in kernel.params if _kind(p) == "tensor"]
    guesses: list[tuple[str, str]] = []
    signature = f"{kernel.entry}({', '.join(p.type for p in kernel.params)})"

    def wanted(op: str) -> int:
        return len(OPS[op].INPUTS) + (0 if returns else 1)

    def by_name(op: str) -> int:
        mapped = _partial_map(kernel, op, returns)
        return sum(1 for p, a in zip(kernel.params, mapped) if a and _kind(p) == "tensor"
                   and _norm(p.name) in ALIASES[op].get(a, ()))

    counted = [op for op in ALIASES if wanted(op) == len(tensors) and op != "attention_causal"]
    op = next((o for o in hinted if o in counted), None)
    if op is None and counted:
        default = ({3: "gemm", 4: "attention", 2: "softmax"} if not returns else
                   {3: "attention", 2: "gemm", 1: "softmax"}).get(len(tensors))
        op = max(counted, key=lambda o: (by_name(o), o == default, -len(OPS[o].DIMS)))
    if op is None:
        op = next((o for o in hinted if o in ALIASES), None) or ("attention" if len(tensors) >= 3 else "gemm")
        if not kernel.params:
            why = f"the parameters of {kernel.name} were not found (declare it in the module's file)"
        else:
            why = f"{signature} takes {len(tensors)} tensor(s), no op takes that many"
        guesses.append(("op", f"{why}; {op} assumed"))
    mapped = _partial_map(kernel, op, returns)
    order = [*OPS[op].INPUTS, *(() if returns else (OPS[op].OUTPUT,))]
    tensor_names = [a for p, a in zip(kernel.params, mapped) if _kind(p) == "tensor"]
    if not all(_norm(p.name) in ALIASES[op].get(a or "", ()) for p, a in zip(kernel.params, mapped)
               if _kind(p) == "tensor"):
        # names do not tell: the op's own order, as flopwatch calls module functions by default
        positional = iter(order)
        mapped = [next(positional, None) if _kind(p) == "tensor" else a for p, a in zip(kernel.params, mapped)]
        tensor_names = [a for p, a in zip(kernel.params, mapped) if _kind(p) == "tensor"]
    left = [p.name or p.type for p, a in zip(kernel.params, mapped) if a is None]
    if left:
        guesses.append(("binding.args", _not_arguments(left, op, f"flopwatch cannot call {kernel.entry} as it is")))
    args = tuple(a for a in mapped if a)
    explicit = returns or len(args) != len(tensor_names) or list(args) != order[:len(args)]
    dtype, output_dtype, origin, dguess = _module_dtype(kernel, file_text, evidence)
    if dguess:
        guesses.append(("dtypes", dguess))
    layout = OPS[op].LAYOUTS[0]
    if op == "gemm":
        layout = "nt" if re.search(r"B\s*\^\s*T|B\.T|Bᵀ|transpose", kernel.doc + file_text) else "nn"
        guesses.append(("layout", f"layout {layout!r} read from the module's comments (nt: B is stored N×K)"))
    return Guess(op, args, dtype, output_dtype, layout, guesses=tuple(guesses), returns=returns,
                 explicit_args=explicit, dtype_origin=origin, per_param=tuple(mapped))


# -- dtypes ------------------------------------------------------------------------------------------

def _element(param, evidence: Evidence) -> str:
    """The parameter's element type with the repository's typedefs seen through."""
    element = param.element
    for _ in range(4):
        if element in DTYPE_OF or element not in evidence.type_aliases:
            break
        element = evidence.type_aliases[element]
    return element


def _dtypes(kernel: Kernel, mapped: tuple[str | None, ...], module, file_text: str,
            evidence: Evidence) -> tuple[str, str, str, str]:
    """(dtype, output dtype when not the op's, where it comes from when not the element type,
    why it is a guess or ""). The op's first input gives the dtype; with no parameter for it
    (an op that is a guess), the first pointer the kernel reads that has a float type."""
    by_arg = {a: p for a, p in zip(mapped, kernel.params) if a}
    first = by_arg.get(module.INPUTS[0])
    if first is not None:
        dtype = DTYPE_OF.get(_element(first, evidence), "")
    else:
        reads = [p for p in kernel.params if p.pointer and "const" in p.type] + \
                [p for p in kernel.params if p.pointer]
        dtype = next((DTYPE_OF[_element(p, evidence)] for p in reads if _element(p, evidence) in DTYPE_OF), "")
    note = guess = ""
    if not dtype:
        dtype, note, guess = _evidence_dtype(kernel, mapped, module, file_text, evidence, first)
    out = by_arg.get(module.OUTPUT)
    out_dtype = DTYPE_OF.get(_element(out, evidence), "") if out else ""
    default_out = module.output_dtype(dtype) if dtype else ""
    return dtype, (out_dtype if out_dtype and out_dtype != default_out else ""), note, guess


def _args_per_param(kernel: Kernel, args) -> list[str | None]:
    """The op argument of each parameter: `args` when it names one per parameter (None for a
    parameter that is none: `Guess.per_param`), else nothing known."""
    if len(args) == len(kernel.params):
        return list(args)
    return [None] * len(kernel.params)


def _evidence_dtype(kernel: Kernel, mapped: tuple[str | None, ...], module, file_text: str, evidence: Evidence,
                    first) -> tuple[str, str, str]:
    """The dtype the launching script's tensors have, else the file's text, else fp32 as a guess:
    (dtype, note, why it is a guess or "")."""
    element = _element(first, evidence) if first is not None else "unknown"
    told = script_dtype(evidence, _arg_texts_for(kernel, mapped, module.INPUTS[0], evidence))
    if told:
        return told, f"the tensors {evidence.script} makes (the element type is {element!r})", ""
    dtype, _ = _dtype_from_text(kernel.body + file_text)
    if dtype:
        return dtype, "", f"the element type is {element!r}; {dtype} is the type the file names most"
    return "fp32", "", f"the element type {element!r} is no fp32, fp16 or bf16, and no script tells"


def _arg_texts_for(kernel: Kernel, mapped: tuple[str | None, ...], op_arg: str, evidence: Evidence) -> list[str]:
    """The script's expressions passed as the op's `op_arg` (first) and as the kernel's other
    pointers."""
    if not evidence.call_args:
        return []
    wanted = [i for i, a in enumerate(mapped) if a == op_arg]
    pointers = [i for i, p in enumerate(kernel.params) if _kind(p) == "tensor"]
    return [evidence.call_args[i] for i in [*wanted, *pointers] if i < len(evidence.call_args)]


def script_dtype(evidence: Evidence, passed: list[str]) -> str:
    """fp32, fp16 or bf16 from the tensors a script makes: the one passed first (by variable
    name) if the script makes it, else the dtype its float tensors are written with most."""
    made = {t.name: t for t in evidence.tensors if t.name}
    for name in passed:
        t = made.get(name)
        if t is not None and t.dtype in FLOAT_DTYPES:
            return t.dtype
    floats = [t.dtype for t in evidence.tensors if t.dtype in FLOAT_DTYPES]
    explicit = [t.dtype for t in evidence.tensors if t.dtype in FLOAT_DTYPES and t.explicit]
    counted = Counter(explicit or floats)
    return counted.most_common(1)[0][0] if counted else ""


def _module_dtype(kernel: Kernel, file_text: str, evidence: Evidence) -> tuple[str, str, str, str]:
    """A module function's dtype: the element type of the kernels it launches, else of the
    file's kernels, else the tensors the scripts pass it, else the file's text, else fp32."""
    from pipeline.onboarding.kernel_scan import find_kernels

    kernels = [*evidence.launched, *find_kernels(file_text, kernel.file)]
    for k in kernels:
        reads = [p for p in k.params if p.pointer and "const" in p.type] or [p for p in k.params if p.pointer]
        element = next((_element(p, evidence) for p in reads[:1]), "")
        if element in DTYPE_OF:  # the first input's, not C's
            return DTYPE_OF[element], "", "", ""
    told = script_dtype(evidence, list(evidence.call_args))
    if told:
        return told, "", f"the tensors {evidence.script} passes {kernel.entry}", ""
    dtype, note = _dtype_from_text(file_text)
    if dtype:
        return dtype, "", "", note
    return "fp32", "", "", "no kernel it launches, no script and no text tells the tensors' dtype"


def _dtype_from_text(text: str) -> tuple[str, str]:
    """bf16 or fp16, whichever the file names clearly more often (comments included)."""
    low = text.lower()
    counts = {d: sum(len(re.findall(rf"\b{w}\b", low)) for w in words)
              for d, words in (("bf16", ("bf16", "bfloat16")), ("fp16", ("fp16", "half", "float16")))}
    best = max(counts, key=counts.get)
    if counts[best] and counts[best] >= 2 * min(counts.values()):
        return best, f"dtype {best!r} guessed from the file's text ({counts[best]} mentions)"
    return "", ""


def gemm_layout(kernel: Kernel, args: tuple[str | None, ...]) -> tuple[str, str]:
    """`nn` when B is indexed with a stride of N (B is K×N), `nt` with a stride of K (B stored
    N×K); the tutorial layout `nn` with a note when the body does not tell."""
    names = {a: p.name for a, p in zip(_args_per_param(kernel, args), kernel.params) if a}
    b, n, k = names.get("B"), names.get("N"), names.get("K")
    if b and kernel.body:
        indexes = " ".join(re.findall(rf"\b{re.escape(b)}\s*\[([^\]]*)\]", kernel.body))
        uses = {dim for dim, name in (("N", n), ("K", k))
                if name and re.search(rf"(\*\s*{re.escape(name)}\b|\b{re.escape(name)}\s*\*)", indexes)}
        if uses == {"N"}:
            return "nn", ""
        if uses == {"K"}:
            return "nt", ""
    return "nn", "layout 'nn' assumed (A is M×K, B is K×N, row-major); write layout = \"nt\" if B is stored N×K"


# -- launch geometry --------------------------------------------------------------------------

def _ceil_calls(expr: str) -> str:
    """`CEIL_DIV(a, b)` and friends → `ceil((a)/(b))` (pure)."""
    pattern = re.compile(r"\b(" + "|".join(_CEIL) + r")\s*\(")
    while True:
        m = pattern.search(expr)
        if not m:
            return expr
        depth, j = 0, m.end() - 1
        for j in range(m.end() - 1, len(expr)):
            depth += {"(": 1, ")": -1}.get(expr[j], 0)
            if depth == 0:
                break
        parts = split_top(expr[m.end():j])
        if len(parts) != 2:
            return expr
        expr = f"{expr[:m.start()]}ceil(({parts[0]})/({parts[1]})){expr[j + 1:]}"


def translate(expr: str, constants: dict, names: dict[str, str]) -> str:
    """A C launch expression in the op's sizes: constants substituted, C's integer `/` as `//`,
    `CEIL_DIV(a, b)` as `ceil(a/b)`, host variable names as op dimension names (pure)."""
    text = " ".join(str(expr).split())
    text = re.sub(r"\bsizeof\s*\(\s*([\w:]+)\s*\)", lambda m: str(_SIZEOF.get(m.group(1), m.group(0))), text)
    text = re.sub(r"\((?:unsigned\s+)?(?:int|uint|unsigned|size_t|long long|long|int64_t|int32_t|uint32_t)\)", "",
                  text)
    text = re.sub(r"static_cast<[^>]*>", "", text)
    for _ in range(4):
        new = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: constants.get(m.group(0), m.group(0)), text)
        if new == text:
            break
        text = new
    text = re.sub(r"(?<=\d)[uUlL]+\b", "", text).replace("/", "//")
    text = _ceil_calls(text)
    text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: names.get(m.group(0), m.group(0)), text)
    return _tidy(text)


def _tidy(text: str) -> str:
    text = text.replace(" ", "")
    for _ in range(3):  # (N) → N
        text = re.sub(r"(?<![A-Za-z_\w])\(([A-Za-z_]\w*|\d+)\)", r"\1", text)
    while text.startswith("(") and _closing(text) == len(text) - 1:  # ((n+255)//256) → (n+255)//256
        text = text[1:-1]
    if not re.search(r"[A-Za-z_]", text.replace("ceil", "").replace("floor", "")):  # only numbers: the number
        try:
            value = launch_expr.dimension(text, {})
            return str(value)
        except ExpressionError:
            pass
    return text


def _closing(text: str) -> int:
    """Index of the parenthesis closing the one `text` starts with, or -1."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return i
    return -1


_PY_NAME = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*(?:\[\d+\])?")


def rename(expr: str, names: dict[str, str]) -> str:
    """A Python launch expression (`pipeline.onboarding.python_scan` syntax: `(N+64-1)//64`, `ceil(M/64)`,
    `args.M`, `A.shape[0]`) in the op's sizes: each script name through `names` (pure)."""
    text = _PY_NAME.sub(lambda m: names.get(m.group(0), m.group(0)), str(expr))
    return _tidy(text)


def launch_geometry(launch: Launch | PyLaunch | None, kernel: Kernel, args: tuple[str | None, ...],
                    dims: tuple[str, ...], constants: dict, op: str = "", layout: str = "") -> tuple[list, list, dict, str]:
    """(grid, block, [launch] table, why they are a guess or "") from the kernel's launch in
    host code or a script, checked by evaluating them at a sample shape; one thread per output
    element as a marked guess when there is none or it cannot be read. `args`: the op argument
    of each kernel parameter (`Guess.per_param`; None for one that is none)."""
    if launch is not None:
        names = _host_names(launch, kernel, args, dims, op, layout)
        python = isinstance(launch, PyLaunch)
        # a host variable passed as a size stays a size, whatever constant of that name exists;
        # a local set from an expression (`blocks = (n + 255) / 256`) is that expression
        written = {k: f"({v})" for k, v in getattr(launch, "locals", {}).items() if not _is_number(v)}
        consts = {k: v for k, v in {**written, **constants, **launch.constants}.items() if k not in names}

        def convert(expr: str) -> str:
            if python:
                return rename(expr, names)
            return translate(_tensor_calls(expr, names), consts, names)

        grid = [convert(g) for g in launch.grid]
        block = [convert(b) for b in launch.block]
        sample = {d: 4096 for d in dims}
        try:
            grid = [int(g) if g.isdigit() else g for g in grid]
            block = [int(b) if str(b).isdigit() else b for b in block]
            launch_expr.dims3(grid, sample)
            launch_expr.dims3(block, sample)
        except ExpressionError as exc:
            grid, block, table, how = _default_geometry(dims)
            return grid, block, table, f"grid/block at {launch.file}:{launch.line} could not be read ({exc}): {how}"
        table = {}
        shared = convert(launch.shared)
        if shared.isdigit() and int(shared) > 0:
            table["dynamic_smem_bytes"] = int(shared)
        if all(isinstance(b, int) for b in block):
            threads = 1
            for b in block:
                threads *= b
            table["block_threads"] = threads
        return grid, block, table, ""
    grid, block, table, how = _default_geometry(dims)
    return grid, block, table, (f"no launch of this kernel found in the repository's host code or scripts: "
                                       f"{how}; check them against the kernel")


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"\d+[uUlL]*", text.strip()))


def _default_geometry(dims: tuple[str, ...]) -> tuple[list, list, dict, str]:
    """One thread per output element: (grid, block, [launch] table, how that reads)."""
    if dims[:2] == ("M", "N") or dims == ("M", "N", "K"):
        return (["ceil(N/16)", "ceil(M/16)"], [16, 16], {"block_threads": 256},
                "one thread per output element in 16×16 blocks")
    return ([f"ceil({'*'.join(dims)}/256)"], [256], {"block_threads": 256},
            "one thread per element in blocks of 256")


def _tensor_calls(expr: str, names: dict[str, str]) -> str:
    """`Q.size(0)`, `Q.sizes()[1]` written in a C launch: the dimension, when Q is an op tensor."""
    def sub(m: re.Match) -> str:
        index = m.group(2) or m.group(3)
        return names.get(f"{m.group(1)}.shape[{index}]", m.group(0))

    return re.sub(r"\b([A-Za-z_]\w*)\s*(?:\.|->)\s*(?:size\s*\(\s*(\d+)\s*\)|sizes\s*\(\s*\)\s*\[\s*(\d+)\s*\])",
                  sub, expr)


_POINTER_OF = re.compile(r"(?:reinterpret_cast<[^>]*>\s*\(\s*|\([^()]*\*\s*\)\s*)?([A-Za-z_]\w*)\s*(?:\.|->)\s*"
                         r"(?:data_ptr|data|mutable_data_ptr|const_data_ptr)\b")


def _host_names(launch: Launch | PyLaunch, kernel: Kernel, args: tuple[str, ...], dims: tuple[str, ...],
                op: str = "", layout: str = "") -> dict[str, str]:
    """Host (or script) name → op dimension, through the launch's argument list: a name passed
    as several sizes (a square kernel called with N, N, N) keeps the dimension of its own name;
    sizes read off a tensor passed as an op tensor (`B = Q.size(0)`, `A.shape[1]`) are that
    tensor's dimension."""
    seen: dict[str, list[str]] = {}
    tensors: dict[str, str] = {}  # host tensor variable → op tensor
    per_param = _args_per_param(kernel, args)
    for host, op_arg in zip(launch.args, per_param):
        host = host.strip()
        if op_arg in dims and re.fullmatch(r"[A-Za-z_][\w.]*", host):
            seen.setdefault(host, []).append(op_arg)
        elif op_arg:
            pointer = _POINTER_OF.search(host)
            variable = pointer.group(1) if pointer else host if re.fullmatch(r"[A-Za-z_][\w.]*", host) else ""
            if variable:
                tensors[variable] = op_arg
    names = {host: (host if host in ops else ops[0]) for host, ops in seen.items()}
    for host in [h for h in names if "." in h]:  # argparse's args.M is the option M
        names.setdefault(host.rsplit(".", 1)[-1], names[host])
    axes = {}
    for variable, op_tensor in tensors.items():
        for i, dim in enumerate(tensor_axes(op, op_tensor, layout)):
            axes[f"{variable}.shape[{i}]"] = dim
    names.update({k: v for k, v in axes.items() if k not in names})
    for host, (variable, index) in getattr(launch, "tensor_sizes", {}).items():
        dim = axes.get(f"{variable}.shape[{index}]")
        if dim and host not in names:
            names[host] = dim
    return names


def tensor_axes(op: str, tensor: str, layout: str = "") -> tuple[str, ...]:
    """The op dimension of each axis of one of its tensors (gemm's B by layout), () if unknown."""
    table = TENSOR_DIMS.get(op, {})
    return table.get(f"{tensor}:{layout or 'nt'}", table.get(tensor, ()))


def template_args(launch: Launch | PyLaunch | None, constants: dict) -> tuple[list[str], str]:
    if launch is None or not launch.template_args:
        return [], ""
    consts = {**constants, **launch.constants}
    values = [translate(a, consts, {}).replace("//", "/") for a in launch.template_args]
    unresolved = [v for v in values if re.search(r"[A-Za-z_]", v) and v not in DTYPE_OF and v not in INT_TYPES]
    return values, (f"template arguments {unresolved} of the launch at {launch.file}:{launch.line} are not numbers "
                    f"flopwatch can read: set them in the instantiation" if unresolved else "")


# -- sizes to measure ----------------------------------------------------------------------------

def script_shapes(op: str, kernel: Kernel, args: tuple[str | None, ...], layout: str,
                  evidence: Evidence) -> list[list[int]]:
    """The shapes the launching script uses, in the op's dimensions: each dimension's values
    from the script's sizes passed as it (through the argument list), named like it, or read
    off the tensors passed as the op's tensors; [] unless every dimension gets one (a square
    kernel's missing dimensions take the values of the one it has)."""
    if not evidence.script:
        return []
    dims = OPS[op].DIMS
    per_param = _args_per_param(kernel, args)
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
        dim = next((d for d in dims if name == d or _norm(name) in ALIASES[op].get(d, ())), None)
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


# -- the files of a draft ------------------------------------------------------------------------

def base_names(kernels: list[Kernel]) -> list[str]:
    """The name each kernel's draft starts from, in order: its symbol, unless the symbol repeats
    across the drafted files (eleven files each defining `matmul_kernel`): then its file's stem,
    or `<stem>_<symbol>` when that file has several kernels drafted. A pybind11 function is
    named after its file (`dispatch_micro` is every HipKittens kernel's entry), `<stem>_<entry>`
    when its module exports several (pure)."""
    files_of: dict[str, set[str]] = {}
    per_file = Counter(k.file for k in kernels)
    for k in kernels:
        if k.kind != "pybind11":
            files_of.setdefault(k.name, set()).add(k.file)
    out = []
    for k in kernels:
        stem = PurePosixPath(k.file).stem
        if k.kind == "pybind11":
            out.append(stem if per_file[k.file] == 1 else f"{stem}_{k.entry}")
        elif len(files_of[k.name]) > 1:
            out.append(stem if per_file[k.file] == 1 else f"{stem}_{k.name}")
        else:
            out.append(k.name)
    return out


def variant_name(kernel: Kernel | None, taken: set[str], base: str = "") -> str:
    """`base` (default: the kernel's name; a pybind11 function's file stem), sanitised and made
    unique among `taken`."""
    raw = base or (PurePosixPath(kernel.file).stem if kernel.kind == "pybind11" else kernel.name)
    base = re.sub(r"[^A-Za-z0-9_.+-]", "_", raw).lstrip("_.+-")[:56] or "kernel"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def _field(key: str, value: str, why: str = "") -> str:
    """One manifest line; a guess carries its reason as a comment."""
    return f"{key} = {value}" + (f"  # TODO (guess): {_one_line(why)}" if why else "")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def draft(kernel: Kernel, launch: Launch | PyLaunch | None, file_text: str, out_dir: str, taken: set[str],
          constants: dict | None = None, include: str = "", evidence: Evidence | None = None,
          base: str = "") -> Draft:
    """The variant folder for one kernel: `variant.toml` and the source that includes it
    (`include`: the repository-relative file to include, the kernel's own by default; `base`:
    the name to start from, `base_names`; `evidence`: what scripts and other files say)."""
    constants = constants or {}
    evidence = evidence or Evidence()
    include = include or kernel.file
    backend = backend_of(kernel.file, file_text, launch, evidence.backend)
    if any(PurePosixPath(f).suffix in (".cu", ".cuh") for f in evidence.includes):
        backend = "cuda"
    name = variant_name(kernel, taken, base)
    folder = f"{out_dir.rstrip('/')}/{name}"
    src_dir = str(PurePosixPath(include).parent)
    guess = guess_op(kernel, file_text, evidence)
    op, module = guess.op, OPS[guess.op]
    todo = list(guess.notes)
    guesses = dict(guess.guesses)
    if src_dir in ("", "."):
        todo.append(f"{include} is at the repository root: move it into a folder (shared include folders are "
                    f"shipped to the build node, the whole repository is not)")
    ext = ".cu" if backend == "cuda" else ".hip"
    wrapper = f"{_safe_file(name)}{ext}"
    if wrapper == PurePosixPath(include).name:  # a quoted include would find the wrapper itself
        wrapper = f"{_safe_file(name)}_draft{ext}"
    shapes = script_shapes(op, kernel, guess.per_param, guess.layout, evidence)
    lines = [f"# Drafted by `flopwatch new` from {kernel.file}:{kernel.line} ({kernel.name}).",
             f'name = "{name}"',
             _field("op", f'"{op}"', guesses.get("op", "")),
             f'backend = "{backend}"', f'sources = ["{wrapper}"]']
    if len(module.LAYOUTS) > 1:
        lines.append(_field("layout", f'"{guess.layout}"', guesses.get("layout", "")))
    if "alpha" in guess.args and "beta" in guess.args:
        lines.append("alpha_beta = true")
    dtypes = _field("dtypes", f'["{guess.dtype}"]', guesses.get("dtypes", ""))
    lines.append(dtypes if "dtypes" in guesses or not guess.dtype_origin else f"{dtypes}  # {guess.dtype_origin}")
    if guess.output_dtype:
        lines.append(f'output_dtype = "{guess.output_dtype}"')
    origin = f"the sizes {evidence.script} uses" if shapes else "sizes to measure"
    lines.append(f"shapes = {json.dumps(shapes or DEFAULT_SHAPES[op])}  # {origin}: {list(module.DIMS)}")
    lines.append(f'arches = ["{DEFAULT_ARCH[backend]}"]')
    targs, tnote = template_args(launch, constants)
    if tnote:
        todo.append(tnote)
    if kernel.template and not targs:
        todo.append(f"template <{kernel.template}>: no launch gives its arguments; write them in {wrapper}")
    lines += ["", "[binding]"]
    table: dict = {}
    if kernel.kind == "pybind11":
        module_name = kernel.module if kernel.module != "TORCH_EXTENSION_NAME" else (evidence.module or _safe_file(name))
        lines += ['kind = "pybind11"', f'module = "{module_name}"', f'entry = "{kernel.entry}"']
        if guess.returns:
            lines.append("returns = true")
        if guess.explicit_args or "binding.args" in guesses:
            lines.append(_field("args", json.dumps(list(guess.args)), guesses.get("binding.args", "")))
    else:
        lines += ['kind = "raw"', f'entry = "{kernel.name}"',
                  _field("args", json.dumps(list(guess.args)), guesses.get("binding.args", ""))]
        grid, block, table, gwhy = launch_geometry(launch, kernel, guess.per_param, module.DIMS, constants, op,
                                                   guess.layout)
        if gwhy:
            guesses["binding.grid"] = guesses["binding.block"] = gwhy
        lines += [_field("grid", json.dumps(grid), gwhy), _field("block", json.dumps(block), gwhy)]
        if launch is not None:
            lines.insert(1, f"# Launch geometry from {launch.file}:{launch.line}.")
    if table:
        # one name per back end: AMD calls shared memory LDS
        if backend == "hip" and "dynamic_smem_bytes" in table:
            table["dynamic_lds_bytes"] = table.pop("dynamic_smem_bytes")
        lines += ["", "[launch]", *(f"{k} = {v}" for k, v in table.items())]
    guessed = tuple(dict.fromkeys(guesses))
    todo = [f"{key} (guess): {_one_line(why)}" for key, why in _unique_reasons(guesses)] + todo
    files = {"variant.toml": "\n".join(lines) + "\n",
             wrapper: _wrapper_text(kernel, targs, include, evidence.includes)}
    extra_dirs = tuple(str(PurePosixPath(f).parent) for f in evidence.includes)
    return Draft(name, folder, files, src_dir, op, tuple(todo), guessed, extra_dirs)


def _unique_reasons(guesses: dict[str, str]) -> list[tuple[str, str]]:
    """(fields, why) with fields sharing one reason joined: `binding.grid, binding.block`."""
    by_reason: dict[str, list[str]] = {}
    for key, why in guesses.items():
        by_reason.setdefault(why, []).append(key)
    return [(", ".join(keys), why) for why, keys in by_reason.items()]


def _safe_file(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _wrapper_text(kernel: Kernel, targs: list[str], include: str, more: tuple[str, ...] = ()) -> str:
    path = PurePosixPath(include)
    via = f" through {include}" if include != kernel.file else ""
    folder = str(path.parent) if str(path.parent) != "." else "the repository root"
    text = [f"// Drafted by `flopwatch new`: builds {kernel.name} from {kernel.file}{via}, unchanged;",
            f"// {folder} is a shared include folder of flopwatch.toml.",
            f'#include "{path.name}"']
    for extra in more:  # the file defining a function the module only declares
        text.append(f'#include "{PurePosixPath(extra).name}"  // defines {kernel.name} ({extra})')
    if kernel.template:
        types = ", ".join(p.type for p in kernel.params)
        args = ", ".join(targs) if targs else f"/* TODO: template arguments for <{kernel.template}> */"
        text += ["", "// The instantiation the launch in the repository's host code uses.",
                 f"template __global__ void {kernel.name}<{args}>({types});"]
    return "\n".join(text) + "\n"
