"""References kept by name: beside an entry `X`, a function `X_ref`, `ref_X`, `reference_X`,
`X_reference`, `torch_X`, `pytorch_X` or `naive_X` (Mamba's `selective_scan_fn` /
`selective_scan_ref`, extension-cpp's `reference_muladd`), or a class `Torch<X>` / `Naive<X>`
(an nn.Module, which `[reference]` cannot call as it is). The patterns are written here once;
so are the names an entry may go by (its own, without the prefix its module's functions share,
without words that say how it is built)."""

from __future__ import annotations

import ast
import re

from pipeline.onboarding.source.records import RefName
from pipeline.onboarding.source.repo import is_test

GIVES = (RefName,)
# The names a reference of `x` goes by, in the order they are tried.
PATTERNS = ("{x}_ref", "ref_{x}", "reference_{x}", "{x}_reference", "torch_{x}", "pytorch_{x}", "naive_{x}")
CLASS_PREFIXES = ("Torch", "Naive")
# A module that defines a reference beside its functions is an entry module for `init`; `torch_x`
# and `pytorch_x` are left out of that test: packages name plenty of helpers so (`torch_compile`).
_MARKERS = tuple(p for p in PATTERNS if not p.startswith(("torch_", "pytorch_")))
_HOLDS = re.compile(r"^def (" + "|".join(p.replace("{x}", r"\w+") for p in _MARKERS) + r")\s*\(", re.MULTILINE)
# Words around an op's name that say how it is built, not what it computes: `rms_norm_fwd`,
# `triton_softmax` are rms_norm and softmax. Anything else (`fused_neighborhood_attention`)
# makes another op.
QUALIFIERS = ("fwd", "forward", "fn", "func", "kernel", "impl", "op", "triton", "cuda", "torch", "in_place",
              "inplace", "fast", "my", "custom", "v2")


def matches(repo, rel: str) -> bool:
    """Any Python file: a reference may lie beside an entry, in its package or in a test."""
    return rel.endswith(".py")


def read(repo, rel: str) -> list[RefName]:
    """The file's top-level functions named as a reference is (`*_ref`, `torch_*`, ...) and its
    classes named `Torch*` / `Naive*` (the case and underscores aside), in source order."""
    tree = repo.tree(rel)
    if tree is None:
        return []
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and shaped(node.name):
            out.append(RefName(rel, node.name, node.lineno, "function"))
        elif isinstance(node, ast.ClassDef) and squash(node.name).startswith(("torch", "naive")):
            out.append(RefName(rel, node.name, node.lineno, "class", _built_bare(node)))
    return out


def shaped(name: str) -> bool:
    """Whether a name is shaped as a reference's (`X_ref`, `torch_X`, ...)."""
    return any(re.fullmatch(p.replace("{x}", r"\w+"), name) for p in PATTERNS)


def holds_reference(text: str) -> bool:
    """Whether a module defines a reference beside its functions (`def foo_ref`, `def naive_foo`)."""
    return bool(_HOLDS.search(text))


def holds_reference_of_its_own(text: str) -> bool:
    """Whether a module defines a reference of one of its own functions (`def foo` and `def
    foo_ref`): what marks a lone module (one outside any package) as a kernel's entry point, not
    a script that happens to keep a `ref_kernel` of something defined elsewhere."""
    defined = set(re.findall(r"^def (\w+)\s*\(", text, re.MULTILINE))
    return any(p.format(x=x) in defined for x in defined for p in _MARKERS)


def names_for(stems: list[str]) -> dict[str, str]:
    """Each name a reference of one of `stems` goes by → the stem."""
    return {c.format(x=x): x for x in stems for c in PATTERNS}


def class_names_for(stems: list[str]) -> set[str]:
    """The classes (squashed: lower case, no underscores) a reference of one of `stems` may be."""
    return {squash(p + x) for x in stems for p in CLASS_PREFIXES}


def mentions_class(text: str) -> bool:
    """The text defines a class `Torch...` or `Naive...` (a reference module, by name)."""
    return bool(re.search(r"class (Torch|Naive)", text))


def squash(name: str) -> str:
    """A name lower-cased without underscores: `Torch_RMSNorm` and `torchrmsnorm` are one."""
    return name.replace("_", "").lower()


def _built_bare(cls: ast.ClassDef) -> bool:
    """An nn.Module class built with no arguments: its __init__ takes none, or only defaults."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return True
    a = init.args
    positional = [*a.posonlyargs, *a.args][1:]
    return len(positional) <= len(a.defaults) and all(d is not None for d in a.kw_defaults)


# -- the names an entry goes by --------------------------------------------------------------------

def common_prefix(names: list[str]) -> str:
    """The prefix most of a module's public functions share, up to a word boundary (`liger_`),
    or a short one all share (`my` of `mymuladd`, `myadd_out`); "" when none."""
    if len(names) < 2:
        return ""
    counts: dict[str, int] = {}
    for n in names:
        if "_" in n:
            counts[n.split("_")[0] + "_"] = counts.get(n.split("_")[0] + "_", 0) + 1
    best = max(counts.items(), key=lambda kv: kv[1], default=("", 0))
    if best[1] * 2 > len(names) and best[1] >= 2:
        return best[0]
    shared = names[0]
    for n in names[1:]:
        while not n.startswith(shared):
            shared = shared[:-1]
    return shared if 2 <= len(shared) <= 3 and all(len(n) > len(shared) + 2 for n in names) else ""


def stems(name: str, prefix: str) -> list[str]:
    """The names an entry may go by: its own, without the repository's prefix, without
    qualifier words at either end (`liger_rms_norm_fwd` → rms_norm)."""
    out = [name]
    if prefix and name.startswith(prefix) and len(name) > len(prefix):
        out.append(name[len(prefix):])
    for n in list(out):
        words = n.split("_")
        while len(words) > 1 and words[0] in QUALIFIERS:
            words = words[1:]
        while len(words) > 1 and words[-1] in QUALIFIERS:
            words = words[:-1]
        joined = "_".join(words)
        for q in ("in_place", "inplace"):
            if joined.endswith("_" + q):
                joined = joined[:-len(q) - 1]
        out.append(joined)
    return list(dict.fromkeys(o for o in out if o))


def defined_anywhere(repo, name: str) -> tuple[str, str]:
    """(`path:function`, `path:line`) of a top-level function of the repository named as a
    reference of `name` or of `name` without a leading "my" (`def reference_muladd` for
    `mymuladd`), tests first; ("", "") when there is none."""
    bases = {name, name.removeprefix("my")} - {""}
    wanted = {p.format(x=b) for b in bases for p in PATTERNS}
    pattern = re.compile(rf"^def ({'|'.join(sorted(wanted))})\s*\(", re.MULTILINE)
    for rel in sorted((r for r in repo.sources if r.endswith(".py")), key=lambda r: (not is_test(r), r)):
        text = repo.text(rel)
        m = pattern.search(text)
        if m:
            return f"{rel}:{m.group(1)}", f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
    return "", ""
