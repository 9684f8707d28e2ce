"""Draft a `variant.toml` for a kernel found in a source file (`flopwatch new`, `flopwatch init`).

From the kernel's signature: which op it computes (names and parameter kinds matched against
each op's arguments), its dtype (the inputs' element type), gemm's layout (how the kernel
indexes B). From the kernel's launch in the repository's host code, if there is one: grid,
block and template arguments, in the op's sizes. What cannot be told is written as a marked
placeholder with the reason, and listed as still needing the user's hand.

The draft goes into a folder of its own with a small source that includes the kernel's file
(and instantiates a template kernel at the launch's arguments); the kernel's folder becomes a
shared include folder of `flopwatch.toml`, so nothing of the user's code is copied. Pure
functions over `pipeline.kernel_scan` records and text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pipeline.kernel_scan import Kernel, Launch, split_top
from workers import launch_expr
from workers.formula import ExpressionError
from workers.ops import OPS

PLACEHOLDER = "?"
# Element types as kernel sources spell them.
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
ALIASES["attention_causal"] = ALIASES["attention"]
NAME_HINTS = (("attention_causal", ("causal",)), ("attention", ("attn", "attention", "flash", "sdpa")),
              ("softmax", ("softmax",)), ("copy", ("copy", "memcpy")),
              ("gemm", ("gemm", "matmul", "mm", "sgemm", "hgemm", "dot")))
DEFAULT_SHAPES = {"gemm": [[4096, 4096, 4096]], "attention": [[4, 16, 1024, 64]],
                  "attention_causal": [[4, 16, 1024, 64]], "softmax": [[4096, 4096]], "copy": [[67108864]]}
DEFAULT_ARCH = {"cuda": "sm_90a", "hip": "gfx942"}
_CEIL = ("CEIL_DIV", "ceil_div", "CEILDIV", "ceildiv", "cdiv", "DIV_UP", "div_up", "DIVUP", "iDivUp", "ceilDiv")


@dataclass(frozen=True)
class Guess:
    """What the signature says: the op and, per kernel parameter, the op argument it is."""

    op: str
    args: tuple[str, ...] = ()  # op argument names in kernel parameter order
    dtype: str = ""
    output_dtype: str = ""
    layout: str = ""
    reason: str = ""  # why no op (when op == "")
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Draft:
    """One drafted variant: its folder (repository-relative), files and what is left to do."""

    name: str
    folder: str
    files: dict  # file name in the folder → text
    include_dir: str  # the kernel's folder, a shared include folder of flopwatch.toml
    op: str
    todo: tuple[str, ...] = field(default_factory=tuple)


def backend_of(kernel_file: str, text: str) -> str:
    """`cuda` or `hip` from the file's name and what it includes."""
    suffix = PurePosixPath(kernel_file).suffix
    if suffix in (".cu", ".cuh"):
        return "cuda"
    if suffix == ".hip" or re.search(r"hip/hip_runtime|hipLaunchKernelGGL|hip_fp16|__HIP", text):
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
    if el in INT_TYPES or el.endswith("int"):
        return "int"
    if el in ("float", "double"):
        return "float"
    return "other"


def map_params(kernel: Kernel, op: str) -> tuple[tuple[str, ...] | None, str]:
    """(op argument per parameter, "") if the signature fits `op`, else (None, why)."""
    module = OPS[op]
    aliases = ALIASES[op]
    tensors = [*module.INPUTS, module.OUTPUT]
    dims = list(module.DIMS)
    scalars = [*getattr(module, "SCALARS", ()), *(("alpha", "beta") if op == "gemm" else ())]
    wanted = {"tensor": tensors, "int": dims, "float": scalars}
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


