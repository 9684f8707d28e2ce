"""pybind11 modules: the functions a `PYBIND11_MODULE(name, m)` block exports with
`m.def("py_name", &cpp_function, "doc")` (also through `torch::wrap_pybind_function(f)` and
`py::overload_cast<...>(&f)`), with the C++ function's parameters and return type where the
same file declares or defines it."""

from __future__ import annotations

import re

from pipeline.onboarding.source.c_text import IDENT, find_function, strip_comments
from pipeline.onboarding.source.records import Kernel

GIVES = (Kernel,)


def matches(repo, rel: str) -> bool:
    """A C/C++ file with a `PYBIND11_MODULE` block."""
    return not rel.endswith(".py") and "PYBIND11_MODULE" in repo.text(rel)


def read(repo, rel: str) -> list[Kernel]:
    """The functions the file's module exports, in the order it defines them."""
    return find_pybind_functions(repo.text(rel), rel)


def find_pybind_functions(text: str, file: str) -> list[Kernel]:
    """The functions of `PYBIND11_MODULE(name, m)`: `m.def("py_name", &cpp_function, "doc")`
    (also through `torch::wrap_pybind_function(f)` and `py::overload_cast<...>(&f)`), with the
    C++ function's parameters and return type where it is declared or defined in the same text
    (`find_function` reads them from another file)."""
    clean = strip_comments(text)
    mod = re.search(rf"PYBIND11_MODULE\s*\(\s*({IDENT})\s*,\s*({IDENT})\s*\)", clean)
    if not mod:
        return []
    module, var = mod.group(1), mod.group(2)
    wrapped = rf"(?:{IDENT}(?:::{IDENT})*(?:\s*<[^;()]*>)?\s*\(\s*)?"  # wrap_pybind_function( / overload_cast<..>(
    found = []
    for d in re.finditer(rf"\b{var}\s*\.\s*def\s*\(\s*\"([^\"]+)\"\s*,\s*{wrapped}&?\s*({IDENT}(?:::{IDENT})*)"
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


