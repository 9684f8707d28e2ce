"""KernelBench's problems and solutions (ScalingIntelligence/KernelBench): a problem file defines
`class Model` (the reference) and `get_inputs()` (and `get_init_inputs()`), a solution `class
ModelNew` with the same interface; which problem a solution answers, found anywhere in the
repository (solutions are often kept in a folder of their own), by name first. Read from the
file's syntax tree, never run."""

from __future__ import annotations

import ast
import re
from pathlib import PurePosixPath

from pipeline.onboarding.source.records import Problem, Solution

GIVES = (Problem, Solution)
MODEL = "Model"


def matches(repo, rel: str) -> bool:
    """A Python file defining a class named Model (a problem) or ModelNew (a solution)."""
    return rel.endswith(".py") and re.search(r"\bclass\s+Model", repo.text(rel)) is not None


def read(repo, rel: str) -> list[Problem | Solution]:
    """The file as a solution (`class ModelNew`), else as a problem (`class Model`, `def
    get_inputs()` at the top level), else nothing."""
    tree = repo.tree(rel)
    if tree is None:
        return []
    if is_solution(tree):
        return [Solution(rel, _init_params(tree, "ModelNew"))]
    if is_problem(tree):
        return [Problem(rel, op_name(rel), _init_arity(tree), _init_params(tree, MODEL))]
    return []


def names_model(entry: str) -> bool:
    """Whether a binding entry is a problem's Model or a solution's ModelNew: each file is a
    draft of its own, whatever entry another draft has."""
    return entry.endswith((":Model", ":ModelNew"))


def mentions(text: str) -> bool:
    """A file `init` asks the Python drafts about: it names a solution (`class ModelNew`) or a
    problem (`class Model` and `get_inputs`) at the start of a line."""
    return bool(re.search(r"^class ModelNew\b", text, re.MULTILINE)
                or ("get_inputs" in text and re.search(r"^class Model\b", text, re.MULTILINE)))


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def is_problem(tree: ast.Module) -> bool:
    """A KernelBench problem: `class Model` and `def get_inputs()` at the top level."""
    return MODEL in _classes(tree) and "get_inputs" in _functions(tree)


def is_solution(tree: ast.Module) -> bool:
    """A KernelBench solution: `class ModelNew` at the top level."""
    return "ModelNew" in _classes(tree)


def op_name(path: str) -> str:
    """A problem's op, from its file: `23_Softmax.py` → `23_softmax` (pure)."""
    return re.sub(r"[^a-z0-9_.-]", "_", PurePosixPath(path).stem.lower()).strip("_") or "problem"


def find_problem(solution: Solution, all_problems: list[Problem]) -> tuple[str, bool]:
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
    rel = solution.file
    path = PurePosixPath(rel)
    by_file = {p.file: p for p in all_problems}
    problems = [p.file for p in all_problems if p.file != rel]
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
    fits = _fitting(solution, named or problems, by_file)
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


def _fitting(solution: Solution, problems: list[str], by_file: dict[str, Problem]) -> list[str]:
    """The problems whose `get_init_inputs()` ModelNew's constructor can take (its arity
    within ModelNew's parameters), narrowed to those whose `Model.__init__` has ModelNew's
    parameter names where any has; what cannot be read statically fits."""
    new = solution.init_params
    if new is None:
        return problems
    fits = []
    for p in problems:
        arity = by_file[p].init_arity
        if arity is None or new[1] <= arity <= new[2]:
            fits.append(p)
    same = [p for p in fits if new[0] is not None and (m := by_file[p].init_params) and m[0] == new[0]]
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
