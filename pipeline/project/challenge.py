"""A problem folder in the kernel-challenge format, read on the driver without running any of
it (`workers.ops.challenge` says what runs in the job): `task.yml` parsed as YAML (PyYAML's
safe loader: plain data, no tags that build objects), `reference.py` and the files task.yml
lists read as text and checked with Python's `ast`.

What is checked, each complaint naming the file and the key: task.yml is a YAML mapping with a
non-empty `benchmarks:` list (and an optional `tests:` list) of keyword tables whose values are
integers or booleans, every entry with the same keywords; `files:` entries name a `.py` module
and a source inside the repository (`@SUBMISSION@` is the variant's entry); reference.py defines
`generate_input` and `ref_kernel` at its top level, and generate_input takes every keyword the
entries give; a `flops` expression evaluates at the first benchmark.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from workers.ops.challenge import REFERENCE, SEED, ChallengeOp
from workers.ops.repo import OpDefinitionError

TASK = "task.yml"
REFERENCE_FILE = f"{REFERENCE}.py"
SUBMISSION = "@SUBMISSION@"  # task.yml's stand-in for the submission's file
# Files of the format that are the challenge's own harness, never imported by flopwatch.
HARNESS = ("eval.py",)


def read(repo_root: Path, folder: Path, name: str, entry_file: Path | None = None,
         flops: str = "") -> ChallengeOp:
    """The `ChallengeOp` of the problem folder `folder` (inside `repo_root`) for the op `name`;
    `entry_file` is the variant's entry (task.yml's @SUBMISSION@). Raises `OpDefinitionError`."""
    root = repo_root.resolve()
    folder = folder.resolve()
    task_path = folder / TASK
    task_rel = _rel(task_path, root)
    if not task_path.is_file():
        raise OpDefinitionError(_rel(folder, root) or ".", TASK, "missing: a challenge problem folder holds task.yml "
                                                                 "(tests: and benchmarks:) beside reference.py")
    text = task_path.read_text(errors="replace")
    task = read_task(task_rel, text)
    modules = _modules(task_rel, task.data, folder, root, entry_file)
    if REFERENCE not in modules:
        raise OpDefinitionError(task_rel, "files", f"no {REFERENCE_FILE}: a challenge problem's reference "
                                                   "(generate_input, ref_kernel) is reference.py")
    ref_path = modules[REFERENCE]["path"]
    params, any_keyword, checks_itself = _reference_functions(ref_path, modules[REFERENCE]["source"])
    first, dims, bools = task.benchmarks[0][1], task.dims, task.bools
    for k in first:
        if not any_keyword and k not in params:
            raise OpDefinitionError(ref_path, "generate_input", f"takes no {k!r}, which task.yml's entries give "
                                                                f"(parameters: {', '.join(params) or 'none'})")
    if flops:
        from workers.core.formula import ExpressionError, evaluate

        try:
            evaluate(flops, {d: int(first[d]) for d in dims})
        except (ExpressionError, ZeroDivisionError) as exc:
            raise OpDefinitionError(task_rel, "flops", f"{flops!r}: {exc} (keywords: {', '.join(dims)})") from None
    return ChallengeOp(
        name=name, folder=_rel(folder, root), path=ref_path, task=text, modules=modules, dims=dims, bools=bools,
        tests=_shapes(task.tests, dims), benchmarks=_shapes(task.benchmarks, dims),
        seeded=SEED in params or any_keyword, checks_itself=checks_itself, flops_expr=flops,
        peer_name=f"ref_kernel of {ref_path}")


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path != root else ""


@dataclass(frozen=True)
class Task:
    """task.yml as flopwatch reads it: the mapping; the `benchmarks:` and `tests:` entries as
    (index, keywords); the keywords of a shape (benchmarks[0]'s, the seed aside, in task.yml's
    order) and those of them carried as booleans."""

    data: dict
    benchmarks: tuple
    tests: tuple
    dims: tuple[str, ...]
    bools: tuple[str, ...]


def read_task(task_rel: str, text: str) -> Task:
    """task.yml's text read and checked (`task_rel` names it in complaints): the one reading of
    the format, for a run and for the drafts alike. Raises `OpDefinitionError`."""
    data = _yaml(task_rel, text)
    benchmarks = _entries(task_rel, data, "benchmarks", required=True)
    tests = _entries(task_rel, data, "tests", required=False)
    first = benchmarks[0][1]
    dims = tuple(k for k in first if k != SEED)
    bools = tuple(k for k in dims if isinstance(first[k], bool))
    for key, entries in (("benchmarks", benchmarks), ("tests", tests)):
        for i, entry in entries:
            if set(entry) != set(first):
                raise OpDefinitionError(task_rel, f"{key}[{i}]", f"has the keywords {sorted(entry)}; every entry "
                                                                 f"gives those of benchmarks[0]: {sorted(first)}")
            for k, v in entry.items():
                if k in bools and not isinstance(v, bool) or k not in bools and isinstance(v, bool):
                    raise OpDefinitionError(task_rel, f"{key}[{i}].{k}", f"{_yaml_text(v)}: benchmarks[0] gives "
                                                                          f"{_yaml_text(first[k])} (one kind per keyword)")
    return Task(data, tuple(benchmarks), tuple(tests), dims, bools)


def _yaml(task_rel: str, text: str) -> dict:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise OpDefinitionError(task_rel, "(syntax)", f"not valid YAML: {where}{problem}") from None
    if not isinstance(data, dict):
        raise OpDefinitionError(task_rel, "(top level)", f"expected a mapping (tests:, benchmarks:, files:), got "
                                                         f"{_yaml_text(data)}")
    return data


def _yaml_text(value) -> str:
    """A YAML value as the file wrote it, with its kind."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int):
        return f"{value} (an integer)"
    if isinstance(value, str):
        return f"{value[:60]!r} (a string)"
    if isinstance(value, float):
        return f"{value} (a number with a fraction)"
    if value is None:
        return "nothing"
    return f"a {'list' if isinstance(value, list) else 'mapping' if isinstance(value, dict) else type(value).__name__}"


