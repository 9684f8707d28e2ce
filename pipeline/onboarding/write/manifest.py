"""The one writer of `variant.toml` lines: a guess marked on its line (`GUESS`), the "Drafted by"
header, the first line naming the reference, `[binding]`, `[[extensions]]`, inline tables and
the rows of `[reference] inputs`, the devices line; the names of drafts (unique, sanitised, after
a kernel's symbol or file) and paths written from a draft's folder; and the `Draft` itself, its
`entry` and `reference` said as fields, so that no later step reads them back from the text."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import PurePosixPath

from pipeline.onboarding.source.records import Draft, InputRow, Kernel, Reference

GUESS = "# TODO (guess)"
CHECK_NONE = 'check = "none"  # no reference found: measured as unchecked, its output kept per commit'


def draft(name: str, folder: str, lines: list[str], op: str, todo: list[str] | tuple = (), guessed: list[str] | tuple = (),
          include_dir: str = "", *, entry: str = "", reference: str = "", files: dict | None = None,
          extra_include_dirs: tuple[str, ...] = (), sizes: str = "", peer: str = "") -> Draft:
    """The draft whose `variant.toml` is `lines`, with its other `files`."""
    return Draft(name, folder, {"variant.toml": "\n".join(lines) + "\n", **(files or {})}, include_dir, op,
                 tuple(todo), tuple(guessed), extra_include_dirs, entry, reference, sizes, peer)


def field(key: str, value: str, why: str = "") -> str:
    """One manifest line; a guess carries its reason as a comment."""
    return f"{key} = {value}" + (f"  {GUESS}: {one_line(why)}" if why else "")


def one_line(text: str) -> str:
    """`text` on one line (whitespace runs as one space)."""
    return " ".join(str(text).split())


def drafted_by(origin: str) -> str:
    """A draft's header: where it was drafted from."""
    return f"# Drafted by `flopwatch new` from {origin}."


def common_lines(name: str, op: str, backend: str, origin: str) -> list[str]:
    """The header, name, op and back end of a Python-side draft."""
    return [drafted_by(origin), f'name = "{name}"', f'op = "{op}"', f'backend = "{backend}"']


def reference_label(ref: Reference) -> str:
    """What an entry is checked against, in the words of its draft's first line."""
    if ref.kind == "builtin":
        return f"built-in op {ref.op}"
    if ref.kind == "convention":
        where = f"{ref.module}:{ref.name}" if ref.module else f"{ref.file}:{ref.name}"
        return f"{where} (by name, {ref.file}:{ref.line})"
    if ref.kind == "test":
        return f"{ref.file}:{ref.line} ({ref.name}, compared by {ref.compared_by})"
    return "none found — measured as unchecked"


def first_line(label: str) -> str:
    """The first line of an entry's draft: what it is checked against."""
    return f"# reference: {label}"


def binding(kind: str, entry: str, returns: bool = False) -> list[str]:
    """A `[binding]` table of a Python-side draft."""
    return ["", "[binding]", f'kind = "{kind}"', f'entry = "{entry}"', *(["returns = true"] if returns else [])]


def extensions(origin: str, comment: str = "", name: str = "") -> list[str]:
    """An `[[extensions]]` table: the file that builds it, written from the draft's folder."""
    return ["", "[[extensions]]", f'from = "{origin}"' + (f"  # {comment}" if comment else ""),
            *([f'name = "{name}"'] if name else [])]


def devices_line(on_cpu: bool) -> str:
    """The draft's `devices`: the CPU too where the code runs there (a plain-torch Model, a C++
    load_inline), so a draft made on a machine without a GPU runs where it was drafted."""
    if on_cpu:
        return 'devices = ["cpu", "cuda"]  # no CUDA or Triton in the code: it runs on the CPU too'
    return 'devices = ["cuda"]  # CUDA or Triton code: GPUs only'


def inline(values: dict) -> str:
    """A TOML inline table of constants."""
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in values.items()) + " }"


def input_row(row: InputRow) -> str:
    """One row of `[reference] inputs`, as an inline table."""
    if row.shape is None:
        return "{ " + f'name = "{row.name}", value = {json.dumps(row.value)}' + " }"
    fields = [f'name = "{row.name}"', f"shape = {json.dumps(list(row.shape))}"]
    if row.dtype:
        fields.append(f'dtype = "{row.dtype}"')
    if row.high is not None:
        fields.append(f"high = {row.high}")
    if row.output:
        fields.append("output = true")
    return "{ " + ", ".join(fields) + " }"


# -- names -------------------------------------------------------------------------------------------

def from_folder(folder: str, rel: str) -> str:
    """`rel` (repository-relative) as written from the draft's folder: `../../x/y.py`."""
    return "../" * len(PurePosixPath(folder).parts) + rel


def base_names(kernels: list[Kernel]) -> list[str]:
    """The name each kernel's draft starts from, in order: its symbol, unless the symbol repeats
    across the drafted files (eleven files each defining `matmul_kernel`): then its file's stem,
    or `<stem>_<symbol>` when that file has several kernels drafted. A pybind11 function is
    named after its file (`dispatch_micro` is every HipKittens kernel's entry), `<stem>_<entry>`
    when its module exports several."""
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
    unique among `taken` (which it joins)."""
    raw = base or (PurePosixPath(kernel.file).stem if kernel.kind == "pybind11" else kernel.name)
    base = re.sub(r"[^A-Za-z0-9_.+-]", "_", raw).lstrip("_.+-")[:56] or "kernel"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def safe_file(name: str) -> str:
    """A draft's name as a file or module name."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)