def guess_op(kernel: Kernel, file_text: str = "") -> Guess:
    """The op a kernel computes, from its name and signature (pybind11 functions take tensors:
    their order is the op's `tensor_args`)."""
    lowered = kernel.name.lower() + " " + (kernel.entry or "").lower()
    hinted = [op for op, words in NAME_HINTS if any(w in lowered for w in words)]
    if kernel.kind == "pybind11":
        return _guess_pybind(kernel, hinted, file_text)
    fits, why = {}, {}
    for op in ALIASES:
        mapped, reason = map_params(kernel, op)
        if mapped:
            fits[op] = mapped
        else:
            why[op] = reason
    if not fits:
        hint = f" (its name suggests {hinted[0]}: {why.get(hinted[0])})" if hinted else ""
        return Guess("", reason=f"the signature fits no op{hint}; known ops: {sorted(OPS)}")
    elements = {p.element for p in kernel.params if p.pointer}
    if not hinted and elements and not elements & set(DTYPE_OF):
        return Guess("", reason=f"its pointers are {sorted(elements)}, no floating-point data, and its name names no "
                                f"op; known ops: {sorted(OPS)}")
    op = next((o for o in hinted if o in fits), None)
    if op is None:
        if "attention_causal" in fits and "attention" in fits:
            fits.pop("attention_causal")
        if len(fits) > 1:
            by_size = sorted(fits, key=lambda o: (-len(OPS[o].INPUTS), o))
            op = by_size[0]
        else:
            op = next(iter(fits))
    args = fits[op]
    notes = []
    dims = OPS[op].DIMS
    absent = [d for d in dims if d not in args]
    if absent:
        notes.append(f"the kernel takes no {', '.join(absent)}: only shapes where they equal the sizes it does take "
                     f"are valid")
    dtype, output_dtype, dnote = _dtypes(kernel, args, OPS[op], file_text)
    if dnote:
        notes.append(dnote)
    layout = OPS[op].LAYOUTS[0]
    if op == "gemm":
        layout, lnote = gemm_layout(kernel, args)
        if lnote:
            notes.append(lnote)
    return Guess(op, args, dtype, output_dtype, layout, notes=tuple(notes))


def _guess_pybind(kernel: Kernel, hinted: list[str], file_text: str) -> Guess:
    tensors = [p for p in kernel.params if _kind(p) == "tensor"]
    by_count = {3: "gemm", 4: "attention", 2: "softmax"}
    op = next((o for o in hinted if _fits_count(o, len(tensors))), by_count.get(len(tensors)))
    if not op or len(tensors) != len(kernel.params):
        return Guess("", reason=f"{kernel.entry}({', '.join(p.type for p in kernel.params)}): flopwatch calls a "
                                f"module function with the op's tensors only")
    names = [*OPS[op].INPUTS, OPS[op].OUTPUT]
    # the tensors' dtype is the device code's: the element type of the file's kernels
    from pipeline.kernel_scan import find_kernels

    firsts = [next((p.element for p in k.params if p.pointer), "") for k in find_kernels(file_text, kernel.file)]
    dtype = next((DTYPE_OF[e] for e in firsts if e in DTYPE_OF), "")  # the first input's, not C's
    note = ""
    if not dtype:
        dtype, note = _dtype_from_text(file_text)
    notes = [note] if note else []
    layout = OPS[op].LAYOUTS[0]
    if op == "gemm":
        layout = "nt" if re.search(r"B\s*\^\s*T|B\.T|Bᵀ|transpose", kernel.doc + file_text) else "nn"
        notes.append(f"layout {layout!r} read from the module's comments (nt: B is stored N×K)")
    return Guess(op, tuple(names), dtype, "", layout, notes=tuple(notes))


def _fits_count(op: str, count: int) -> bool:
    return len(OPS[op].INPUTS) + 1 == count


def _dtypes(kernel: Kernel, args: tuple[str, ...], module, file_text: str) -> tuple[str, str, str]:
    by_arg = {a: p for a, p in zip(args, kernel.params)}
    first = by_arg.get(module.INPUTS[0])
    dtype = DTYPE_OF.get(first.element, "") if first else ""
    note = ""
    if not dtype:
        dtype, note = _dtype_from_text(kernel.body + file_text)
        if dtype:
            note = f"dtype {dtype!r} guessed from the file's text (the element type is {first.element!r})"
    out = by_arg.get(module.OUTPUT)
    out_dtype = DTYPE_OF.get(out.element, "") if out else ""
    default_out = module.output_dtype(dtype) if dtype else ""
    return dtype, (out_dtype if out_dtype and out_dtype != default_out else ""), note


def _dtype_from_text(text: str) -> tuple[str, str]:
    """bf16 or fp16, whichever the file names clearly more often (comments included)."""
    low = text.lower()
    counts = {d: sum(len(re.findall(rf"\b{w}\b", low)) for w in words)
              for d, words in (("bf16", ("bf16", "bfloat16")), ("fp16", ("fp16", "half", "float16")))}
    best = max(counts, key=counts.get)
    if counts[best] and counts[best] >= 2 * min(counts.values()):
        return best, f"dtype {best!r} guessed from the file's text ({counts[best]} mentions)"
    return "", ""


