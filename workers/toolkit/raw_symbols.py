"""Which symbol of the built device code a raw binding's `entry` names.

A kernel written for a runtime compiler (hiprtc, NVRTC) is often not `extern "C"`: its symbol
is the C++ mangled name (`_Z12sgemm_kernelPKfS0_Pfiii`), and the runtime compiler's user looks it
up through a "name expression". The manifest names the kernel as its author does
(`sgemm_kernel`), so the build resolves that name against the kernels it just compiled, writes
the mapping next to the device code (`SYMBOLS_FILE`), and the raw binding loads the symbol. An
entry that names no kernel, or several, fails the build with the candidates listed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

SYMBOLS_FILE = "symbols.json"


def base_name(demangled: str) -> str:
    """`void ns::gemm<128>(float const*, int)` → `ns::gemm`; `gemm_raw` stays (pure)."""
    text = demangled.split("(", 1)[0].strip()
    text = text.removeprefix("void ")
    depth, out = 0, []
    for ch in text:  # drop template arguments, nested ones included
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip()


def template_spelling(name: str) -> str:
    """One spelling of a template instance's name: boolean casts as true/false, other casts
    before a literal and integer suffixes dropped, no spaces (`k<64u, (bool)1>` → `k<64,true>`)."""
    name = re.sub(r"\(bool\)\s*1\b", "true", name)
    name = re.sub(r"\(bool\)\s*0\b", "false", name)
    name = re.sub(r"\((?:unsigned |signed )?(?:char|short|int|long|long long|__int128)\)\s*(?=-?\d)", "", name)
    name = re.sub(r"\b(\d+)(?:ull|ul|ll|u|l)\b", r"\1", name, flags=re.IGNORECASE)
    return re.sub(r"\s+", "", name.replace("void ", "", 1))


def without_parameters(demangled: str) -> str:
    """A demangled name without its parameter list: cut at the first `(` outside template
    arguments and outside `(anonymous namespace)` (`k<(bool)1>(float*)` → `k<(bool)1>`)."""
    depth = 0
    for i, ch in enumerate(demangled):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0 and not demangled.startswith("(anonymous namespace)", i):
            return demangled[:i]
    return demangled


def resolve(entry: str, kernels: Mapping[str, str]) -> tuple[str | None, str]:
    """(symbol, problem) for `entry` among `kernels` ({symbol: demangled name}) (pure).

    The entry matches a symbol itself, a full demangled name, its name without parameters, or
    its unqualified name without template arguments — in that order, the first unique match
    wins."""
    if entry in kernels:
        return entry, ""
    tests = (lambda s, d: d == entry,
             lambda s, d: d.split("(", 1)[0].replace("void ", "", 1).strip() == entry,
             lambda s, d: base_name(d) == entry,
             lambda s, d: base_name(d).rsplit("::", 1)[-1] == entry,
             # A template instance as written in a manifest (`k<64, true>`) against the
             # demangler's spelling of it (`k<64u, (bool)1>`, `k<(int)64>` from cu++filt).
             lambda s, d: "<" in entry and template_spelling(without_parameters(d)) == template_spelling(entry))
    for test in tests:
        found = sorted({s for s, d in kernels.items() if test(s, d)})
        if len(found) == 1:
            return found[0], ""
        if len(found) > 1:
            listed = "; ".join(f"{s} = {kernels[s]}" for s in found[:6])
            return None, (f"binding.entry: {entry!r} names {len(found)} kernels ({listed}); "
                          f"write the one meant as entry (a symbol or the full name)")
    listed = ", ".join(sorted({kernels[s] for s in kernels})[:12]) or "none"
    return None, f"binding.entry: {entry!r} is not a kernel of this build (kernels: {listed})"


def write(out: Path, entry: str, symbol: str) -> None:
    if symbol != entry:
        (out / SYMBOLS_FILE).write_text(json.dumps({entry: symbol}))


def symbol_for(artifact: Path, entry: str) -> str:
    """The symbol to load for `entry` (itself unless the build mapped it)."""
    path = artifact / SYMBOLS_FILE
    if path.is_file():
        return json.loads(path.read_text()).get(entry, entry)
    return entry
