"""The kernel-challenge problem format (GPU MODE's reference-kernels, the AMD developer
challenges): a problem is a folder with `reference.py` (`generate_input(**keywords)`,
`ref_kernel(data)`, often `check_implementation`) and `task.yml` (`tests:`, `benchmarks:`, the
`files:` its code imports by name); a submission is a file defining `custom_kernel(data)` — the
folder's `submission.py`, or another file in the folder or in its `solutions/` or `submissions/`
subfolders, where reference-kernels keeps worked and wrong solutions. Everything else the format
ships (reference.py, task.py, utils.py and eval.py, often one folder up, template*.py, the files
task.yml lists) is the problems' harness: never an entry of its own.

task.yml is read by the run's own reader (`pipeline.project.challenge.read_task`), from the text
`RepoFiles` holds; Python files through their one syntax tree. Nothing runs."""

from __future__ import annotations

import ast
import posixpath
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from pipeline.onboarding.source.records import ChallengeHarness, ChallengeProblem, ChallengeSubmission
from pipeline.project.challenge import REFERENCE_FILE, SUBMISSION, TASK, Task, read_task
from workers.ops.repo import OpDefinitionError

GIVES = (ChallengeProblem, ChallengeSubmission, ChallengeHarness)
ENTRY = "custom_kernel"
# Folders of a problem that hold further submissions (reference-kernels: solutions/correct/,
# solutions/wrong/; linalg: submissions/).
SUBMISSION_FOLDERS = ("solutions", "submissions")
# The format's own files by name, in a problem's folder or the folder above it (where the
# problems of one challenge share utils.py, eval.py and template.py).
_HARNESS_NAME = re.compile(r"(reference|task|utils|eval\w*|template[\w-]*)\.py")
# The CUDA device asked for in Python: `.cuda()`, `device="cuda"` (`DEVICE = "cuda"`),
# `torch.device("cuda")`, `.to("cuda")`, `set_default_device("cuda")`, `torch.cuda.*` other than
# `is_available`; not a comparison (`x.device.type == "cuda"` asks nothing of the machine).
_CUDA = re.compile(r"""\.cuda\(|(?i:device)\s*=\s*['"]cuda|torch\.device\(\s*['"]cuda|(?:\.to|set_default_device)\(\s*['"]cuda"""
                   r"|torch\.cuda\.(?!is_available)")
# dtype words as torch spells them → as flopwatch labels them; the others (`uint8`,
# `float8_e4m3fnuz`) are kept as torch's word
_DTYPE_WORDS = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
                "float64": "fp64", "double": "fp64"}
_OTHER_DTYPE = re.compile(r"u?int\d*|long|short|bool|float8_\w+|float4_\w+|complex\d+")


@dataclass(frozen=True)
class _Index:
    """The repository's problem folders (folder → its ChallengeProblem) and its harness files
    (file → the problems they serve), found once per command."""

    problems: dict
    harness: dict


def matches(repo, rel: str) -> bool:
    """A Python file of a problem folder, its submission folders, or its harness."""
    if not rel.endswith(".py"):
        return False
    index = _index(repo)
    return rel in index.harness or problem_of(repo, rel) is not None


def read(repo, rel: str) -> list[ChallengeProblem | ChallengeSubmission | ChallengeHarness]:
    """A harness file as `ChallengeHarness` (a problem's reference.py with its `ChallengeProblem`
    first), a file defining `custom_kernel` as a `ChallengeSubmission`, else nothing."""
    index = _index(repo)
    if rel in index.harness:
        folder = str(PurePosixPath(rel).parent)
        own = [index.problems[folder]] if PurePosixPath(rel).name == REFERENCE_FILE and folder in index.problems else []
        return [*own, ChallengeHarness(rel, index.harness[rel])]
    folder = problem_of(repo, rel)
    tree = repo.tree(rel)
    if folder is None or tree is None or ENTRY not in _bound(tree):
        return []
    return [ChallengeSubmission(rel, folder, _cuda_at(repo, rel))]


def in_folder(folder: str, name: str) -> str:
    """A file of a folder, repository-relative (the repository's root is ".")."""
    return name if folder in (".", "") else f"{folder}/{name}"


def problem_of(repo, rel: str) -> str | None:
    """The problem folder a file is a submission of: its own folder, or the folder above a
    solutions/ or submissions/ folder it sits in (at any depth below it); None for none."""
    index = _index(repo)
    path = PurePosixPath(rel).parent
    if str(path) in index.problems:
        return str(path)
    for parent in path.parents:
        inner = PurePosixPath(rel).relative_to(parent).parts
        if str(parent) in index.problems and inner[0] in SUBMISSION_FOLDERS:
            return str(parent)
    return None


def problems(repo) -> dict[str, ChallengeProblem]:
    """Every problem folder of the repository (folder → its record), in path order."""
    return _index(repo).problems


def files_of(repo, folder: str) -> list[str]:
    """The Python files in a problem's folder and below it, where its submissions are."""
    return [rel for rel in repo.scripts if folder in (".", "") or rel.startswith(folder + "/")]


def _index(repo) -> _Index:
    return repo.reading("competition.index", "", lambda: _find(repo))


