"""Draft variants for kernels that live behind Python, as the PyTorch world writes them
(`flopwatch new` / `init`, beside `pipeline.onboarding.drafting`'s C++/CUDA/HIP drafts):

- a torch extension the repository builds with `torch.utils.cpp_extension` (`load(...)` in a
  bench script, `load_inline(...)`, setup.py's CUDAExtension): one `backend = "torch"` draft per
  function its PYBIND11_MODULE (or load_inline's `functions`) exports, called as the authors call
  it (`O = minimal_attn.forward(q, k, v)`: `returns = true`);
- a KernelBench problem file (`class Model` + `get_inputs()`): the problem's own Model as the
  peer of its op (`[problem]`), and a solution file (`class ModelNew`) measured against the
  problem it answers, with its load_inline extensions or Triton kernels;
- (a Python module's public functions are drafted by `pipeline.onboarding.entries`, each with
  the reference the repository keeps).

Every draft is a valid manifest: what cannot be told is a best guess on a line marked
`# TODO (guess)`, listed in the draft's `todo` and `guessed` fields (`pipeline.onboarding.drafting.Draft`).
Pure functions over the repository's text; nothing of it is run.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pipeline.onboarding import drafting, kernel_scan, python_scan
from pipeline.onboarding.source.records import Exported, LibraryOp, SchemaArg, TensorMade
from workers.ops import OPS
from workers.torch_ext import setup_run
from workers.torch_ext import spec as ext_spec

GUESS = "# TODO (guess)"
_TENSOR_PARAM = re.compile(r"\b(?:torch::)?(?:Tensor|at::Tensor)\b")


@dataclass(frozen=True)
class Repo:
    """What the drafts read of the repository: every file's text by repository-relative path
    (Python and C++ sources), the set of its files, and where it lies."""

    texts: dict
    files: frozenset
    root: Path | None = None  # the checkout, where a setup.py the static read gives up on is run

    @functools.cached_property
    def problems(self) -> list[str]:
        """Its KernelBench problem files (parsed once, whatever number of solutions asks)."""
        return [p for p, t in self.texts.items() if p.endswith(".py") and (tree := _tree(t)) and is_problem(tree)
                and not is_solution(tree)]


# -- the classes of Python file -----------------------------------------------------------------

def _tree(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def is_problem(tree: ast.Module) -> bool:
    """A KernelBench problem: `class Model` and `def get_inputs()` at the top level."""
    return MODEL in _classes(tree) and "get_inputs" in _functions(tree)


def is_solution(tree: ast.Module) -> bool:
    return "ModelNew" in _classes(tree)


MODEL = "Model"


def uses_triton(text: str) -> bool:
    return bool(re.search(r"^\s*(import triton|from triton)", text, re.MULTILINE)) or "@triton.jit" in text


# -- names and paths ---------------------------------------------------------------------------------

def op_name(path: str) -> str:
    """A problem's op, from its file: `23_Softmax.py` → `23_softmax` (pure)."""
    return re.sub(r"[^a-z0-9_.-]", "_", PurePosixPath(path).stem.lower()).strip("_") or "problem"


def from_folder(folder: str, rel: str) -> str:
    """`rel` (repository-relative) as written from the draft's folder: `../../x/y.py` (pure)."""
    return "../" * len(PurePosixPath(folder).parts) + rel


def import_root(rel: str, files: frozenset) -> tuple[str, str]:
    """(import root, dotted module) of a file inside a package (`src/liger_kernel/ops/x.py` →
    ("src", "liger_kernel.ops.x")), or ("", "") outside one (pure)."""
    parts = list(PurePosixPath(rel).with_suffix("").parts)
    depth = 0
    while depth < len(parts) - 1 and "/".join(parts[:len(parts) - 1 - depth] + ["__init__.py"]) in files:
        depth += 1
    if depth == 0:
        return "", ""
    root = "/".join(parts[:len(parts) - 1 - depth])
    return root or ".", ".".join(parts[len(parts) - 1 - depth:])


# -- shapes and dtypes from the repository's scripts ------------------------------------------------

def tensors_passed(repo: Repo, callee_words: tuple[str, ...], arity: int) -> list[TensorMade]:
    """Tensors made by the scripts that call one of `callee_words` (the entry's name), the
    first `arity` of each script."""
    made: list[TensorMade] = []
    for path, text in repo.texts.items():
        if not path.endswith(".py") or not any(re.search(rf"\b{re.escape(w)}\s*\(", text) for w in callee_words):
            continue
        found = [t for t in python_scan.script_tensors(path, text) if t.shape]
        made += found[:max(arity, 1)]
    return made


def dtype_of(made: list[TensorMade], fallback: str = "") -> tuple[str, str]:
    """(dtype, note): the floating dtype the scripts' tensors have most often."""
    names = Counter(t.dtype for t in made if t.dtype in ("fp32", "fp16", "bf16"))
    if names:
        dtype, count = names.most_common(1)[0]
        return dtype, f"dtype {dtype!r} from the tensors the repository's scripts make ({count})"
    return fallback, ""


