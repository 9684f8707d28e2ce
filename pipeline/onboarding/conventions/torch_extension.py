"""Torch extensions as their repositories build them with `torch.utils.cpp_extension`: a `load(...)`
in a bench script, `load_inline(...)`, setup.py's `CUDAExtension` / `CppExtension` (read by
`workers.torch_ext`, statically, else by running the setup.py in a sandboxed child), once per
file; the C++ functions each extension exports to Python (its PYBIND11_MODULE, or load_inline's
`functions`) with their parameters; and which of the repository's sources each builds."""

from __future__ import annotations

import re
import sys

from pipeline.onboarding.conventions.pybind import find_pybind_functions
from pipeline.onboarding.source.c_text import matching, parse_params, strip_comments
from pipeline.onboarding.source.records import Exported, Extensions
from workers.torch_ext import setup_run
from workers.torch_ext import spec as ext_spec

GIVES = (Extensions,)
_TENSOR_PARAM = re.compile(r"\b(?:torch::)?(?:Tensor|at::Tensor)\b")


def matches(repo, rel: str) -> bool:
    """A Python file naming `torch.utils.cpp_extension`."""
    # every build call is named through `torch.utils.cpp_extension`: a file without the word builds none
    return rel.endswith(".py") and "cpp_extension" in repo.text(rel)


def mentions(text: str) -> bool:
    """A file `init` asks the Python drafts about: it names torch.utils.cpp_extension's calls."""
    return bool(re.search(r"\b(load_inline|cpp_extension|CUDAExtension|CppExtension)\b", text))


def read(repo, rel: str) -> list[Extensions]:
    """The extensions the file builds, or why they could not be read."""
    try:
        specs = setup_run.read_extensions(rel, repo.text(rel), repo.root, repo.files, tree=repo.tree(rel),
                                          content=repo.raw(rel))
    except ext_spec.ExtensionReadError as exc:
        return [Extensions(rel, (), f"{exc}")]
    except setup_run.SetupRunError as exc:
        return [Extensions(rel, (), f"{rel}: {exc}")]
    return [Extensions(rel, tuple(specs))]


def extensions(repo, rel: str) -> Extensions:
    """The file's extensions, read once (none for a file that builds none)."""
    found = repo.records(sys.modules[__name__], rel)
    return found[0] if found else Extensions(rel)


def built_sources(repo) -> dict[str, str]:
    """Repository-relative source file → `file:line` of the torch.utils.cpp_extension call that
    builds it (setup.py's CUDAExtension / CppExtension, load(); load_inline's sources are text,
    not files): the files the kernel drafts leave to the torch extension drafts. A call
    flopwatch cannot read (`workers.torch_ext.spec`) is passed over: its files are drafted as
    kernels."""
    out: dict[str, str] = {}
    for rel in repo.scripts:
        for s in extensions(repo, rel).specs:
            for source in s.sources:
                out.setdefault(source, s.origin)
    return out


def exported(repo, spec: ext_spec.ExtensionSpec) -> list[Exported]:
    """The functions the extension's module exports, with their parameters and whether they
    return a tensor, read from the extension's sources."""
    texts = [repo.text(s) if s in repo.sources else "" for s in spec.sources] \
        + list(spec.cpp_sources) + list(spec.cuda_sources)
    joined = "\n".join(texts)
    names: list[tuple[str, str]] = []  # (python name, C++ name)
    if spec.kind == "load_inline":
        names = [(f, f) for f in spec.functions]
    else:
        for text in texts:
            names += [(k.entry, k.name) for k in find_pybind_functions(text, spec.origin)]
    out = []
    for py_name, cpp in names:
        params, returns = _signature(joined, cpp)
        out.append(Exported(py_name, params, returns, joined))
    return out


def _signature(text: str, cpp: str) -> tuple[tuple, bool]:
    """The parameters of C++ function `cpp` and whether it returns a tensor, from its first
    declaration or definition in `text`."""
    clean = strip_comments(text)
    m = re.search(rf"([\w:<>]+)\s*&?\s+{re.escape(cpp)}\s*\(", clean)
    if not m:
        return (), True
    close = matching(clean, m.end() - 1)
    params = parse_params(clean[m.end():close]) if close > 0 else ()
    return params, bool(_TENSOR_PARAM.search(m.group(1)))


def returns_tensor(type_text: str) -> bool:
    """A C++ type that is a tensor (`torch::Tensor`, `at::Tensor`)."""
    return bool(_TENSOR_PARAM.search(type_text))
