"""Operators registered with `TORCH_LIBRARY`: the schemas a `TORCH_LIBRARY(ns, m)` block defines
(`m.def("mymuladd(Tensor a, Tensor b, float c) -> Tensor")`), the devices of the
`TORCH_LIBRARY_IMPL(ns, CUDA, m)` blocks that give them kernels, and the package's Python
function that calls `torch.ops.ns.op` with the operator's arguments (extension-cpp's
`extension_cpp.ops:mymuladd`)."""

from __future__ import annotations

import ast
import re
import sys

from pipeline.onboarding.conventions import module_entries
from pipeline.onboarding.source.c_text import SOURCE_SUFFIXES, matching, strip_comments
from pipeline.onboarding.source.records import Entry, LibraryDef, LibraryImpl, LibraryOp, SchemaArg

GIVES = (LibraryDef, LibraryImpl)
_LIBRARY = re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT)?\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
_LIBRARY_IMPL = re.compile(r"\bTORCH_LIBRARY_IMPL\s*\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
# Dispatch keys → flopwatch device kinds (a CUDA kernel runs on ROCm after torch's hipify, but
# a draft names only what the repository says).
_DISPATCH_DEVICES = {"CPU": "cpu", "CUDA": "cuda", "HIP": "rocm"}


def matches(repo, rel: str) -> bool:
    """A C/C++ source with a `TORCH_LIBRARY` block."""
    return rel.endswith(SOURCE_SUFFIXES) and "TORCH_LIBRARY" in repo.text(rel)


def read(repo, rel: str) -> list[LibraryDef | LibraryImpl]:
    """The operators the file's TORCH_LIBRARY blocks define and the kernels its
    TORCH_LIBRARY_IMPL blocks register, in source order."""
    text = strip_comments(repo.text(rel))
    out: list[LibraryDef | LibraryImpl] = []
    for m in _LIBRARY.finditer(text):
        body = text[m.end():_block_end(text, m.end() - 1)]
        for d in re.finditer(rf"\b{m.group(2)}\s*\.\s*def\s*\(\s*\"((?:[^\"\\]|\\.)*)\"\s*(,)?", body):
            parsed = parse_schema(d.group(1))
            if parsed:
                line = text.count("\n", 0, m.end() + d.start()) + 1
                out.append(LibraryDef(m.group(1), *parsed, f"{rel}:{line}", bool(d.group(2))))
    for m in _LIBRARY_IMPL.finditer(text):
        body = text[m.end():_block_end(text, m.end() - 1)]
        device = _DISPATCH_DEVICES.get(m.group(2))
        for i in re.finditer(rf"\b{m.group(3)}\s*\.\s*impl\s*\(\s*\"([\w.]+)\"", body):
            if device:
                out.append(LibraryImpl(m.group(1), i.group(1).split(".")[0], device))
    return out


def library_ops(repo, sources: tuple[str, ...]) -> list[LibraryOp]:
    """The operators an extension's sources define, with the devices their TORCH_LIBRARY_IMPL
    blocks (in any of its sources) give kernels for."""
    found = [x for src in sources for x in repo.records(sys.modules[__name__], src)]
    impls: dict[tuple[str, str], set[str]] = {}
    for x in found:
        if isinstance(x, LibraryImpl):
            impls.setdefault((x.ns, x.name), set()).add(x.device)
    out = []
    for d in (x for x in found if isinstance(x, LibraryDef)):
        devices = ("cpu", "cuda") if d.with_function else \
            tuple(k for k in ("cpu", "cuda", "rocm") if k in impls.get((d.ns, d.name), ()))
        out.append(LibraryOp(d.ns, d.name, d.args, d.returns, d.origin, devices))
    return out


def parse_schema(schema: str) -> tuple[str, tuple[SchemaArg, ...], str] | None:
    """`"mymuladd(Tensor a, Tensor b, float c) -> Tensor"` → (name, args, returns), or None
    for a bare name (a schema torch infers from the C++ function). The overload is dropped."""
    m = re.fullmatch(r"\s*([\w.]+)\s*\((.*)\)\s*->\s*(.+?)\s*", schema, re.DOTALL)
    if not m:
        return None
    args = []
    depth, part, parts = 0, "", []
    for ch in m.group(2):
        depth += ch in "([" and 1 or ch in ")]" and -1 or 0
        if ch == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += ch
    parts.append(part)
    for raw in parts:
        raw = raw.split("=", 1)[0].strip()
        if not raw or raw == "*":  # `*` starts the keyword-only arguments
            continue
        type_, _, name = raw.rpartition(" ")
        args.append(SchemaArg(name.strip(), type_.strip()))
    return m.group(1).split(".")[0], tuple(args), m.group(3)


def _block_end(text: str, brace: int) -> int:
    end = matching(text, brace, "{", "}")
    return end if end > 0 else len(text)


def wrapper_of(op: LibraryOp, package: str, repo) -> tuple[str, str, Entry | None]:
    """(entry, where, the function as an entry) of the package's Python function that calls
    `torch.ops.ns.op` with the operator's arguments (extension-cpp's
    `extension_cpp.ops:mymuladd`), or ("", "", None); the modules of `package` (the one the
    extension's module lies in) first."""
    call = re.compile(rf"\btorch\.ops\.{op.ns}\.{op.name}\b")
    found = [(rel, repo.import_root(rel)[1]) for rel in repo.sources
             if rel.endswith(".py") and call.search(repo.text(rel))]
    for rel, dotted in sorted(found, key=lambda f: (f[1].split(".")[0] != package, f[0])):
        if not dotted or (tree := repo.tree(rel)) is None:
            continue
        text = repo.text(rel)
        for fn in tree.body:
            if (isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_")
                    and len(fn.args.args) == len(op.args) and call.search(ast.get_source_segment(text, fn) or "")):
                return f"{dotted}:{fn.name}", f"{rel}:{fn.lineno}", module_entries.entry_of(fn, rel)
    return "", "", None