def gemm_layout(kernel: Kernel, args: tuple[str, ...]) -> tuple[str, str]:
    """`nn` when B is indexed with a stride of N (B is K×N), `nt` with a stride of K (B stored
    N×K); the tutorial layout `nn` with a note when the body does not tell."""
    names = {a: p.name for a, p in zip(args, kernel.params)}
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
    text = re.sub(r"\((?:unsigned\s+)?(?:int|uint|unsigned|size_t|long)\)", "", text)
    text = re.sub(r"static_cast<[^>]*>", "", text)
    for _ in range(4):
        new = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: constants.get(m.group(0), m.group(0)), text)
        if new == text:
            break
        text = new
    text = re.sub(r"(?<=\d)[uUlL]+\b", "", text).replace("/", "//")
    text = _ceil_calls(text)
    text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: names.get(m.group(0), m.group(0)), text)
    text = text.replace(" ", "")
    for _ in range(3):  # (N) → N
        text = re.sub(r"(?<![A-Za-z_\w])\(([A-Za-z_]\w*|\d+)\)", r"\1", text)
    if not re.search(r"[A-Za-z_]", text.replace("ceil", "")):  # only numbers: the number
        try:
            value = launch_expr.dimension(text, {})
            return str(value)
        except ExpressionError:
            pass
    return text


def launch_geometry(launch: Launch | None, kernel: Kernel, args: tuple[str, ...], dims: tuple[str, ...],
                    constants: dict) -> tuple[list, list, dict, list[str]]:
    """(grid, block, [launch] table, notes) from the kernel's launch in host code, checked by
    evaluating them at a sample shape; a default with a note when there is none."""
    notes: list[str] = []
    if launch is not None:
        names = _host_names(launch, kernel, args, dims)
        # a host variable passed as a size stays a size, whatever constant of that name exists
        consts = {k: v for k, v in {**constants, **launch.constants}.items() if k not in names}
        grid = [translate(g, consts, names) for g in launch.grid]
        block = [translate(b, consts, names) for b in launch.block]
        sample = {d: 4096 for d in dims}
        try:
            grid = [int(g) if g.isdigit() else g for g in grid]
            block = [int(b) if str(b).isdigit() else b for b in block]
            launch_expr.dims3(grid, sample)
            launch_expr.dims3(block, sample)
        except ExpressionError as exc:
            notes.append(f"grid/block from {launch.file}:{launch.line} could not be read ({exc}): fill them in")
            return [PLACEHOLDER], [PLACEHOLDER], {}, notes
        table = {}
        shared = translate(launch.shared, consts, names)
        if shared.isdigit() and int(shared) > 0:
            table["dynamic_smem_bytes"] = int(shared)
        if all(isinstance(b, int) for b in block):
            threads = 1
            for b in block:
                threads *= b
            table["block_threads"] = threads
        return grid, block, table, notes
    notes.append("no launch of this kernel found in the repository's host code: grid and block are a guess "
                 "(one thread per output element in 16×16 blocks); check them against the kernel")
    if dims[:2] == ("M", "N") or dims == ("M", "N", "K"):
        return ["ceil(N/16)", "ceil(M/16)"], [16, 16], {"block_threads": 256}, notes
    return [f"ceil({'*'.join(dims)}/256)"], [256], {"block_threads": 256}, notes


def _host_names(launch: Launch, kernel: Kernel, args: tuple[str, ...], dims: tuple[str, ...]) -> dict[str, str]:
    """Host variable → op dimension, through the launch's argument list: a host name passed as
    several sizes (a square kernel called with N, N, N) keeps the dimension of its own name."""
    seen: dict[str, list[str]] = {}
    for host, op_arg in zip(launch.args, args):
        host = host.strip()
        if op_arg in dims and re.fullmatch(r"[A-Za-z_]\w*", host):
            seen.setdefault(host, []).append(op_arg)
    return {host: (host if host in ops else ops[0]) for host, ops in seen.items()}


def template_args(launch: Launch | None, constants: dict) -> tuple[list[str], str]:
    if launch is None or not launch.template_args:
        return [], ""
    consts = {**constants, **launch.constants}
    values = [translate(a, consts, {}).replace("//", "/") for a in launch.template_args]
    unresolved = [v for v in values if re.search(r"[A-Za-z_]", v) and v not in DTYPE_OF and v not in INT_TYPES]
    return values, (f"template arguments {unresolved} of the launch at {launch.file}:{launch.line} are not numbers "
                    f"flopwatch can read: set them in the instantiation" if unresolved else "")


# -- the files of a draft ------------------------------------------------------------------------

