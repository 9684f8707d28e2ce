"""`flopwatch new` and `flopwatch init`, in one pass over the repository:

find   the files to draft (the ones named, or every kernel source, problem, solution, extension
       build and entry module of the repository) in one listing (`source.RepoFiles`);
read   each file once with the readers of `conventions` (kernels, launches, modules, tests, ...);
run    the benchmark scripts that compute their sizes as they run, under the recorder, for the
       entries about to be drafted (`bench_runs`);
decide each draft's op, dtype, sizes, geometry, reference and inputs (`decide`);
write  one draft per kernel, module function, problem, solution, extension function, operator
       and entry (`write`), a later draft of an entry already drafted left out.

Writing the drafts into the repository, `flopwatch.toml`, the workflow and the first build are
`write.project`'s."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.onboarding import bench_runs
from pipeline.onboarding.conventions import (
    competition,
    found,
    kernelbench,
    module_entries,
    pybind,
    torch_extension,
)
from pipeline.onboarding.conventions.kernelbench import find_problem
from pipeline.onboarding.decide.evidence import (
    called_by_packages,
    complete,
    exported_callers,
    host_code,
    kernel_evidence,
    kernels_in,
    module_evidence,
    umbrella_header,
    with_constants,
)
from pipeline.onboarding.source.c_text import SOURCE_SUFFIXES, int_constants
from pipeline.onboarding.source.records import (
    ChallengeHarness,
    ChallengeSubmission,
    Draft,
    Plan,
    Problem,
    Solution,
)
from pipeline.onboarding.source.repo import RepoFiles
from pipeline.onboarding.write.challenge_drafts import drafts_of as challenge_drafts
from pipeline.onboarding.write.entry_drafts import module_drafts
from pipeline.onboarding.write.kernel_draft import kernel_draft
from pipeline.onboarding.write.manifest import base_names
from pipeline.onboarding.write.python_drafts import extension_drafts, problem_draft, solution_draft


def source_files(root: Path, paths: list[str], cwd: Path | None = None) -> list[Path]:
    """The kernel sources named (files, or every source file below a folder). A relative path
    is the shell's (from `cwd`) where that lies inside the repository, else the repository's
    (from `root`); an absolute one is taken as written. A path outside the repository is refused
    (ValueError), a missing one too (FileNotFoundError); a folder's files that resolve outside it
    (links) are left out."""
    out: list[Path] = []
    for p in paths:
        path = named_path(root, p, cwd)
        if path.is_dir():
            out += sorted(f for f in path.rglob("*") if f.suffix in (*SOURCE_SUFFIXES, ".py")
                          and f.is_file() and "__pycache__" not in f.parts)
        else:
            out.append(path)
    return [f for f in out if f.resolve().is_relative_to(root.resolve())]


def named_path(root: Path, text: str, cwd: Path | None = None) -> Path:
    """The file or folder `text` names, as a path below `root` (links inside the repository kept
    as named); ValueError where it lies outside the repository, FileNotFoundError where nothing
    is there."""
    given = Path(text)
    candidates = [given] if given.is_absolute() else [*([cwd / given] if cwd is not None else []), root / given]
    outside = None
    for path in candidates:
        if not path.exists():
            continue
        resolved = path.resolve()
        if not resolved.is_relative_to(root):
            outside = outside or resolved
            continue
        # named from the repository's root (a path of the shell may pass through `..` or links)
        absolute = Path(os.path.abspath(path))
        return absolute if absolute.is_relative_to(root) else root / resolved.relative_to(root)
    if outside is not None:
        raise ValueError(f"{text}: {outside} is outside the repository {root}; name files inside it (--repo names "
                         "the repository)")
    where = f"the current folder {cwd} or " if cwd is not None and not given.is_absolute() and cwd != root else ""
    raise FileNotFoundError(f"{text}: no such file or folder (looked in {where}the repository {root})")


def plan_new(repo: RepoFiles, files: list[Path]) -> Plan:
    """The drafts of the files `flopwatch new` is given: their kernels and module functions,
    and their Python entries — with the files that build the torch extensions whose sources are
    among them."""
    asked = [f.relative_to(repo.root).as_posix() for f in files]
    built = torch_extension.built_sources(repo)
    py_files = [r for r in asked if r.endswith(".py")]
    py_files += sorted({built[r].rsplit(":", 1)[0] for r in asked if r in built} - set(py_files))
    return plan_files(repo, [r for r in asked if not r.endswith(".py")], py_files, True, built, asked)


def plan_init(repo: RepoFiles) -> Plan | None:
    """The drafts of the whole repository (`flopwatch init`): every source with a `__global__`
    kernel or a pybind11 module; the problems, solutions and extension builds among its Python
    files; and every public function of its entry modules. None when it has none of these."""
    native = [rel for rel in repo.host if kernels_in(repo, rel) or repo.records(pybind, rel)]
    entry_modules = [rel for rel in repo.scripts if module_entries.is_entry_module(repo, rel)]
    py_files = [rel for rel in repo.scripts if kernelbench.mentions(t := repo.text(rel)) or torch_extension.mentions(t)
                or found(repo, ChallengeSubmission, [rel])]
    py_files += [m for m in entry_modules if m not in py_files]
    # a challenge problem's harness (reference.py keeps `ref_kernel` beside its functions) is no
    # entry module: only `new` naming one says so
    py_files = [rel for rel in py_files if not found(repo, ChallengeHarness, [rel])]
    if not native and not py_files:
        return None
    # a package's entry modules have every public function drafted; other files only their
    # problems, solutions and extensions (not every helper of a package)
    return plan_files(repo, native, py_files, frozenset(entry_modules), torch_extension.built_sources(repo), native)


def plan_files(repo: RepoFiles, native: list[str], py_files: list[str], functional: bool | frozenset[str] = True,
               built: dict[str, str] | None = None, asked: list[str] = ()) -> Plan:
    """The drafts of the kernel sources `native` (those an extension builds, `built`, left to
    the extension's drafts) and of the Python files `py_files` (every public function of those
    `functional` names, or of all), with a line for each extension whose sources were `asked`."""
    built = built or {}
    repo.include(py_files)  # a file named on the command line is read even beyond the listing's bounds
    drafts, notes = kernel_drafts(repo, native, repo.out_dir, set(built)) if native else ([], [])
    taken = {d.name for d in drafts}
    python, said, skipped = [], [], []
    entry_modules = [r for r in py_files if (functional if isinstance(functional, bool) else r in functional)]
    # the extension functions the entries' packages call, where the files drafted build an extension
    builds = any(torch_extension.extensions(repo, r).specs for r in py_files if repo.tree(r) is not None)
    wrapped = called_by_packages(repo, entry_modules) if builds else {}
    for rel in py_files:
        wanted = functional if isinstance(functional, bool) else rel in functional
        found_here, told = python_drafts(repo, rel, repo.out_dir, taken, wanted, skipped, wrapped)
        python += found_here
        said += told
    said = list(dict.fromkeys(said))  # a problem folder's harness files say one line
    return Plan(tuple(drafts + one_per_entry(python, taken)), tuple(notes + said + extension_lines(asked, built)),
                tuple(skipped), tuple(asked))


def kernel_drafts(repo: RepoFiles, files: list[str], out_dir: str,
                  skip: set[str] = frozenset()) -> tuple[list[Draft], list[str]]:
    """One draft per kernel of `files` (a pybind11 module: one per exported function, its
    kernels then being its own business; a kernel whose launches all sit in functions a module
    exports: measured through that module's draft, whose file is drafted too), and one note for
    each kernel measured through another draft. `skip`: sources the torch extension drafts
    handle (`torch_extension.built_sources`): neither their kernels nor their module functions
    are drafted here."""
    host = host_code(repo)
    texts = {rel: repo.text(rel) for rel in files if rel not in skip}
    # Constants a launch may use: those of the kernels' files (a kernel header's #define of its
    # thread count), then those of the launch's own file above it. Not every file's: a test
    # program's `const int N = 4096` must not turn a size into a number.
    constants: dict[str, str] = {}
    for text in texts.values():
        constants.update(int_constants(text))
    launches = {name: [with_constants(x, constants) for x in xs] for name, xs in host.launches.items()}
    notes: list[str] = []
    items = []
    queue = list(texts)
    seen: set[str] = set()
    while queue:
        rel = queue.pop(0)
        if rel in seen:
            continue
        seen.add(rel)
        module = repo.records(pybind, rel)
        if module:
            items += [(rel, complete(repo, fn)) for fn in module]
            continue
        for k in kernels_in(repo, rel):
            wrappers = exported_callers(launches.get(k.name, []), host.exported)
            if not wrappers:
                items.append((rel, k))
                continue
            modules = sorted({w.file for w in wrappers})
            notes.append(f"{k.name}: launched by {', '.join(sorted({w.name for w in wrappers}))} (exported by the "
                         f"module in {', '.join(modules)}): measured through that draft")
            for m in modules:  # the module is drafted with the kernel's file, unless another drafter has it
                if m not in skip and m not in texts:
                    texts[m] = repo.text(m)
                    queue.append(m)
    bases = base_names([k for _, k in items])
    taken: set[str] = set()  # names within this run; an existing draft of the same name is kept (write)
    headers = {repo.path(r): repo.text(r) for r in repo.host}
    drafts = []
    for (rel, k), base in zip(items, bases):
        text = repo.text(rel)
        include = umbrella_header(repo.root, repo.path(rel), headers)
        if k.kind == "pybind11":
            launch, evidence = None, module_evidence(repo, host, k, text)
        else:
            launch, evidence = kernel_evidence(repo, host, k, launches)
        drafts.append(kernel_draft(k, launch, text, out_dir, taken, constants, include=include, evidence=evidence,
                                   base=base))
    return drafts, notes


def python_drafts(repo: RepoFiles, rel: str, out_dir: str, taken: set[str], functional: bool = True,
                  skipped: list | None = None, wrapped: dict[str, str] | None = None) -> tuple[list[Draft], list[str]]:
    """The drafts of one Python file — a challenge submission (its problem's harness: a note), a
    solution, a problem, the extensions it builds, else (`functional`) every public function as
    an entry — and notes on what was not drafted; `skipped` gets each public function not
    drafted, and why; `wrapped`: the extension functions the drafted entries' packages call,
    measured through those entries."""
    if repo.tree(rel) is None:
        return [], [f"{rel}: not Python flopwatch can read (syntax error)"]
    challenge = repo.records(competition, rel)
    if challenge:  # a challenge submission, or its problem's harness: never an entry of its own
        return challenge_drafts(repo, rel, challenge, out_dir, taken)
    read = repo.records(kernelbench, rel)
    solution = next((x for x in read if isinstance(x, Solution)), None)
    problem = next((x for x in read if isinstance(x, Problem)), None)
    if solution is not None:
        problems = found(repo, Problem, repo.sources)
        answered, guessed = find_problem(solution, problems)
        if not answered:
            return [], [f"{rel}: class ModelNew, but the repository has no problem file (class Model, get_inputs())"]
        return [solution_draft(repo, rel, next(p for p in problems if p.file == answered), guessed, out_dir,
                               taken)], []
    if problem is not None:
        return [problem_draft(repo, problem, out_dir, taken)], []
    drafts, notes = extension_drafts(repo, torch_extension.extensions(repo, rel), out_dir, taken, wrapped)
    if drafts or notes or not functional:
        return drafts, notes
    return module_drafts(repo, rel, out_dir, taken, skipped, record=bench_runs.run_sizes), []


def one_per_entry(drafts: list[Draft], taken: set[str]) -> list[Draft]:
    """The first draft of each binding entry: `init` reads a setup.py (its TORCH_LIBRARY
    operators, called through the package's wrappers) and the package's ops.py (the same
    wrappers as public functions); a later draft of the same entry is dropped, its name freed.
    A pybind11 function's name is unique only with its module, and every problem and solution
    is its own draft."""
    seen: set[str] = set()
    out = []
    for d in drafts:
        entry = d.entry if ":" in d.entry or d.entry.startswith("torch.ops.") else ""
        if entry and not kernelbench.names_model(entry) and entry in seen:
            taken.discard(d.name)
            continue
        if entry:
            seen.add(entry)
        out.append(d)
    return out


def extension_lines(asked: list[str], built: dict[str, str]) -> list[str]:
    """One line per torch extension whose sources were asked for: drafted as the extension's
    module functions, built as the repository builds it."""
    by_origin: dict[str, list[str]] = {}
    for rel in asked:
        if rel in built:
            by_origin.setdefault(built[rel], []).append(rel)
    return [f"{', '.join(sources)}: a torch extension built by {origin} (torch.utils.cpp_extension): drafted as "
            f'backend = "torch" variants of the functions its module exports or the TORCH_LIBRARY operators it '
            f'registers ([[extensions]] from = "{origin.rsplit(":", 1)[0]}"); its __global__ kernels are measured '
            f"through them, not as kernels of their own"
            for origin, sources in by_origin.items()]