def _find(repo) -> _Index:
    """The problem folders: a reference.py defining generate_input and ref_kernel (a file that
    cannot be parsed counts, its draft saying why) beside a task.yml; and their harness."""
    found: dict[str, ChallengeProblem] = {}
    harness: dict[str, list[str]] = {}
    for rel in repo.scripts:
        path = PurePosixPath(rel)
        folder = str(path.parent)
        if path.name != REFERENCE_FILE or not repo.exists(in_folder(folder, TASK)):
            continue
        tree = repo.tree(rel)
        if tree is not None and not {"generate_input", "ref_kernel"} <= _bound(tree):
            continue  # a reference of another format (no generate_input): not this convention's
        found[folder] = _problem(repo, folder, tree)
    for folder in found:
        for rel in _harness_files(repo, folder):
            harness.setdefault(rel, []).append(folder)
    return _Index(dict(sorted(found.items())), {k: tuple(v) for k, v in harness.items()})


def _problem(repo, folder: str, tree: ast.Module | None) -> ChallengeProblem:
    reference = in_folder(folder, REFERENCE_FILE)
    if tree is None:
        return ChallengeProblem(folder, error=f"{reference}: not Python that parses")
    task, error = _task(repo, folder)
    return ChallengeProblem(folder, task.dims if task else (), _dtypes(tree), _problem_cuda(repo, folder),
                            "check_implementation" in _bound(tree), error)


def _task(repo, folder: str) -> tuple[Task | None, str]:
    """The folder's task.yml as the run reads it, parsed once; or why it cannot be read."""
    def parse() -> tuple[Task | None, str]:
        rel = in_folder(folder, TASK)
        try:
            return read_task(rel, repo.text(rel)), ""
        except OpDefinitionError as exc:
            return None, str(exc)
    return repo.reading("competition.task", folder, parse)


def _task_files(repo, folder: str) -> list[str]:
    """The repository files task.yml's `files:` and `templates:` name (the submission aside),
    where task.yml reads; its folder's own otherwise."""
    task, _ = _task(repo, folder)
    if task is None:
        return []
    data = task.data
    sources = [item.get("source") for item in data.get("files") or [] if isinstance(item, dict)]
    templates = data.get("templates")
    sources += list(templates.values()) if isinstance(templates, dict) else []
    out = []
    for source in sources:
        if isinstance(source, str) and source != SUBMISSION and not PurePosixPath(source).is_absolute():
            rel = posixpath.normpath(in_folder(folder, source))
            if not rel.startswith("../") and rel.endswith(".py"):
                out.append(rel)
    return out


def _harness_files(repo, folder: str) -> list[str]:
    """A problem's harness: the files task.yml lists, and the format's files by name in its
    folder and the folder above it; never its submission.py (which task.yml's `templates:` may
    name: the AMD challenges hand out the stock submission as the template)."""
    listed = _task_files(repo, folder)
    parent = str(PurePosixPath(folder).parent)
    by_name = [rel for rel in repo.scripts if str(PurePosixPath(rel).parent) in (folder, parent)
               and _HARNESS_NAME.fullmatch(PurePosixPath(rel).name)]
    own = in_folder(folder, "submission.py")
    return [rel for rel in dict.fromkeys([*listed, *by_name]) if rel != own]


def _problem_cuda(repo, folder: str) -> str:
    """Where the problem's own code (reference.py, task.py, utils.py: what the run imports of
    it) names the CUDA device, "" for nowhere."""
    parent = str(PurePosixPath(folder).parent)
    names = [in_folder(folder, n) for n in (REFERENCE_FILE, "task.py", "utils.py")]
    files = [*names, *(f for f in _task_files(repo, folder) if PurePosixPath(f).name != "eval.py"),
             in_folder(parent, "utils.py")]
    for rel in dict.fromkeys(files):
        if repo.exists(rel) and (at := _cuda_at(repo, rel)):
            return at
    return ""


def _cuda_at(repo, rel: str) -> str:
    """The first line of a file naming the CUDA device (`file:line`), outside functions that ask
    `torch.cuda.is_available()`: such code chooses its device (a CPU where there is no GPU)."""
    tree = repo.tree(rel)
    if tree is None:
        return ""
    choosing: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(n, ast.Attribute) and n.attr == "is_available" for n in ast.walk(node)):
            choosing.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    for i, line in enumerate(repo.text(rel).splitlines(), 1):
        if i not in choosing and not line.lstrip().startswith("#") and _CUDA.search(line):
            return f"{rel}:{i}"
    return ""


def _bound(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (functions, assignments, imports)."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
    return out


def _dtypes(tree: ast.Module) -> tuple[tuple[str, int], ...]:
    """The dtypes generate_input names, in source order: `torch.float16`, `dtype=torch.bfloat16`,
    `.half()`, `.to(torch.float8_e4m3fnuz)`."""
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "generate_input"), None)
    if fn is None:
        return ()
    named = []
    for node in ast.walk(fn):
        word = ""
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
            word = node.attr
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args \
                and node.func.attr in ("half", "bfloat16", "float", "double"):
            word = node.func.attr
        if word in _DTYPE_WORDS or _OTHER_DTYPE.fullmatch(word):
            named.append(((node.lineno, node.col_offset), _DTYPE_WORDS.get(word, word), node.lineno))
    return tuple((word, line) for _, word, line in sorted(named))
