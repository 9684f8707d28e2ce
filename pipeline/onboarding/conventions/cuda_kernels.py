"""CUDA and HIP kernels as their sources write them: every `__global__` kernel defined in a
C/C++/CUDA/HIP file (through comments, `extern "C"`, `template <...>`, `__launch_bounds__(...)`
and `__restrict__`), every launch in host code (`k<<<grid, block, shared>>>(...)`,
`hipLaunchKernelGGL(k, grid, block, shared, stream, ...)`) with the grid, block and template
arguments written there, the host function it sits in and the sizes read off tensors
(`const int B = Q.size(0)`), and the file's type aliases (`typedef __half fw_half`)."""

from __future__ import annotations

import re

from pipeline.onboarding.source.c_text import (
    IDENT,
    function_spans,
    int_constants,
    local_values,
    matching,
    parse_params,
    split_top,
    strip_comments,
    tensor_sizes,
    type_aliases,
)
from pipeline.onboarding.source.records import Kernel, Launch, TypeAliases

GIVES = (Kernel, Launch, TypeAliases)


def matches(repo, rel: str) -> bool:
    """The repository's C/C++/CUDA/HIP sources, and any other file named as a kernel source."""
    # the repository's C/C++/CUDA/HIP sources, and any other file named as a kernel source
    return not rel.endswith(".py")


def read(repo, rel: str) -> list:
    """The file's kernels, its launches (in source order) and its type aliases."""
    text = repo.text(rel)
    aliases = type_aliases(text)
    return [*find_kernels(text, rel), *find_launches(text, rel), *([TypeAliases(rel, aliases)] if aliases else [])]


_ATTRIBUTES = re.compile(r"__launch_bounds__\s*\(|__attribute__\s*\(|\[\[")


def find_kernels(text: str, file: str) -> list[Kernel]:
    """Every `__global__` kernel defined in `text` (declarations without a body are skipped)."""
    clean = strip_comments(text)
    found = []
    for m in re.finditer(r"\b__global__\b", clean):
        i = m.end()
        # skip the return type and attributes up to the kernel's name and its '('
        while True:
            a = _ATTRIBUTES.search(clean, i)
            paren = clean.find("(", i)
            if paren < 0:
                break
            if a and a.start() < paren:
                close = matching(clean, clean.find("(", a.start()) if "(" in a.group(0) else a.start(),
                                  *(("(", ")") if "(" in a.group(0) else ("[", "]")))
                i = close + 1
                continue
            break
        if paren < 0:
            continue
        head = clean[m.end():paren]
        name_m = re.search(rf"({IDENT})\s*$", head)
        close = matching(clean, paren)
        if not name_m or close < 0:
            continue
        after = clean[close + 1:].lstrip()
        if not after.startswith("{"):
            continue  # a declaration
        body_start = clean.index("{", close)
        body_end = matching(clean, body_start, "{", "}")
        before = clean[max(0, m.start() - 400):m.start()]
        template = ""
        tm = re.search(r"template\s*<(.*)>\s*(?:extern\s+\"C\"\s*)?$", before, re.DOTALL)
        if tm and ";" not in tm.group(1) and "{" not in tm.group(1):
            template = " ".join(tm.group(1).split())
        extern_c = bool(re.search(r"extern\s+\"C\"\s*(\{[^}]*)?$", before)) or "extern \"C\"" in head
        found.append(Kernel(name=name_m.group(1), params=parse_params(clean[paren + 1:close]), file=file,
                            line=clean.count("\n", 0, m.start()) + 1, template=template, extern_c=extern_c,
                            body=clean[body_start:body_end + 1] if body_end > 0 else ""))
    return found



_CHEVRON = re.compile(rf"\b({IDENT})\s*(<[^;{{}}]*?>)?\s*<<<")
_GGL = re.compile(rf"\bhipLaunchKernelGGL\s*\(\s*(?:HIP_KERNEL_NAME\s*\(\s*)?({IDENT})\s*(<[^;{{}}]*?>)?")


def find_launches(text: str, file: str, extra_constants: dict | None = None) -> list[Launch]:
    """Every kernel launch in `text` with its configuration resolved against the `dim3`
    variables and integer constants defined before it."""
    clean = strip_comments(text)
    spans = function_spans(clean)
    found = []
    for m in _CHEVRON.finditer(clean):
        cfg_end = clean.find(">>>", m.end())
        if cfg_end < 0:
            continue
        config = split_top(clean[m.end():cfg_end])
        paren = clean.find("(", cfg_end)
        close = matching(clean, paren) if paren >= 0 else -1
        args = tuple(split_top(clean[paren + 1:close])) if close > 0 else ()
        found.append(_launch(clean, m.start(), m.group(1), m.group(2), config, args, file, extra_constants, spans))
    for m in _GGL.finditer(clean):
        open_ = clean.find("(", m.start())
        close = matching(clean, open_)
        parts = split_top(clean[open_ + 1:close]) if close > 0 else []
        if len(parts) < 5:
            continue
        found.append(_launch(clean, m.start(), m.group(1), m.group(2), [parts[1], parts[2], parts[3]],
                             tuple(parts[5:]), file, extra_constants, spans))
    return found


def _launch(clean: str, at: int, kernel: str, targs: str | None, config: list[str], args: tuple[str, ...],
            file: str, extra_constants: dict | None, spans: list[tuple[str, int, int]] = ()) -> Launch:
    before = clean[:at]
    inside = [s for s in spans if s[1] < at < s[2]]
    caller, body_start = (inside[-1][0], inside[-1][1]) if inside else ("", 0)
    # constants of this file, the nearest definition before the launch winning
    constants = {**(extra_constants or {}), **int_constants(before)}
    grid = _dim3(before, config[0] if config else "1")
    block = _dim3(before, config[1] if len(config) > 1 else "1")
    shared = config[2] if len(config) > 2 else "0"
    template_args = tuple(split_top(targs.strip()[1:-1])) if targs else ()
    return Launch(kernel=kernel, template_args=template_args, grid=grid, block=block, shared=shared,
                  args=tuple(" ".join(a.split()) for a in args), file=file, line=before.count("\n") + 1,
                  constants=constants, caller=caller, tensor_sizes=tensor_sizes(clean[body_start:at]),
                  locals=local_values(clean[body_start:at]) if body_start else {})


def _dim3(before: str, expr: str) -> tuple[str, ...]:
    """The dimensions of a launch's grid or block argument: `dim3(a, b)` inline, a variable
    defined as `dim3 g(a, b)`, `dim3 g = dim3(a, b)`, `auto g = dim3(a, b)` or `dim3 g{a, b}`
    before the launch, or a plain expression."""
    expr = expr.strip()
    inline = re.fullmatch(r"dim3\s*[({](.*)[)}]", expr, re.DOTALL)
    if inline:
        return tuple(" ".join(p.split()) for p in split_top(inline.group(1)))
    if re.fullmatch(IDENT, expr):
        defs = list(re.finditer(rf"\b(?:dim3|auto|const\s+dim3|const\s+auto)\s+{expr}\s*"
                                rf"(?:=\s*dim3\s*)?[({{](.*?)[)}}]\s*;", before, re.DOTALL))
        if defs:
            return tuple(" ".join(p.split()) for p in split_top(defs[-1].group(1)))
    return (" ".join(expr.split()),)
