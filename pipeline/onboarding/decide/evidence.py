"""What the rest of the repository says about a kernel or a module function, picked from what the
readers read once: its launch in host code or a script (and so its geometry), the script's
tensors and sizes, the file defining a function a module only declares, the kernels a module
function launches, the header through which the repository includes a kernel header, how the
repository compiles the kernel's file (a hiprtc script makes it HIP), and the tensors the
repository's scripts pass a callee. Decisions over records."""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import re
from pathlib import Path, PurePosixPath

from pipeline.onboarding.conventions import cuda_kernels, module_entries, py_launch, pybind, script_values
from pipeline.onboarding.conventions.bench_script import is_bench
from pipeline.onboarding.decide.dtypes import DTYPE_OF
from pipeline.onboarding.source.c_text import find_function
from pipeline.onboarding.source.records import (
    Evidence,
    HostCode,
    Kernel,
    Launch,
    PyLaunch,
    TensorMade,
    TypeAliases,
)
from pipeline.onboarding.source.repo import is_test

DEFAULT_ARCH = {"cuda": "sm_90a", "hip": "gfx942"}
_HEADERS = (".cuh", ".h", ".hpp", ".hh")
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def host_code(repo) -> HostCode:
    """The launches, exported functions and type aliases of the repository's host code, and the
    launches of its scripts."""
    launches: dict[str, list[Launch]] = {}
    exported: dict[str, Kernel] = {}
    aliases: dict[str, str] = {}
    clashing: set[str] = set()
    for rel in repo.host:
        for x in repo.records(cuda_kernels, rel):
            if isinstance(x, Launch):
                launches.setdefault(x.kernel, []).append(x)  # the first launch found: a big-shape branch first
            elif isinstance(x, TypeAliases):
                for alias, target in x.aliases.items():
                    if aliases.get(alias, target) != target and DTYPE_OF.get(aliases[alias]) != DTYPE_OF.get(target):
                        clashing.add(alias)
                    aliases.setdefault(alias, target)
        for fn in repo.records(pybind, rel):
            exported.setdefault(fn.name, fn)
    py_launches = tuple((rel, x) for rel in repo.scripts for x in repo.records(py_launch, rel))
    return HostCode(launches, py_launches, exported, {k: v for k, v in aliases.items() if k not in clashing})


def kernels_in(repo, rel: str) -> list[Kernel]:
    """The `__global__` kernels the file defines."""
    return [x for x in repo.records(cuda_kernels, rel) if isinstance(x, Kernel)]


def with_constants(launch: Launch, constants: dict[str, str]) -> Launch:
    """The launch with the kernels' files' constants under those of its own file."""
    return dataclasses.replace(launch, constants={**constants, **launch.constants})


def exported_callers(launches: list[Launch], exported: dict[str, Kernel]) -> list[Kernel]:
    """The exported functions a kernel is launched from, when every launch sits in one."""
    if not launches or not all(x.caller in exported for x in launches):
        return []
    return [exported[x.caller] for x in launches]


def complete(repo, fn: Kernel) -> Kernel:
    """A module function whose parameters its module's file does not give: those of its
    definition elsewhere in the repository."""
    if fn.params:
        return fn
    for rel in repo.host:
        found = find_function(repo.text(rel), fn.name, definition=True)
        if found:
            return dataclasses.replace(fn, params=found[0], returns=found[1])
    return fn


def kernel_evidence(repo, host: HostCode, k: Kernel, launches: dict[str, list]) -> tuple:
    """(the launch the draft's geometry comes from, what the launching script says)."""
    cxx = launches.get(k.name, [])
    same_file = kernels_in(repo, k.file) if k.file in set(repo.host) else [k]
    scripted = [(script, x) for script, x in host.py_launches if _launches(x, k, len(same_file) <= 1)]
    launch = cxx[0] if cxx else scripted[0][1] if scripted else None
    # a script compiling the file with hiprtc makes every kernel of it HIP, launched there or not
    apis = {x.api for _, x in host.py_launches for other in same_file if _launches(x, other, len(same_file) <= 1)}
    backend = "hip" if apis == {"hip"} else "cuda" if apis and "hip" not in apis else ""
    if not scripted:
        return launch, Evidence(type_aliases=host.type_aliases, backend=backend)
    script, py = scripted[0]
    return launch, Evidence(script=script, tensors=tuple(script_values.tensors(repo, script)),
                            sizes=script_values.sizes(repo, script), call_args=py.args,
                            type_aliases=host.type_aliases, backend=backend)


def _launches(launch: PyLaunch, k: Kernel, alone: bool) -> bool:
    """Whether a script's launch launches kernel `k`: its name (or, unnamed, the only kernel of
    a file it compiles) and, where the script's sources are known, `k`'s file among them."""
    if launch.inline and not launch.sources:
        return False  # the kernel is written in the script itself
    named = launch.kernel == k.name or (not launch.kernel and alone and bool(launch.sources))
    if not named:
        return False
    return not launch.sources or any(fnmatch.fnmatchcase(k.file, pattern) for pattern in launch.sources)