def shape_of(made: list[TensorMade], op: str) -> list[list[int]]:
    """The op's sizes from the first input tensor a script makes, where its rank fits the op."""
    dims = OPS[op].DIMS if op in OPS else ()
    for t in made:
        if all(isinstance(d, int) for d in t.shape):
            shape = [int(d) for d in t.shape]
            if op in ("attention", "attention_causal") and len(shape) == 4:
                return [shape]
            if tuple(dims) in (("M", "N"), ("M", "V")) and len(shape) >= 2:  # row-wise ops: rows × last dim
                rows = 1
                for d in shape[:-1]:
                    rows *= d
                return [[rows, shape[-1]]]
            if op == "copy" and shape:
                n = 1
                for d in shape:
                    n *= d
                return [[n]]
            if op == "gemm" and len(shape) == 2 and len(dims) == 3:
                other = next((u for u in made[1:] if len(u.shape) == 2 and all(isinstance(d, int) for d in u.shape)),
                             None)
                if other is not None:
                    return [[shape[0], other.shape[0] if other.shape[1] == shape[1] else other.shape[1], shape[1]]]
    return []


# -- an entry's op from its parameters ---------------------------------------------------------------

def op_from_params(name: str, params: list[str], returns: bool, kinds: list[str] | None = None,
                   only: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """(op, the op argument of each parameter in order; "" for one the op does not take) where
    the names fit an op (name hints first), or ("", []) (pure). `kinds`: "tensor" / "int" /
    "float" per parameter where known (a C++ signature); `only`: the ops to try (the one an
    entry's name says), in order."""
    lowered = name.lower()
    hinted = [op for op, words in drafting.NAME_HINTS if any(w in lowered for w in words)]
    order = [op for op in only if op in OPS] if only else hinted + [op for op in OPS if op not in hinted]
    for op in order:
        module = OPS[op]
        wanted = [*module.INPUTS] + ([] if returns else [module.OUTPUT])
        aliases = drafting.ALIASES.get(op, {})
        mapped: list[str] = []
        taken: set[str] = set()
        for i, p in enumerate(params):
            kind = (kinds or [""] * len(params))[i]
            names = [*wanted, *module.DIMS, *getattr(module, "SCALARS", ())]
            hit = next((a for a in names if a not in taken and drafting._norm(p) in aliases.get(a, ())
                        and (not kind or (kind == "tensor") == (a in wanted))), "")
            mapped.append(hit)
            if hit:
                taken.add(hit)
        if all(a in taken for a in wanted):
            return op, mapped
        tensors = [i for i, k in enumerate(kinds or []) if k == "tensor"]
        if kinds and op in hinted and len(tensors) == len(wanted):  # names differ, count and name fit
            mapped = ["" for _ in params]
            for i, a in zip(tensors, wanted):
                mapped[i] = a
            return op, mapped
    return "", []


# -- the drafts --------------------------------------------------------------------------------------

def _lines_common(name: str, op: str, backend: str, origin: str) -> list[str]:
    return [f"# Drafted by `flopwatch new` from {origin}.", f'name = "{name}"', f'op = "{op}"', f'backend = "{backend}"']


def _draft(name: str, folder: str, lines: list[str], op: str, todo: list[str], guessed: list[str],
           include_dir: str = "") -> drafting.Draft:
    files = {"variant.toml": "\n".join(lines) + "\n"}
    return drafting.Draft(name, folder, files, include_dir, op, tuple(todo), tuple(guessed))


# Code that only runs on an NVIDIA (or AMD) GPU: moved there by hand, or asking CUDA for something.
_GPU_ONLY = re.compile(r"""\.cuda\(|device\s*=\s*['"]cuda|torch\.device\(\s*['"]cuda|torch\.cuda\.(?!is_available)""")


def runs_on_cpu(*texts: str, specs: tuple = ()) -> bool:
    """Whether Python code can run on the CPU as well as a GPU: no CUDA extension among
    `specs` (a load_inline with only cpp_sources is C++), no Triton, no `.cuda()` or
    `device="cuda"` (pure)."""
    return not any(s.cuda for s in specs) and not any(uses_triton(t) or _GPU_ONLY.search(t) for t in texts)


def devices_line(*texts: str, specs: tuple = ()) -> str:
    """The draft's `devices`: the CPU too where the code runs there (a plain-torch Model, a C++
    load_inline), so a draft made on a machine without a GPU runs where it was drafted."""
    if runs_on_cpu(*texts, specs=specs):
        return 'devices = ["cpu", "cuda"]  # no CUDA or Triton in the code: it runs on the CPU too'
    return 'devices = ["cuda"]  # CUDA or Triton code: GPUs only'


# The rule a problem's rows are judged by (`workers.ops.kernelbench`), written commented in the
# drafts so that a user coming from KernelBench sees the choice.
RULE_LINE = ('# rule = "fp64"  # how rows are judged: "fp64" (default: the Model in fp64, the problem\'s tolerances),\n'
             '#   "kernelbench" (KernelBench today: allclose to the Model in the job\'s dtype, atol=rtol=1e-4 fp32,\n'
             '#   1e-2 fp16/bf16) or "kernelbench-v0" (1e-2 for all)')


def problem_draft(rel: str, out_dir: str, taken: set[str], text: str = "") -> drafting.Draft:
    """A KernelBench problem: its Model measured as the op's peer, with its own inputs."""
    name = _name(PurePosixPath(rel).stem, taken)
    folder = f"{out_dir}/{name}"
    lines = _lines_common(name, op_name(rel), "python", f"{rel} (a problem: class Model, get_inputs())")
    lines += ['dtypes = ["fp32"]', devices_line(text),
              "peer = true  # the problem's Model: the reference every solution is compared with", "",
              "[problem]", f'file = "{from_folder(folder, rel)}"', RULE_LINE, "", "[binding]", 'kind = "python"',
              f'entry = "{from_folder(folder, rel)}:Model"']
    return _draft(name, folder, lines, op_name(rel), [], [])


def solution_draft(rel: str, text: str, problem: str, guessed_problem: bool, repo: Repo, out_dir: str,
                   taken: set[str]) -> drafting.Draft:
    """A KernelBench solution (`class ModelNew`) measured against its problem's Model."""
    name = _name(PurePosixPath(rel).stem, taken)
    folder = f"{out_dir}/{name}"
    specs = _extensions_in(rel, text, repo)
    backend = "torch" if specs else "triton" if uses_triton(text) else "python"
    kind = "triton" if backend == "triton" else "python"
    todo, guessed = [], []
    lines = _lines_common(name, op_name(problem), backend, f"{rel} (a solution: class ModelNew)")
    # The problem's Model runs beside the solution (reference, peer): both must run on a device.
    lines += ['dtypes = ["fp32"]', devices_line(text, repo.texts.get(problem, ""), specs=tuple(specs)), "",
              "[problem]", f'file = "{from_folder(folder, problem)}"'
              + (f"  {GUESS}: the problem this solution answers" if guessed_problem else ""), RULE_LINE]
    if guessed_problem:
        todo.append(f"problem.file: {problem} is a guess (no problem file named after {rel})")
        guessed.append("problem.file")
    lines += ["", "[binding]", f'kind = "{kind}"', f'entry = "{from_folder(folder, rel)}:ModelNew"']
    if specs:
        lines += ["", "[[extensions]]", f'from = "{from_folder(folder, rel)}"  # {", ".join(s.name for s in specs)}']
    return _draft(name, folder, lines, op_name(problem), todo, guessed)


def find_problem(rel: str, repo: Repo) -> tuple[str, bool]:
    """The problem file a solution answers, and whether that is a guess; ("", False) when the
    repository has none. Solutions are often kept apart from the problems (a folder of
    `<problem>_new.py`, a KernelBench run's `level_1_problem_23_sample_0_kernel.py`), so every
    problem of the repository is a candidate, by name first:
    - a shared stem: the problems whose stem the solution's starts with (`23_Softmax_new`,
      `23_Softmax_solution`, `model_new_ex_add` → `model_ex_add`; case aside), the longest;
    - else the level and number (`level1_23_*`, `level_1_problem_23_*`, `23_*` in a level
      folder) → `23_*.py` in a `level1` folder;
    - else the only problem of its own folder.
    Where several still fit (one stem in two folders), those whose `Model` takes what ModelNew
    takes: `get_init_inputs()`'s arity within ModelNew's constructor parameters, then the same
    parameter names, then the nearest folder. Only what is left ambiguous, or nothing named, is
    a guess."""
    path = PurePosixPath(rel)
    problems = [p for p in repo.problems if p != rel]
    if not problems:
        return "", False
    level, number = _level_number(path)
    named = _by_stem(path.stem, problems)
    if len(named) > 1 and level:
        named = [p for p in named if _level_of(PurePosixPath(p)) == level] or named
    if not named and number:
        numbered = [p for p in problems if PurePosixPath(p).name.startswith(f"{number}_")]
        # problems kept outside level folders: the number alone
        named = [p for p in numbered if _level_of(PurePosixPath(p)) == level] if level else []
        named = named or numbered
    if not named:
        same = [p for p in problems if PurePosixPath(p).parent == path.parent]
        named = same if len(same) == 1 else []
    if len(named) == 1:
        return named[0], False
    fits = _fitting(repo.texts.get(rel, ""), named or problems, repo)
    if named and len(fits) > 1:  # one name in several folders (a copy for the few-shot prompts): the nearest
        steps = {p: _folder_steps(PurePosixPath(p), path) for p in fits}
        fits = [p for p in fits if steps[p] == min(steps.values())]
    if len(fits) == 1 and named:
        return fits[0], False
    return min(fits or named or problems), True


def _folder_steps(a: PurePosixPath, b: PurePosixPath) -> int:
    """Folders up and down from one file's folder to the other's."""
    common = 0
    for x, y in zip(a.parts[:-1], b.parts[:-1]):
        if x != y:
            break
        common += 1
    return len(a.parts) + len(b.parts) - 2 - 2 * common


_LEVEL = re.compile(r"level_?(\d+)", re.IGNORECASE)


def _level_of(path: PurePosixPath) -> str:
    """The KernelBench level of a file by its folders (`level1/`, `level_2/`), or ""."""
    return next((m.group(1) for part in path.parts[:-1] if (m := _LEVEL.fullmatch(part))), "")


def _level_number(path: PurePosixPath) -> tuple[str, str]:
    """(level, problem number) a solution's name or folders give (`level_1_problem_23_…`,
    `level1_23_…`, `23_…` in a level folder); "" for what they do not."""
    stem = path.stem.lower()
    m = re.match(r"(?:.*?_)?level_?(\d+)_(?:problem_?)?(\d+)(?:_|$)", stem)
    if m:
        return m.group(1), m.group(2)
    m = re.match(r"(\d+)_", stem)
    return _level_of(path), (m.group(1) if m else "")


def _by_stem(stem: str, problems: list[str]) -> list[str]:
    """The problems whose stem the solution's stem starts with, at a word boundary, the longest
    only: `23_Softmax_new` → `23_Softmax`; `model_new_ex_add_triton` → `model_ex_add`; a
    `level1_` prefix aside (`level1_23_Softmax_v2` → `23_Softmax`)."""
    keys = {stem.lower()}
    keys.add(re.sub(r"(^|_)new_", r"\1", stem.lower(), count=1))
    keys |= {re.sub(r"^level_?\d+_(?:problem_?)?", "", k) for k in keys}
    hits: dict[str, int] = {}
    for p in problems:
        own = PurePosixPath(p).stem.lower()
        if any(k == own or (k.startswith(own) and (own.endswith("_") or k[len(own)] in "_-.")) for k in keys):
            hits[p] = len(own)
    longest = max(hits.values(), default=0)
    return sorted(p for p, n in hits.items() if n == longest)


def _fitting(solution: str, problems: list[str], repo: Repo) -> list[str]:
    """The problems whose `get_init_inputs()` ModelNew's constructor can take (its arity
    within ModelNew's parameters), narrowed to those whose `Model.__init__` has ModelNew's
    parameter names where any has; what cannot be read statically fits."""
    new = _init_params(_tree(solution), "ModelNew")
    if new is None:
        return problems
    fits = []
    for p in problems:
        tree = _tree(repo.texts.get(p, ""))
        arity = _init_arity(tree)
        if arity is None or new[1] <= arity <= new[2]:
            fits.append(p)
    same = [p for p in fits if new[0] is not None
            and (m := _init_params(_tree(repo.texts.get(p, "")), MODEL)) and m[0] == new[0]]
    return same or fits


def _init_params(tree: ast.Module | None, cls: str) -> tuple[tuple[str, ...] | None, int, float] | None:
    """(names, required count, most accepted) of `cls.__init__`'s parameters (names None with
    *args); no `__init__`: none; None where it cannot be told (no such class, a base other
    than nn.Module)."""
    node = _classes(tree).get(cls) if tree else None
    if node is None or any(ast.unparse(b).split(".")[-1] != "Module" for b in node.bases):
        return None
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return (), 0, 0
    args = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
    if init.args.vararg:  # takes any number: its names tell nothing
        return None, len(args) - len(init.args.defaults), float("inf")
    return tuple(args), len(args) - len(init.args.defaults), len(args)


def _init_arity(tree: ast.Module | None) -> int | None:
    """How many constructor arguments `get_init_inputs()` returns, from its return statements
    (a list or tuple literal); None where that cannot be read."""
    fn = _functions(tree).get("get_init_inputs") if tree else None
    if fn is None:
        return 0  # KernelBench builds the Model with no arguments then
    sizes = {len(n.value.elts) for n in ast.walk(fn) if isinstance(n, ast.Return)
             and isinstance(n.value, (ast.List, ast.Tuple)) and not any(isinstance(e, ast.Starred) for e in n.value.elts)}
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    return sizes.pop() if len(sizes) == 1 and len(returns) == 1 else None


def _extensions_in(rel: str, text: str, repo: Repo) -> list[ext_spec.ExtensionSpec]:
    try:
        return setup_run.read_extensions(rel, text, repo.root, repo.files)
    except (ext_spec.ExtensionReadError, setup_run.SetupRunError):
        return []


def extension_drafts(rel: str, text: str, repo: Repo, out_dir: str, taken: set[str],
                     draft_wrapper=None) -> tuple[list[drafting.Draft], list[str]]:
    """One `backend = "torch"` draft per function each extension built in `rel` exports (a
    load() / setup.py extension's PYBIND11_MODULE, or load_inline's `functions`) and per
    TORCH_LIBRARY operator it registers (`library_op_draft`, `draft_wrapper`); notes for what
    could not be read."""
    try:
        specs = setup_run.read_extensions(rel, text, repo.root, repo.files)
    except ext_spec.ExtensionReadError as exc:
        return [], [f"{exc}"]
    except setup_run.SetupRunError as exc:
        return [], [f"{rel}: {exc}"]
    drafts: list[drafting.Draft] = []
    for spec in specs:
        for op in library_ops(spec, repo):
            drafts.append(library_op_draft(op, spec, repo, out_dir, taken, draft_wrapper))
        for fn in exported_functions(spec, repo):
            drafts.append(_extension_function_draft(rel, spec, fn, repo, out_dir, taken))
    return drafts, []


# -- operators registered with TORCH_LIBRARY ----------------------------------------------------------

_LIBRARY = re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT)?\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
_LIBRARY_IMPL = re.compile(r"\bTORCH_LIBRARY_IMPL\s*\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
# Dispatch keys → flopwatch device kinds (a CUDA kernel runs on ROCm after torch's hipify, but
# a draft names only what the repository says).
_DISPATCH_DEVICES = {"CPU": "cpu", "CUDA": "cuda", "HIP": "rocm"}
_SCALAR_TYPES = {"float": 0.5, "int": 2, "SymInt": 2, "bool": True, "Scalar": 0.5}


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


def library_ops(spec: ext_spec.ExtensionSpec, repo: Repo) -> list[LibraryOp]:
    """The operators the extension's sources define with TORCH_LIBRARY, with the devices their
    TORCH_LIBRARY_IMPL blocks give kernels for."""
    defined: list[tuple[str, str, tuple, str, str, bool]] = []
    impls: dict[tuple[str, str], set[str]] = {}
    for src in spec.sources:
        text = kernel_scan.strip_comments(repo.texts.get(src) or _read(repo, src))
        for m in _LIBRARY.finditer(text):
            body = text[m.end():_block_end(text, m.end() - 1)]
            for d in re.finditer(rf"\b{m.group(2)}\s*\.\s*def\s*\(\s*\"((?:[^\"\\]|\\.)*)\"\s*(,)?", body):
                parsed = parse_schema(d.group(1))
                if parsed:
                    line = text.count("\n", 0, m.end() + d.start()) + 1
                    defined.append((m.group(1), *parsed, f"{src}:{line}", bool(d.group(2))))
        for m in _LIBRARY_IMPL.finditer(text):
            body = text[m.end():_block_end(text, m.end() - 1)]
            device = _DISPATCH_DEVICES.get(m.group(2))
            for i in re.finditer(rf"\b{m.group(3)}\s*\.\s*impl\s*\(\s*\"([\w.]+)\"", body):
                if device:
                    impls.setdefault((m.group(1), i.group(1).split(".")[0]), set()).add(device)
    out = []
    for ns, name, args, returns, origin, with_function in defined:
        devices = ("cpu", "cuda") if with_function else \
            tuple(d for d in ("cpu", "cuda", "rocm") if d in impls.get((ns, name), ()))
        out.append(LibraryOp(ns, name, args, returns, origin, devices))
    return out


def _read(repo: Repo, rel: str) -> str:
    if repo.root is None or not (repo.root / rel).is_file():
        return ""
    return (repo.root / rel).read_text(errors="replace")


def _block_end(text: str, brace: int) -> int:
    end = kernel_scan._matching(text, brace, "{", "}")
    return end if end > 0 else len(text)


def wrapper_of(op: LibraryOp, package: str, repo: Repo) -> tuple[str, str, ast.FunctionDef | None]:
    """(entry, where, function) of the package's Python function that calls `torch.ops.ns.op`
    with the operator's arguments (extension-cpp's `extension_cpp.ops:mymuladd`), or ("", "",
    None); the modules of `package` (the one the extension's module lies in) first."""
    call = re.compile(rf"\btorch\.ops\.{op.ns}\.{op.name}\b")
    found = [(rel, text, import_root(rel, repo.files)[1]) for rel, text in repo.texts.items()
             if rel.endswith(".py") and call.search(text)]
    for rel, text, dotted in sorted(found, key=lambda f: (f[2].split(".")[0] != package, f[0])):
        if not dotted or (tree := _tree(text)) is None:
            continue
        for fn in tree.body:
            if (isinstance(fn, ast.FunctionDef) and not fn.name.startswith("_")
                    and len(fn.args.args) == len(op.args) and call.search(ast.get_source_segment(text, fn) or "")):
                return f"{dotted}:{fn.name}", f"{rel}:{fn.lineno}", fn
    return "", "", None


def find_reference(op: LibraryOp, repo: Repo) -> tuple[str, str]:
    """(path, line) of a reference the repository keeps by name for the operator: `def
    reference_muladd` for `mymuladd` (the conventions X_ref, ref_X, reference_X, X_reference,
    torch_X, naive_X, with X the name or the name without a leading "my"), tests first."""
    bases = {op.name, op.name.removeprefix("my")} - {""}
    names = {p.format(b) for b in bases for p in ("{}_ref", "ref_{}", "reference_{}", "{}_reference",
                                                   "torch_{}", "naive_{}")}
    pattern = re.compile(rf"^def ({'|'.join(sorted(names))})\s*\(", re.MULTILINE)
    ordered = sorted((r for r in repo.texts if r.endswith(".py")), key=lambda r: ("test" not in r, r))
    for rel in ordered:
        m = pattern.search(repo.texts[rel])
        if m:
            return f"{rel}:{m.group(1)}", f"{rel}:{repo.texts[rel].count(chr(10), 0, m.start()) + 1}"
    return "", ""


def library_op_draft(op: LibraryOp, spec: ext_spec.ExtensionSpec, repo: Repo, out_dir: str,
                     taken: set[str], draft_wrapper=None) -> drafting.Draft:
    """A TORCH_LIBRARY operator as its own op (contract: the `[reference]` table): called
    through the package's wrapper where it has one, inputs from the schema, devices from the
    TORCH_LIBRARY_IMPL blocks, checked against the repository's reference where one is found
    by name, else measured unchecked. A wrapper is drafted as the repository's other Python
    entries are, by `draft_wrapper(op, spec, entry, where, wrapper, repo, out_dir, taken)`
    (`pipeline.onboarding.entries.draft_library_wrapper`: the reference by convention or from
    the tests, the tests' sizes; handed in, as that module builds on this one), which returns
    None where no test tells the wrapper's inputs: the schema tells their kinds better."""
    entry, where, wrapper = wrapper_of(op, spec.module.split(".")[0], repo)
    if wrapper is not None and draft_wrapper is not None:
        drafted = draft_wrapper(op, spec, entry, where, wrapper, repo, out_dir, taken)
        if drafted is not None:
            return drafted
    name = _name(op.name, taken)
    folder = f"{out_dir}/{name}"
    todo: list[str] = []
    guessed: list[str] = []
    written = [a for a in op.args if a.tensor and a.written]
    returns = op.returns.strip() not in ("()", "") and not written
    lines = _lines_common(name, op.name, "torch", f"{op.origin} (TORCH_LIBRARY({op.ns}) operator "
                                                  f"{op.name}, built by {spec.origin})")
    dtype = _pointer_dtype("\n".join(repo.texts.get(s) or _read(repo, s) for s in spec.sources)) or ""
    if not dtype:
        dtype = "fp32"
        guessed.append("dtypes")
        todo.append("dtypes: neither the kernels' pointer types nor the repository's scripts tell the dtype")
    lines.append(f'dtypes = ["{dtype}"]' + (f"  {GUESS}" if "dtypes" in guessed else ""))
    devices = list(op.devices) or ["cuda"]
    lines.append(f"devices = {json.dumps(devices)}  # the TORCH_LIBRARY_IMPL blocks with a kernel for {op.name}"
                 if op.devices else f'devices = ["cuda"]  {GUESS}: no TORCH_LIBRARY_IMPL block names {op.name}')
    if not op.devices:
        guessed.append("devices")
    lines += ["", "[binding]", 'kind = "python"',
              f'entry = "{entry or op.qualname}"' + (f"  # {where}: calls {op.qualname}" if entry else "")]
    if returns:
        lines.append("returns = true")
    builtin = _builtin_for_operator(op, returns)
    if builtin:
        # A built-in op first, as for every entry: its fp64 reference, its peer, its sizes.
        lines[lines.index(f'op = "{op.name}"')] = f'op = "{builtin}"'  # `_lines_common`'s op line
        lines.insert(0, f"# reference: built-in op {builtin} (by its name and its {len(OPS[builtin].INPUTS)} tensors)")
        lines.insert(lines.index("[binding]") - 1, f"shapes = {json.dumps(drafting.DEFAULT_SHAPES[builtin])}  "
                                                    f"{GUESS}: sizes {list(OPS[builtin].DIMS)}")
        guessed.append("shapes")
        lines += ["", "[[extensions]]", f'from = "{from_folder(folder, spec.origin.rsplit(":", 1)[0])}"',
                  f'name = "{spec.module}"']
        return _draft(name, folder, lines, builtin, todo, guessed)
    lines += ["", "[reference]"]
    call, ref_where = find_reference(op, repo)
    # the first line says what it is checked against, as the other entries' drafts do
    lines.insert(0, f"# reference: {call} (by name, {ref_where})" if call else
                 "# reference: none found — measured as unchecked")
    if call:
        lines += [f'call = "{from_folder(folder, call.split(":")[0])}:{call.split(":")[1]}"', 'found = "convention"',
                  f'where = "{ref_where}"']
    else:
        lines.append('check = "none"  # no reference found: measured as unchecked, its output kept per commit')
    lines.append(f"sizes = {{ N = 4096 }}  {GUESS}: a 1-D size for every tensor argument")
    guessed.append("reference.sizes")
    todo.append(f"reference.sizes: the schema of {op.name} gives no sizes; every tensor is guessed 1-D of N")
    inputs = []
    for a in op.args:
        if a.tensor:
            inputs.append(f'  {{ name = "{a.name}", shape = ["N"]' + (", output = true" if a.written else "") + " },")
        elif a.type.rstrip("?") in _SCALAR_TYPES:
            value = _SCALAR_TYPES[a.type.rstrip("?")]
            inputs.append(f'  {{ name = "{a.name}", value = {json.dumps(value)} }},  {GUESS}: a {a.type}')
        else:
            inputs.append(f'  {{ name = "{a.name}", value = 0 }},  {GUESS}: a {a.type} flopwatch cannot make')
            todo.append(f"reference.inputs: {a.name} is a {a.type}")
    lines += ["inputs = [", *inputs, "]"]
    lines += ["", "[[extensions]]", f'from = "{from_folder(folder, spec.origin.rsplit(":", 1)[0])}"',
              f'name = "{spec.module}"']
    return _draft(name, folder, lines, op.name, todo, guessed)


def _builtin_for_operator(op: LibraryOp, returns: bool) -> str:
    """The built-in op a TORCH_LIBRARY operator computes, by its name (`mymul` is mul) and its
    schema: as many tensors as the op's inputs, nothing else, one tensor returned."""
    from workers.ops import op_for_entry_name

    builtin = op_for_entry_name(op.name)
    if not builtin or not returns or builtin not in drafting.DEFAULT_SHAPES:
        return ""
    tensors = [a for a in op.args if a.tensor]
    fits = len(tensors) == len(op.args) == len(OPS[builtin].INPUTS) and not getattr(OPS[builtin], "SCALARS", ())
    return builtin if fits else ""


def exported_functions(spec: ext_spec.ExtensionSpec, repo: Repo) -> list[Exported]:
    texts = [repo.texts.get(s, "") for s in spec.sources] + list(spec.cpp_sources) + list(spec.cuda_sources)
    joined = "\n".join(texts)
    names: list[tuple[str, str]] = []  # (python name, C++ name)
    if spec.kind == "load_inline":
        names = [(f, f) for f in spec.functions]
    else:
        for text in texts:
            names += [(k.entry, k.name) for k in kernel_scan.find_pybind_functions(text, spec.origin)]
    out = []
    for py_name, cpp in names:
        params, returns = _signature(joined, cpp)
        out.append(Exported(py_name, params, returns, joined))
    return out


def _signature(text: str, cpp: str) -> tuple[tuple[kernel_scan.Param, ...], bool]:
    """The parameters of C++ function `cpp` and whether it returns a tensor, from its first
    declaration or definition in `text`."""
    clean = kernel_scan.strip_comments(text)
    m = re.search(rf"([\w:<>]+)\s*&?\s+{re.escape(cpp)}\s*\(", clean)
    if not m:
        return (), True
    close = kernel_scan._matching(clean, m.end() - 1)
    params = kernel_scan.parse_params(clean[m.end():close]) if close > 0 else ()
    return params, bool(_TENSOR_PARAM.search(m.group(1)))


def _extension_function_draft(rel: str, spec: ext_spec.ExtensionSpec, fn: Exported, repo: Repo, out_dir: str,
                              taken: set[str]) -> drafting.Draft:
    name = _name(f"{spec.name}_{fn.py_name}" if fn.py_name not in ("forward", "run", "main") else spec.name, taken)
    folder = f"{out_dir}/{name}"
    kinds = ["tensor" if _TENSOR_PARAM.search(p.type) else drafting._kind(p) for p in fn.params]
    op, mapped = op_from_params(fn.py_name + " " + spec.name, [p.name for p in fn.params], fn.returns, kinds)
    todo: list[str] = []
    guessed: list[str] = []
    lines = _lines_common(name, op or "gemm", "torch", f"{spec.origin} ({spec.kind} of extension {spec.name!r}, "
                                                       f"function {fn.py_name})")
    if not op:
        lines[2] += f"  {GUESS}: {fn.py_name}({', '.join(p.name for p in fn.params)}) fits no op as flopwatch reads it"
        todo.append(f"op: {fn.py_name}'s parameters fit no op (declare one in an op.py, docs/ops.md)")
        guessed.append("op")
        op = "gemm"
    made = tensors_passed(repo, (f".{fn.py_name}", fn.py_name), len(OPS[op].INPUTS))
    pointer = _pointer_dtype(fn.body_text)
    dtype = pointer or dtype_of(made)[0]
    if not dtype:
        dtype = "fp32"
        guessed.append("dtypes")
        todo.append("dtypes: neither the kernels' pointer types nor the repository's scripts tell the dtype")
    lines.append(f'dtypes = ["{dtype}"]' + (f"  {GUESS}" if "dtypes" in guessed else ""))
    shapes = shape_of(made, op)
    if shapes:
        lines.append(f"shapes = {json.dumps(shapes)}  # from the tensors the repository's scripts pass")
    else:
        lines.append(f"shapes = {json.dumps(drafting.DEFAULT_SHAPES[op])}  {GUESS}: sizes {list(OPS[op].DIMS)}")
        guessed.append("shapes")
    if not spec.cuda:
        lines.append('devices = ["cpu"]  # a C++ extension')
    lines += ["", "[binding]", 'kind = "pybind11"', f'module = "{spec.module}"', f'entry = "{fn.py_name}"']
    if fn.returns:
        lines.append("returns = true")
    passed = _leading(mapped)
    if mapped and len(passed) < len(mapped):
        todo.append(f"binding.args: {fn.py_name}'s parameters {[p.name for p, m in zip(fn.params, mapped) if not m]} "
                    f"are no {op} arguments: the call needs a hand (a wrapper, or an op.py of your own)")
        guessed.append("binding.args")
    if mapped and passed != _default_order(op, fn.returns):
        lines.append(f"args = {json.dumps(passed)}")
    lines += ["", "[[extensions]]", f'from = "{from_folder(folder, spec.origin.rsplit(":", 1)[0])}"',
              f'name = "{spec.name}"']
    return _draft(name, folder, lines, op, todo, guessed)


def _default_order(op: str, returns: bool) -> list[str]:
    """The positional arguments flopwatch passes without `binding.args`."""
    module = OPS[op]
    return [*module.INPUTS, *(getattr(module, "SCALARS", ()) if returns else (module.OUTPUT,))]


def _leading(mapped: list[str]) -> list[str]:
    """The op arguments of the leading parameters that map (optional ones after keep defaults)."""
    out = []
    for m in mapped:
        if not m:
            break
        out.append(m)
    return out


def _pointer_dtype(text: str) -> str:
    """The input dtype of an extension's kernels: the element type of their first pointer, or
    of `data_ptr<T>()` in the wrapper."""
    for k in kernel_scan.find_kernels(text, "ext"):
        element = next((p.element for p in k.params if p.pointer), "")
        if element in drafting.DTYPE_OF:
            return drafting.DTYPE_OF[element]
    m = re.search(r"data_ptr<\s*([\w:]+)\s*>", text)
    if m:
        return {"float": "fp32", "at::Half": "fp16", "c10::Half": "fp16", "at::BFloat16": "bf16",
                "c10::BFloat16": "bf16", "half": "fp16"}.get(m.group(1), "")
    return ""


def _package_uses_triton(rel: str, root: str, repo: Repo) -> bool:
    """Whether the package a module belongs to imports Triton (Liger's functional module calls
    autograd Functions whose kernels live in the package's ops)."""
    if not root:
        return False
    top = PurePosixPath(rel).relative_to(root).parts[0] if root != "." else PurePosixPath(rel).parts[0]
    prefix = f"{root}/{top}/" if root != "." else f"{top}/"
    return any(p.startswith(prefix) and p.endswith(".py") and "@triton.jit" in t for p, t in repo.texts.items())


def _name(base: str, taken: set[str]) -> str:
    """A variant name from `base`, sanitised and unique among `taken` (as the C++ drafts')."""
    return drafting.variant_name(None, taken, base)


# -- one file ----------------------------------------------------------------------------------------

def drafts_for(rel: str, repo: Repo, out_dir: str, taken: set[str],
               draft_wrapper=None) -> tuple[list[drafting.Draft], list[str]]:
    """The drafts of one Python file — a problem, a solution, the extensions it builds — and
    notes on what was not drafted. A module's public functions are `pipeline.onboarding.entries`'
    (`entries.module_drafts` asks here first)."""
    text = repo.texts.get(rel, "")
    tree = _tree(text)
    if tree is None:
        return [], [f"{rel}: not Python flopwatch can read (syntax error)"]
    if is_solution(tree):
        problem, guessed = find_problem(rel, repo)
        if not problem:
            return [], [f"{rel}: class ModelNew, but the repository has no problem file (class Model, get_inputs())"]
        return [solution_draft(rel, text, problem, guessed, repo, out_dir, taken)], []
    if is_problem(tree):
        return [problem_draft(rel, out_dir, taken, text)], []
    return extension_drafts(rel, text, repo, out_dir, taken, draft_wrapper)