def _entries(task_rel: str, task: dict, key: str, required: bool) -> list[tuple[int, dict]]:
    """The (index, keywords) of one list; a keyword's value is an integer or a boolean: what a
    shape carries (a series is known by them)."""
    entries = task.get(key)
    if entries is None and not required:
        return []
    if not isinstance(entries, list) or (required and not entries):
        raise OpDefinitionError(task_rel, key, f"expected a non-empty list of keyword tables for generate_input, "
                                               f"got {_yaml_text(entries)}")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not entry:
            raise OpDefinitionError(task_rel, f"{key}[{i}]", f"expected a table of keywords ({{size: 1024, seed: "
                                                             f"42}}), got {_yaml_text(entry)}")
        for k, v in entry.items():
            if not isinstance(k, str) or not k.isidentifier():
                raise OpDefinitionError(task_rel, f"{key}[{i}]", f"{k!r} is not a keyword name")
            if not isinstance(v, int):
                raise OpDefinitionError(task_rel, f"{key}[{i}].{k}", f"expected an integer or a boolean, got "
                                                                     f"{_yaml_text(v)} (a shape carries integers "
                                                                     "and booleans: a series is known by them)")
        out.append((i, entry))
    return out


def _shapes(entries: list[tuple[int, dict]], dims: tuple[str, ...]) -> tuple[dict, ...]:
    """The entries as shapes' dims (booleans as 0/1, the seed left out), each once."""
    out: list[dict] = []
    for _, entry in entries:
        dims_of = {d: int(entry[d]) for d in dims}
        if dims_of not in out:
            out.append(dims_of)
    return tuple(out)


def _modules(task_rel: str, task: dict, folder: Path, root: Path, entry_file: Path | None) -> dict:
    """{module name: {"path", "source"}} of the Python files the problem's code imports by name:
    task.yml's `files:` (a source from the task's folder; the submission and the challenge's own
    harness left out), or without that list every .py file of the folder but the entry."""
    entry = entry_file.resolve() if entry_file is not None else None
    files = task.get("files")
    listed: list[tuple[str, Path]] = []
    if files is None:
        listed = [(p.name, p) for p in sorted(folder.glob("*.py")) if p.resolve() != entry]
    elif not isinstance(files, list):
        raise OpDefinitionError(task_rel, "files", f"expected a list of {{name, source}}, got {_yaml_text(files)}")
    else:
        for i, item in enumerate(files):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                    or not isinstance(item.get("source"), str):
                raise OpDefinitionError(task_rel, f"files[{i}]", "expected {name: \"x.py\", source: \"x.py\"}")
            name, source = item["name"], item["source"]
            if source == SUBMISSION or name in HARNESS or not name.endswith(".py"):
                continue  # the entry is the variant's; the harness and data files are not imported
            if PurePosixPath(source).is_absolute():
                raise OpDefinitionError(task_rel, f"files[{i}].source", f"{source!r} is an absolute path; name "
                                                                        "files from the task's folder")
            path = (folder / source).resolve()
            if not path.is_relative_to(root):
                raise OpDefinitionError(task_rel, f"files[{i}].source", f"{source!r} points outside the repository")
            if not path.is_file():
                raise OpDefinitionError(task_rel, f"files[{i}].source", f"file {source!r} does not exist")
            listed.append((name, path))
    out = {}
    for name, path in listed:
        if not PurePosixPath(name).stem.isidentifier() or "/" in name:
            raise OpDefinitionError(task_rel, "files", f"{name!r} is not a module name")
        out[PurePosixPath(name).stem] = {"path": _rel(path, root), "source": path.read_text(errors="replace")}
    return out


def _reference_functions(path: str, source: str) -> tuple[list[str], bool, bool]:
    """(generate_input's parameters, whether it takes **keywords, whether check_implementation
    is defined) of reference.py, read without running it."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise OpDefinitionError(path, "(syntax)", f"line {exc.lineno}: {exc.msg}") from None
    bound: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update({t.id: node for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.ImportFrom):
            bound.update({a.asname or a.name: node for a in node.names})
    for name, what in (("generate_input", "def generate_input(**keywords) returning one call's data"),
                       ("ref_kernel", "def ref_kernel(data) returning the expected output")):
        if name not in bound:
            raise OpDefinitionError(path, name, f"missing: {what}")
    gen = bound["generate_input"]
    if not isinstance(gen, ast.FunctionDef):
        return [], True, "check_implementation" in bound  # bound otherwise: its parameters are not read
    args = gen.args
    params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return params, args.kwarg is not None, "check_implementation" in bound
