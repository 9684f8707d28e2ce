"""Read kernel sources as text: the `__global__` kernels and their parameters, the functions a
pybind11 module exports (with their return type), and where host code launches a kernel
(`k<<<grid, block>>>(...)`, `hipLaunchKernelGGL(k, grid, block, ...)`) with the grid, block and
template arguments written there, the host function the launch sits in, and the host sizes
read off tensors (`const int B = Q.size(0)`). Pure functions over source text; `flopwatch new`
drafts manifests from them.

This is a reader of ordinary kernel files, not a C++ parser: it sees through comments,
`extern "C"`, `template <...>`, `__launch_bounds__(...)` and `__restrict__`, and says nothing
about code it cannot follow (the draft then marks what the user must fill in).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SOURCE_SUFFIXES = (".cu", ".cuh", ".hip", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh")
_IDENT = r"[A-Za-z_]\w*"


@dataclass(frozen=True)
class Param:
    """One kernel parameter: `const float* __restrict__ A` → type `const float*`, name `A`."""

    type: str
    name: str

    @property
    def pointer(self) -> bool:
        return "*" in self.type

    @property
    def element(self) -> str:
        """The pointed-to or plain type without qualifiers: `float`, `__half`, `int`."""
        split = [w for w in re.split(r"[\s*&]+", self.type) if w]
        words = [w for w in split if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict", "struct",
                                               "unsigned", "signed")]
        base = " ".join(words) or "int"
        return ("unsigned " + base) if "unsigned" in split else base


@dataclass(frozen=True)
class Kernel:
    """A `__global__` kernel definition (kind `global`) or a function a pybind11 module exports
    (kind `pybind11`, `entry` its Python name, `module` the module's)."""

    name: str
    params: tuple[Param, ...]
    file: str
    line: int
    kind: str = "global"
    template: str = ""  # the text inside `template <...>`, empty if none
    extern_c: bool = False
    body: str = ""
    entry: str = ""
    module: str = ""
    doc: str = ""  # pybind11: the docstring given to m.def
    returns: str = ""  # pybind11: the C++ return type (`torch::Tensor`, `void`), "" if not seen


@dataclass(frozen=True)
class Launch:
    """A launch of `kernel` in host code, its configuration as written there (expressions in
    the host's names, local constants already substituted where they are plain numbers)."""

    kernel: str
    template_args: tuple[str, ...]
    grid: tuple[str, ...]
    block: tuple[str, ...]
    shared: str
    args: tuple[str, ...]
    file: str
    line: int
    constants: dict = field(default_factory=dict)
    caller: str = ""  # the host function the launch is written in ("" at file level or unknown)
    # host variable → (tensor variable, dimension): `const int B = Q.size(0);` gives B → (Q, 0)
    tensor_sizes: dict = field(default_factory=dict)
    # host variable → the expression it is set to in the launching function, before the launch:
    # `long long blocks = (n + 255) / 256;` gives blocks → "(n + 255) / 256"
    locals: dict = field(default_factory=dict)


def strip_comments(text: str) -> str:
    """`text` with comments blanked (newlines kept, so line numbers hold) and string literals
    left alone."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _matching(text: str, start: int, open_: str = "(", close: str = ")") -> int:
    """Index of the bracket closing the one at `start`, or -1."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i
    return -1


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside (), <>, [] and {} (pure)."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    tail = "".join(cur).strip()
    if tail:
        parts.append(tail)
    return parts


def parse_params(text: str) -> tuple[Param, ...]:
    params = []
    for item in split_top(text):
        item = item.split("=", 1)[0].strip()
        if not item or item == "void":
            continue
        m = re.match(rf"^(.*?)({_IDENT})\s*(\[[^\]]*\])?$", item, re.DOTALL)
        if m and m.group(1).strip() and not m.group(1).strip().endswith("::"):
            params.append(Param(" ".join((m.group(1) + ("*" if m.group(3) else "")).split()), m.group(2)))
        else:
            params.append(Param(" ".join(item.split()), ""))
    return tuple(params)


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
                close = _matching(clean, clean.find("(", a.start()) if "(" in a.group(0) else a.start(),
                                  *(("(", ")") if "(" in a.group(0) else ("[", "]")))
                i = close + 1
                continue
            break
        if paren < 0:
            continue
        head = clean[m.end():paren]
        name_m = re.search(rf"({_IDENT})\s*$", head)
        close = _matching(clean, paren)
        if not name_m or close < 0:
            continue
        after = clean[close + 1:].lstrip()
        if not after.startswith("{"):
            continue  # a declaration
        body_start = clean.index("{", close)
        body_end = _matching(clean, body_start, "{", "}")
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


def find_pybind_functions(text: str, file: str) -> list[Kernel]:
    """The functions of `PYBIND11_MODULE(name, m)`: `m.def("py_name", &cpp_function, "doc")`
    (also through `torch::wrap_pybind_function(f)` and `py::overload_cast<...>(&f)`), with the
    C++ function's parameters and return type where it is declared or defined in the same text
    (`find_function` reads them from another file)."""
    clean = strip_comments(text)
    mod = re.search(rf"PYBIND11_MODULE\s*\(\s*({_IDENT})\s*,\s*({_IDENT})\s*\)", clean)
    if not mod:
        return []
    module, var = mod.group(1), mod.group(2)
    wrapped = rf"(?:{_IDENT}(?:::{_IDENT})*(?:\s*<[^;()]*>)?\s*\(\s*)?"  # wrap_pybind_function( / overload_cast<..>(
    found = []
    for d in re.finditer(rf"\b{var}\s*\.\s*def\s*\(\s*\"([^\"]+)\"\s*,\s*{wrapped}&?\s*({_IDENT}(?:::{_IDENT})*)"
                         rf"\s*\)?(?:\s*,\s*\"([^\"]*)\")?", clean[mod.end():]):
        py_name, cpp_name, doc = d.group(1), d.group(2).split("::")[-1], d.group(3) or ""
        fn = find_function(clean, cpp_name)
        line = clean.count("\n", 0, mod.start()) + 1
        params, returns = (), ""
        if fn is not None:
            params, returns, line = fn
        found.append(Kernel(name=cpp_name, params=params, file=file, line=line, kind="pybind11", entry=py_name,
                            module=module, doc=doc, returns=returns))
    return found


_NOT_A_TYPE = {"return", "else", "case", "new", "delete", "throw", "co_return", "sizeof", "typedef", "using"}
_SPECIFIERS = {"static", "inline", "extern", "constexpr", "virtual", "explicit", "TORCH_API", "__host__",
               "__device__", "__forceinline__"}


def find_function(text: str, name: str, definition: bool = False) -> tuple[tuple[Param, ...], str, int] | None:
    """(parameters, return type, line) of the C++ function `name` declared or defined in `text`
    (a definition preferred over a declaration; with `definition`, only a definition); None
    when `text` has neither. Calls of `name` are told apart by what precedes them: a
    declaration starts a statement with a type."""
    clean = "\n" + strip_comments(text)  # a head on the first line starts after a newline too
    best = None
    for m in re.finditer(rf"(?<![\w.>:]){re.escape(name)}\s*\(", clean):
        start = max(clean.rfind(c, 0, m.start()) for c in ";{}")
        directive = clean.rfind("\n#", 0, m.start())
        if directive > start:  # the head starts after a preprocessor line
            start = clean.find("\n", directive + 1)
        head = " ".join(clean[start + 1:m.start()].split())
        words = [w for w in re.split(r"[\s*&]+", head) if w]
        if not words or not re.fullmatch(r"[\w:<>,\s*&]+", head) or words[-1] in _NOT_A_TYPE \
                or any(w in _NOT_A_TYPE for w in words):
            continue
        close = _matching(clean, m.end() - 1)
        if close < 0:
            continue
        after = re.match(r"\s*(?:const\s*|noexcept\s*|override\s*)*([{;])", clean[close + 1:])
        if not after:
            continue
        returns = " ".join(w for w in head.split() if w not in _SPECIFIERS)
        found = (parse_params(clean[m.end():close]), returns, clean.count("\n", 0, m.start()))
        if after.group(1) == "{":
            return found
        best = best or found
    return None if definition else best


def function_spans(text: str) -> list[tuple[str, int, int]]:
    """(name, body start, body end) of every function body in comment-free `text`: a `{`
    after `name(...)` (and `const`, `noexcept`, an initialiser list) that is not a control
    statement, a lambda or a macro call. Pure; nested bodies are listed too (innermost last)."""
    spans = []
    for m in re.finditer(r"\{", text):
        before = text[max(0, m.start() - 2000):m.start()].rstrip()
        before = re.sub(r"(?:\bconst|\bnoexcept|\boverride|->\s*[\w:<>]+)\s*$", "", before).rstrip()
        if not before.endswith(")"):
            continue
        open_ = _matching_back(before, len(before) - 1)
        if open_ < 0:
            continue
        name = re.search(rf"({_IDENT})\s*$", before[:open_])
        if not name or name.group(1) in ("if", "for", "while", "switch", "catch", "return", "sizeof") \
                or before[:name.start()].rstrip().endswith(("]", ".", "->", "=", "(")):
            continue
        end = _matching(text, m.start(), "{", "}")
        if end > 0:
            spans.append((name.group(1), m.start(), end))
    return spans


def _matching_back(text: str, close: int, open_: str = "(", close_: str = ")") -> int:
    """Index of the bracket opening the one at `close`, or -1."""
    depth = 0
    for i in range(close, -1, -1):
        if text[i] == close_:
            depth += 1
        elif text[i] == open_:
            depth -= 1
            if depth == 0:
                return i
    return -1


_TYPEDEF = re.compile(rf"\btypedef\s+((?:const\s+)?{_IDENT}(?:::{_IDENT})*)\s+({_IDENT})\s*;"
                      rf"|\busing\s+({_IDENT})\s*=\s*((?:const\s+)?{_IDENT}(?:::{_IDENT})*)\s*;")


def type_aliases(text: str) -> dict[str, str]:
    """`typedef __half fw_half;` and `using fw_half = __half;` → {"fw_half": "__half"}."""
    out = {}
    for m in _TYPEDEF.finditer(strip_comments(text)):
        alias, target = (m.group(2), m.group(1)) if m.group(2) else (m.group(3), m.group(4))
        out[alias] = target.replace("const ", "").split("::")[-1]
    return out


# -- launches in host code --------------------------------------------------------------------------

_CHEVRON = re.compile(rf"\b({_IDENT})\s*(<[^;{{}}]*?>)?\s*<<<")
_GGL = re.compile(rf"\bhipLaunchKernelGGL\s*\(\s*(?:HIP_KERNEL_NAME\s*\(\s*)?({_IDENT})\s*(<[^;{{}}]*?>)?")
_INT_CONST = re.compile(rf"(?:#define\s+({_IDENT})\s+\(?\s*([0-9][0-9xXa-fA-FuUlL]*)\s*\)?\s*$"
                        rf"|\b(?:static\s+)?(?:constexpr|const)\s+(?:unsigned\s+|signed\s+)?"
                        rf"(?:int|uint|long|size_t|unsigned|uint32_t|int32_t|int64_t|auto)?\s*({_IDENT})\s*=\s*"
                        rf"([0-9][0-9xXa-fA-FuUlL]*)\s*;)", re.MULTILINE)


def int_constants(text: str) -> dict[str, str]:
    """`#define BLOCK 256` and `const uint BM = 64;` style integer constants of `text`."""
    out = {}
    for m in _INT_CONST.finditer(strip_comments(text)):
        name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        out[name] = value.rstrip("uUlL")
    return out


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
        close = _matching(clean, paren) if paren >= 0 else -1
        args = tuple(split_top(clean[paren + 1:close])) if close > 0 else ()
        found.append(_launch(clean, m.start(), m.group(1), m.group(2), config, args, file, extra_constants, spans))
    for m in _GGL.finditer(clean):
        open_ = clean.find("(", m.start())
        close = _matching(clean, open_)
        parts = split_top(clean[open_ + 1:close]) if close > 0 else []
        if len(parts) < 5:
            continue
        found.append(_launch(clean, m.start(), m.group(1), m.group(2), [parts[1], parts[2], parts[3]],
                             tuple(parts[5:]), file, extra_constants, spans))
    return found


_TENSOR_SIZE = re.compile(rf"\b(?:const\s+)?(?:int|int64_t|long|long long|auto|size_t|unsigned|uint32_t|int32_t)\s+"
                          rf"({_IDENT})\s*=\s*(?:\(\w+\)\s*)?({_IDENT})\s*(?:\.|->)\s*(?:size\s*\(\s*(\d+)\s*\)"
                          rf"|sizes\s*\(\s*\)\s*\[\s*(\d+)\s*\]|shape\s*\[\s*(\d+)\s*\])\s*[;,]")


def tensor_sizes(text: str) -> dict[str, tuple[str, int]]:
    """Host sizes read off tensors: `const int B = Q.size(0);`, `int64_t n = x.sizes()[1];` →
    {"B": ("Q", 0), "n": ("x", 1)} (the last definition of a name wins)."""
    out = {}
    for m in _TENSOR_SIZE.finditer(text):
        out[m.group(1)] = (m.group(2), int(next(g for g in m.groups()[2:] if g is not None)))
    return out


_LOCAL = re.compile(rf"\b(?:const\s+|constexpr\s+|static\s+)*(?:unsigned\s+|signed\s+)?"
                    rf"(?:int|long long|long|size_t|unsigned|int64_t|int32_t|uint32_t|uint64_t|auto|uint|dim_t)"
                    rf"\s+({_IDENT})\s*=\s*([^;{{}}=]+?)\s*;")


def local_values(text: str) -> dict[str, str]:
    """Integer variables set from an expression: `long long blocks = (n + 255) / 256;` →
    {"blocks": "(n + 255) / 256"} (the last setting of a name wins)."""
    return {m.group(1): " ".join(m.group(2).split()) for m in _LOCAL.finditer(text)}


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
    if re.fullmatch(_IDENT, expr):
        defs = list(re.finditer(rf"\b(?:dim3|auto|const\s+dim3|const\s+auto)\s+{expr}\s*"
                                rf"(?:=\s*dim3\s*)?[({{](.*?)[)}}]\s*;", before, re.DOTALL))
        if defs:
            return tuple(" ".join(p.split()) for p in split_top(defs[-1].group(1)))
    return (" ".join(expr.split()),)