def variant_name(kernel: Kernel, taken: set[str]) -> str:
    """The kernel's name; a pybind11 function is named after its file (`dispatch_micro` is
    every HipKittens kernel's entry)."""
    raw = PurePosixPath(kernel.file).stem if kernel.kind == "pybind11" else kernel.name
    base = re.sub(r"[^A-Za-z0-9_.+-]", "_", raw).lstrip("_.+-")[:56] or "kernel"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def draft(kernel: Kernel, launch: Launch | None, file_text: str, out_dir: str, taken: set[str],
          constants: dict | None = None, include: str = "") -> Draft:
    """The variant folder for one kernel: `variant.toml` and the source that includes it
    (`include`: the repository-relative file to include, the kernel's own by default)."""
    constants = constants or {}
    backend = backend_of(kernel.file, file_text)
    name = variant_name(kernel, taken)
    folder = f"{out_dir.rstrip('/')}/{name}"
    include = include or kernel.file
    src_dir = str(PurePosixPath(include).parent)
    guess = guess_op(kernel, file_text)
    todo = list(guess.notes)
    if src_dir in ("", "."):
        todo.append(f"{include} is at the repository root: move it into a folder (shared include folders are "
                    f"shipped to the build node, the whole repository is not)")
    lines = [f"# Drafted by `flopwatch new` from {kernel.file}:{kernel.line} ({kernel.name}).",
             f'name = "{name}"']
    if guess.op:
        lines.append(f'op = "{guess.op}"')
    else:
        lines.append(f'op = "{PLACEHOLDER}"  # TODO: {guess.reason}')
        todo.insert(0, f"op: {guess.reason}")
    wrapper = f"{_safe_file(name)}{'.cu' if backend == 'cuda' else '.hip'}"
    lines += [f'backend = "{backend}"', f'sources = ["{wrapper}"]']
    op = guess.op or "gemm"
    module = OPS[op]
    if guess.op and guess.layout and len(module.LAYOUTS) > 1:
        lines.append(f'layout = "{guess.layout}"')
    alpha_beta = "alpha" in guess.args and "beta" in guess.args
    if alpha_beta:
        lines.append("alpha_beta = true")
    if guess.dtype:
        lines.append(f'dtypes = ["{guess.dtype}"]')
    else:
        lines.append(f'dtypes = ["{PLACEHOLDER}"]  # TODO: the element type of the inputs says no fp32/fp16/bf16')
        todo.append("dtypes: the inputs' element type is not fp32, fp16 or bf16 as flopwatch can tell")
    if guess.output_dtype:
        lines.append(f'output_dtype = "{guess.output_dtype}"')
    lines.append(f"shapes = {json.dumps(DEFAULT_SHAPES[op])}  # sizes to measure: {list(module.DIMS)}")
    lines.append(f'arches = ["{DEFAULT_ARCH[backend]}"]')
    targs, tnote = template_args(launch, constants)
    if tnote:
        todo.append(tnote)
    if kernel.template and not targs:
        todo.append(f"template <{kernel.template}>: no launch gives its arguments; write them in {wrapper}")
    lines += ["", "[binding]"]
    if kernel.kind == "pybind11":
        module_name = kernel.module if kernel.module != "TORCH_EXTENSION_NAME" else _safe_file(name)
        lines += ['kind = "pybind11"', f'module = "{module_name}"', f'entry = "{kernel.entry}"']
    else:
        lines += ['kind = "raw"', f'entry = "{kernel.name}"']
        args = guess.args if guess.op else tuple(p.name for p in kernel.params)
        lines.append(f"args = {json.dumps(list(args))}")
        grid, block, table, gnotes = launch_geometry(launch, kernel, guess.args, module.DIMS, constants)
        todo += gnotes
        lines += [f"grid = {json.dumps(grid)}", f"block = {json.dumps(block)}"]
        if table:
            if backend == "hip" and "dynamic_smem_bytes" in table:
                table["dynamic_lds_bytes"] = table.pop("dynamic_smem_bytes")
            lines += ["", "[launch]", *(f"{k} = {v}" for k, v in table.items())]
        if launch is not None:
            lines.insert(1, f"# Launch geometry from {launch.file}:{launch.line}.")
    files = {"variant.toml": "\n".join(lines) + "\n", wrapper: _wrapper_text(kernel, targs, include)}
    return Draft(name, folder, files, src_dir, guess.op, tuple(todo))


def _safe_file(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _wrapper_text(kernel: Kernel, targs: list[str], include: str) -> str:
    path = PurePosixPath(include)
    via = f" through {include}" if include != kernel.file else ""
    folder = str(path.parent) if str(path.parent) != "." else "the repository root"
    text = [f"// Drafted by `flopwatch new`: builds {kernel.name} from {kernel.file}{via}, unchanged;",
            f"// {folder} is a shared include folder of flopwatch.toml.",
            f'#include "{path.name}"']
    if kernel.template:
        types = ", ".join(p.type for p in kernel.params)
        args = ", ".join(targs) if targs else f"/* TODO: template arguments for <{kernel.template}> */"
        text += ["", "// The instantiation the launch in the repository's host code uses.",
                 f"template __global__ void {kernel.name}<{args}>({types});"]
    return "\n".join(text) + "\n"
