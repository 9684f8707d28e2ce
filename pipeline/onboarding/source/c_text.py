"""C, C++, CUDA and HIP source as text: comments blanked, brackets matched, parameter lists
split, function bodies and declarations found, integer constants, type aliases, sizes read off
tensors and integer locals. A reader of ordinary kernel files, not a C++ parser: it sees
through comments, `extern "C"`, `template <...>`, `__launch_bounds__(...)` and `__restrict__`,
and says nothing about code it cannot follow. Pure functions over text."""

from __future__ import annotations

import functools
import re

from pipeline.onboarding.source.records import Param

SOURCE_SUFFIXES = (".cu", ".cuh", ".hip", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh")
IDENT = r"[A-Za-z_]\w*"


@functools.lru_cache(maxsize=64)  # a file's text is stripped once for its kernels, launches and aliases
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


def matching(text: str, start: int, open_: str = "(", close: str = ")") -> int:
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
    """A parameter list's text as parameters (`const float* __restrict__ A` → type, name)."""
    params = []
    for item in split_top(text):
        item = item.split("=", 1)[0].strip()
        if not item or item == "void":
            continue
        m = re.match(rf"^(.*?)({IDENT})\s*(\[[^\]]*\])?$", item, re.DOTALL)
        if m and m.group(1).strip() and not m.group(1).strip().endswith("::"):
            params.append(Param(" ".join((m.group(1) + ("*" if m.group(3) else "")).split()), m.group(2)))
        else:
            params.append(Param(" ".join(item.split()), ""))
    return tuple(params)


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
        close = matching(clean, m.end() - 1)
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
        open_ = matching_back(before, len(before) - 1)
        if open_ < 0:
            continue
        name = re.search(rf"({IDENT})\s*$", before[:open_])
        if not name or name.group(1) in ("if", "for", "while", "switch", "catch", "return", "sizeof") \
                or before[:name.start()].rstrip().endswith(("]", ".", "->", "=", "(")):
            continue
        end = matching(text, m.start(), "{", "}")
        if end > 0:
            spans.append((name.group(1), m.start(), end))
    return spans


def matching_back(text: str, close: int, open_: str = "(", close_: str = ")") -> int:
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


_TYPEDEF = re.compile(rf"\btypedef\s+((?:const\s+)?{IDENT}(?:::{IDENT})*)\s+({IDENT})\s*;"
                      rf"|\busing\s+({IDENT})\s*=\s*((?:const\s+)?{IDENT}(?:::{IDENT})*)\s*;")


def type_aliases(text: str) -> dict[str, str]:
    """`typedef __half fw_half;` and `using fw_half = __half;` → {"fw_half": "__half"}."""
    out = {}
    for m in _TYPEDEF.finditer(strip_comments(text)):
        alias, target = (m.group(2), m.group(1)) if m.group(2) else (m.group(3), m.group(4))
        out[alias] = target.replace("const ", "").split("::")[-1]
    return out


_INT_CONST = re.compile(rf"(?:#define\s+({IDENT})\s+\(?\s*([0-9][0-9xXa-fA-FuUlL]*)\s*\)?\s*$"
                        rf"|\b(?:static\s+)?(?:constexpr|const)\s+(?:unsigned\s+|signed\s+)?"
                        rf"(?:int|uint|long|size_t|unsigned|uint32_t|int32_t|int64_t|auto)?\s*({IDENT})\s*=\s*"
                        rf"([0-9][0-9xXa-fA-FuUlL]*)\s*;)", re.MULTILINE)


def int_constants(text: str) -> dict[str, str]:
    """`#define BLOCK 256` and `const uint BM = 64;` style integer constants of `text`."""
    out = {}
    for m in _INT_CONST.finditer(strip_comments(text)):
        name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        out[name] = value.rstrip("uUlL")
    return out


_TENSOR_SIZE = re.compile(rf"\b(?:const\s+)?(?:int|int64_t|long|long long|auto|size_t|unsigned|uint32_t|int32_t)\s+"
                          rf"({IDENT})\s*=\s*(?:\(\w+\)\s*)?({IDENT})\s*(?:\.|->)\s*(?:size\s*\(\s*(\d+)\s*\)"
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
                    rf"\s+({IDENT})\s*=\s*([^;{{}}=]+?)\s*;")


def local_values(text: str) -> dict[str, str]:
    """Integer variables set from an expression: `long long blocks = (n + 255) / 256;` →
    {"blocks": "(n + 255) / 256"} (the last setting of a name wins)."""
    return {m.group(1): " ".join(m.group(2).split()) for m in _LOCAL.finditer(text)}
