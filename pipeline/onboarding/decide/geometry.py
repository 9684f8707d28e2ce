"""A kernel's launch geometry in its op's sizes: the grid, block, dynamic shared memory and
template arguments of its launch in host code or a script, each host name read as the op
dimension it is passed as (through the kernel's argument list, or off the tensors passed:
`B = Q.size(0)`), C's integer `/` as `//`, `CEIL_DIV(a, b)` as `ceil(a/b)`, and checked by
evaluating them at a sample shape; one thread per output element, marked a guess, where there
is no launch or it cannot be read. Decisions over records."""

from __future__ import annotations

import re

from pipeline.onboarding.decide.arguments import args_per_param
from pipeline.onboarding.decide.dtypes import DTYPE_OF, INT_TYPES
from pipeline.onboarding.decide.sizes import tensor_axes
from pipeline.onboarding.source.c_text import split_top
from pipeline.onboarding.source.records import Kernel, Launch, PyLaunch
from workers.core.formula import ExpressionError
from workers.toolkit import launch_expr

_CEIL = ("CEIL_DIV", "ceil_div", "CEILDIV", "ceildiv", "cdiv", "DIV_UP", "div_up", "DIVUP", "iDivUp", "ceilDiv")
# sizeof() of the element types launch expressions use (dynamic shared memory in bytes).
_SIZEOF = {**{t: {"fp32": 4, "fp16": 2, "bf16": 2}[d] for t, d in DTYPE_OF.items()},
           "double": 8, "int": 4, "unsigned": 4, "uint32_t": 4, "int32_t": 4, "int64_t": 8, "long": 8,
           "char": 1, "int8_t": 1, "uint8_t": 1, "short": 2, "uint16_t": 2, "int16_t": 2}


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
    """A Python launch expression (`conventions.py_launch` syntax: `(N+64-1)//64`, `ceil(M/64)`,
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
    per_param = args_per_param(kernel, args)
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


def template_args(launch: Launch | PyLaunch | None, constants: dict) -> tuple[list[str], str]:
    """The template arguments of the launch, constants substituted, and a note naming those that
    are no number."""
    if launch is None or not launch.template_args:
        return [], ""
    consts = {**constants, **launch.constants}
    values = [translate(a, consts, {}).replace("//", "/") for a in launch.template_args]
    unresolved = [v for v in values if re.search(r"[A-Za-z_]", v) and v not in DTYPE_OF and v not in INT_TYPES]
    return values, (f"template arguments {unresolved} of the launch at {launch.file}:{launch.line} are not numbers "
                    f"flopwatch can read: set them in the instantiation" if unresolved else "")