def module_evidence(repo, host: HostCode, fn: Kernel, module_text: str) -> Evidence:
    """What the repository says about a module function: the file defining it (when the module
    only declares it), the kernels it launches, and the script calling it."""
    includes: tuple[str, ...] = ()
    defining = fn.file
    if find_function(module_text, fn.name, definition=True) is None:
        for rel in repo.host:
            if rel != fn.file and find_function(repo.text(rel), fn.name, definition=True):
                defining = rel
                includes = (defining,)
                break
    launched = []
    for name, found in host.launches.items():
        if any(x.caller == fn.name and x.file in (defining, fn.file) for x in found):
            launched += [k for rel in repo.host for k in kernels_in(repo, rel) if k.name == name][:1]
    evidence = Evidence(type_aliases=host.type_aliases, launched=tuple(launched), includes=includes)
    for script in repo.scripts:
        if f".{fn.entry}(" not in repo.text(script):
            continue
        tensors = script_values.tensors(repo, script)
        made = {t.name for t in tensors if t.name}
        for call in script_values.calls(repo, script):
            prefix, _, entry = call.callee.rpartition(".")
            if entry != fn.entry or not prefix:
                continue
            if fn.module != "TORCH_EXTENSION_NAME" and prefix.split(".")[-1] != fn.module:
                continue
            if fn.module == "TORCH_EXTENSION_NAME" and not (call.args and all(a in made for a in call.args)
                                                            and len(call.args) == len(fn.params)):
                continue  # `forward` is a common name: only a call with the function's tensors counts
            return dataclasses.replace(evidence, script=script, tensors=tuple(tensors),
                                       sizes=script_values.sizes(repo, script), call_args=call.args,
                                       module=prefix.split(".")[-1] if fn.module == "TORCH_EXTENSION_NAME" else "")
    return evidence


def backend_of(kernel_file: str, text: str, launch: Launch | PyLaunch | None = None, hint: str = "") -> str:
    """`cuda` or `hip` from the file's name, what it includes, and how scripts compile it
    (`hint`) or launch it (hiprtc kernels often include nothing that says HIP)."""
    suffix = PurePosixPath(kernel_file).suffix
    if suffix in (".cu", ".cuh"):
        return "cuda"
    if suffix == ".hip" or re.search(r"hip/hip_runtime|hipLaunchKernelGGL|hip_fp16|__HIP", text):
        return "hip"
    if hint:
        return hint
    if isinstance(launch, PyLaunch) and launch.api == "hip":
        return "hip"
    return "cuda"


def kernel_backend(kernel: Kernel, file_text: str, launch: Launch | PyLaunch | None, evidence: Evidence) -> str:
    """How the kernel's draft builds: `backend_of` its file, CUDA where it must compile a `.cu`
    file defining a function its module only declares."""
    if any(PurePosixPath(f).suffix in (".cu", ".cuh") for f in evidence.includes):
        return "cuda"
    return backend_of(kernel.file, file_text, launch, evidence.backend)


def umbrella_header(root: Path, file: Path, sources: dict[Path, str]) -> str:
    """The header through which the repository's own code includes a kernel header (siboehm's
    `kernels.cuh` includes every kernel, and kernel 11 uses a constant kernel 10 defines), so a
    draft compiles the kernel as the repository does; the file itself when none does."""
    if file.suffix not in _HEADERS:
        return file.relative_to(root).as_posix()
    current, seen = file.resolve(), set()
    while current not in seen:
        seen.add(current)
        parent = next((h for h, text in sources.items() if h.suffix in _HEADERS and h.resolve() != current
                       and any((h.parent / inc).resolve() == current for inc in _INCLUDE.findall(text))), None)
        if parent is None:
            break
        current = parent.resolve()
    return current.relative_to(root.resolve()).as_posix()


def tensors_passed(repo, callee_words: tuple[str, ...], arity: int) -> list[TensorMade]:
    """Tensors made by the scripts that call one of `callee_words` (the entry's name), the
    first `arity` of each script."""
    made: list[TensorMade] = []
    for path in repo.sources:
        if not path.endswith(".py"):
            continue
        text = repo.text(path)
        if not any(re.search(rf"\b{re.escape(w)}\s*\(", text) for w in callee_words):
            continue
        found = [t for t in script_values.tensors(repo, path) if t.shape]
        made += found[:max(arity, 1)]
    return made


def called_by_packages(repo, modules: list[str]) -> dict[str, str]:
    """`module.function` (the callee's last two words) → `file:line` of each call the packages
    of the entry modules `modules` make (tests and benchmark scripts aside): the extension
    functions those entries wrap (`causal_conv1d_cuda.causal_conv1d_fwd`, called from the
    autograd Function behind `causal_conv1d_fn`)."""
    out: dict[str, str] = {}
    packages = {repo.package_of(m) for m in modules if repo.import_root(m)[0]} - {""}
    for path in repo.scripts:
        tree = repo.tree(path)
        if tree is None or is_test(path) or is_bench(path) or not any(path.startswith(p + "/") for p in packages):
            continue
        imports = module_entries.module_imports(tree)
        for node in ast.walk(tree):  # `conv_ext.conv_fwd(...)`: a module's function, by its dotted name
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value,
                                                                                               ast.Name):
                head = imports.get(node.func.value.id, node.func.value.id).rsplit(".", 1)[-1]
                out.setdefault(f"{head}.{node.func.attr}", f"{path}:{node.lineno}")
    return out
