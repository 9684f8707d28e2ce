"""`flopwatch new` and `flopwatch init`: from kernel sources to drafted variants that are built
once here, with what still needs the user's hand.

Steps: find the kernels (`pipeline.onboarding.kernel_scan`) in the given files, and their launches in every
source file of the repository and in its Python scripts (`pipeline.onboarding.python_scan`), with the
tensors and sizes of the scripts that launch them; draft one variant folder per kernel
(`pipeline.onboarding.drafting`); write them; add the drafts' folder to the kernel folders and the kernels' folders to the shared include
folders of `flopwatch.toml` (tomlkit keeps the file's comments); load each draft as `run` would
and build it on this machine.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.onboarding import drafting, kernel_scan, python_scan
from pipeline.project.config import load_config
from pipeline.project.discovery import find_ops
from pipeline.project.manifest import ManifestError, load_variant, repository_files
from pipeline.run.plan import build_plan
from workers.backends.build import build_variant, toolchains
from workers.core.records import BuildResult

# Host code searched for launches: enough for a kernel collection, bounded for a monorepo.
MAX_HOST_FILES, MAX_FILE_BYTES = 3000, 2 << 20
# Python scripts read for launches, tensors and sizes, bounded the same way.
MAX_SCRIPTS = 2000
_LAUNCH_WORDS = ("LaunchKernel", "RawKernel", "RawModule")  # a script that may launch a compiled kernel


@dataclass
class Onboarded:
    """One draft and what became of it here."""

    draft: drafting.Draft
    written: bool = False
    invalid: str = ""
    build: BuildResult | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        if not self.written:
            return "exists"
        if self.invalid:
            return "invalid"
        if self.build is None:
            return "not built"
        if self.build.ok:
            return "built"
        return "skipped" if self.build.skip_reason else "build_failed"


def source_files(root: Path, paths: list[str]) -> list[Path]:
    """The kernel sources named (files, or every source file below a folder)."""
    found: list[Path] = []
    for p in paths:
        path = (root / p) if not Path(p).is_absolute() else Path(p)
        if path.is_dir():
            found += sorted(f for f in path.rglob("*") if f.suffix in (*kernel_scan.SOURCE_SUFFIXES, ".py")
                            and f.is_file() and "__pycache__" not in f.parts)
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"{p}: no such file or folder")
    return [f for f in found if f.resolve().is_relative_to(root.resolve())]


def repository_sources(root: Path, skip: str = "", suffixes: tuple[str, ...] = kernel_scan.SOURCE_SUFFIXES,
                       limit: int = MAX_HOST_FILES) -> list[Path]:
    """Every C/C++/CUDA/HIP source of the repository (git's list where it is one), or every
    file with one of `suffixes` (the Python scripts: `(".py",)`), at most `limit`."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard"], capture_output=True,
                                text=True, timeout=60, check=True).stdout.splitlines()
        files = [root / f for f in listed]
    except (OSError, subprocess.SubprocessError):
        files = [f for f in root.rglob("*") if ".git" not in f.parts]
    picked = [f for f in files if f.suffix in suffixes and f.is_file()
              and f.stat().st_size <= MAX_FILE_BYTES and not (skip and f.relative_to(root).as_posix().startswith(skip + "/"))]
    return sorted(picked)[:limit]


@dataclass
class Plan:
    """What `new` / `init` drafts: one draft per kernel or module function, and one line for
    each kernel measured through another draft (`notes`)."""

    drafts: list[drafting.Draft]
    notes: list[str] = field(default_factory=list)
    skipped: list = field(default_factory=list)  # `entries.Skipped`: public functions not drafted, and why


@dataclass
class _Repository:
    """The repository as the drafts need it: host sources, scripts, launches, exported functions."""

    root: Path
    host: dict[Path, str]
    scripts: dict[Path, str]
    launches: dict[str, list[kernel_scan.Launch]]
    py_launches: list[tuple[str, python_scan.PyLaunch]]
    exported: dict[str, kernel_scan.Kernel]  # C++ function name → the pybind11 function exporting it
    type_aliases: dict[str, str]
    _kernels: dict[Path, list[kernel_scan.Kernel]] = field(default_factory=dict)

    def rel(self, f: Path) -> str:
        return f.relative_to(self.root).as_posix()

    def kernels_in(self, f: Path) -> list[kernel_scan.Kernel]:
        if f not in self._kernels:
            self._kernels[f] = kernel_scan.find_kernels(self.host.get(f, ""), self.rel(f))
        return self._kernels[f]


def plan(root: Path, files: list[Path], out_dir: str, skip_files: frozenset[str] | set[str] = frozenset()) -> Plan:
    """One draft per kernel of `files` (a pybind11 module: one per exported function, its
    kernels then being its own business; a kernel whose launches all sit in functions a module
    exports: measured through that module's draft, whose file is drafted too).

    `skip_files`: repository-relative sources another drafter handles (those the repository
    builds with torch.utils.cpp_extension, `torch_extension_sources`): neither their kernels nor
    their module functions are drafted here."""
    skip = set(skip_files)
    repo = _read_repository(root, out_dir, skip)
    texts = {f: (repo.host.get(f) or f.read_text(errors="replace")) for f in files
             if f.relative_to(root).as_posix() not in skip}
    # Constants a launch may use: those of the kernels' files (a kernel header's #define of its
    # thread count), then those of the launch's own file above it. Not every file's: a test
    # program's `const int N = 4096` must not turn a size into a number.
    kernel_constants: dict[str, str] = {}
    for text in texts.values():
        kernel_constants.update(kernel_scan.int_constants(text))
    launches = {name: [_with_constants(x, kernel_constants) for x in found] for name, found in repo.launches.items()}
    notes: list[str] = []
    items: list[tuple[Path, kernel_scan.Kernel]] = []
    queue = list(texts)
    seen: set[Path] = set()
    while queue:
        f = queue.pop(0)
        if f in seen:
            continue
        seen.add(f)
        text = texts.get(f) or repo.host.get(f, "")
        rel = repo.rel(f)
        module = kernel_scan.find_pybind_functions(text, rel)
        if module:
            items += [(f, _complete(repo, fn)) for fn in module]
            continue
        for k in kernel_scan.find_kernels(text, rel):
            wrappers = _exported_callers(launches.get(k.name, []), repo.exported)
            if not wrappers:
                items.append((f, k))
                continue
            modules = sorted({w.file for w in wrappers})
            notes.append(f"{k.name}: launched by {', '.join(sorted({w.name for w in wrappers}))} (exported by the "
                         f"module in {', '.join(modules)}): measured through that draft")
            for m in modules:  # the module is drafted with the kernel's file, unless another drafter has it
                path = root / m
                if m not in skip and path not in texts:
                    texts[path] = repo.host.get(path) or path.read_text(errors="replace")
                    queue.append(path)
    bases = drafting.base_names([k for _, k in items])
    taken: set[str] = set()  # names within this run; an existing draft of the same name is kept (write)
    drafts = []
    for (f, k), base in zip(items, bases):
        text = texts.get(f) or repo.host.get(f, "")
        include = umbrella_header(root, f, repo.host)
        if k.kind == "pybind11":
            launch, evidence = None, _module_evidence(repo, k, text)
        else:
            launch, evidence = _kernel_evidence(repo, k, launches)
        drafts.append(drafting.draft(k, launch, text, out_dir, taken, kernel_constants, include=include,
                                     evidence=evidence, base=base))
    return Plan(drafts, notes)


def _with_constants(launch: kernel_scan.Launch, constants: dict[str, str]) -> kernel_scan.Launch:
    """The launch with the kernels' files' constants under those of its own file."""
    return dataclasses.replace(launch, constants={**constants, **launch.constants})


def _read_repository(root: Path, out_dir: str, skip: set[str]) -> _Repository:
    host = {f: f.read_text(errors="replace") for f in repository_sources(root, out_dir)}
    scripts = {f: f.read_text(errors="replace") for f in repository_sources(root, out_dir, (".py",), MAX_SCRIPTS)}
    launches: dict[str, list[kernel_scan.Launch]] = {}
    exported: dict[str, kernel_scan.Kernel] = {}
    aliases: dict[str, str] = {}
    clashing: set[str] = set()
    for f, text in host.items():
        rel = f.relative_to(root).as_posix()
        for launch in kernel_scan.find_launches(text, rel):
            launches.setdefault(launch.kernel, []).append(launch)  # the first launch found: a big-shape branch first
        for fn in kernel_scan.find_pybind_functions(text, rel):
            exported.setdefault(fn.name, fn)
        for alias, target in kernel_scan.type_aliases(text).items():
            if aliases.get(alias, target) != target and drafting.DTYPE_OF.get(aliases[alias]) != drafting.DTYPE_OF.get(target):
                clashing.add(alias)
            aliases.setdefault(alias, target)
    py_launches = []
    for f, text in scripts.items():
        if any(word in text for word in _LAUNCH_WORDS):
            py_launches += [(f.relative_to(root).as_posix(), x)
                            for x in python_scan.python_launches(f.relative_to(root).as_posix(), text)]
    return _Repository(root, host, scripts, launches, py_launches, exported,
                       {k: v for k, v in aliases.items() if k not in clashing})


def _exported_callers(launches: list[kernel_scan.Launch], exported: dict[str, kernel_scan.Kernel]) -> list:
    """The exported functions a kernel is launched from, when every launch sits in one."""
    if not launches or not all(x.caller in exported for x in launches):
        return []
    return [exported[x.caller] for x in launches]


def _complete(repo: _Repository, fn: kernel_scan.Kernel) -> kernel_scan.Kernel:
    """A module function whose parameters its module's file does not give: those of its
    definition elsewhere in the repository."""
    if fn.params:
        return fn
    for text in repo.host.values():
        found = kernel_scan.find_function(text, fn.name, definition=True)
        if found:
            return dataclasses.replace(fn, params=found[0], returns=found[1])
    return fn


def _kernel_evidence(repo: _Repository, k: kernel_scan.Kernel, launches: dict[str, list]) -> tuple:
    """(the launch the draft's geometry comes from, what the launching script says)."""
    cxx = launches.get(k.name, [])
    path = repo.root / k.file
    same_file = repo.kernels_in(path) if path in repo.host else [k]
    scripted = [(script, x) for script, x in repo.py_launches if _launches(x, k, len(same_file) <= 1)]
    launch = cxx[0] if cxx else scripted[0][1] if scripted else None
    # a script compiling the file with hiprtc makes every kernel of it HIP, launched there or not
    apis = {x.api for _, x in repo.py_launches for other in same_file if _launches(x, other, len(same_file) <= 1)}
    backend = "hip" if apis == {"hip"} else "cuda" if apis and "hip" not in apis else ""
    if not scripted:
        return launch, drafting.Evidence(type_aliases=repo.type_aliases, backend=backend)
    script, py = scripted[0]
    text = repo.scripts[repo.root / script]
    return launch, drafting.Evidence(script=script, tensors=tuple(python_scan.script_tensors(script, text)),
                                     sizes=python_scan.script_sizes(script, text), call_args=py.args,
                                     type_aliases=repo.type_aliases, backend=backend)


def _launches(launch: python_scan.PyLaunch, k: kernel_scan.Kernel, alone: bool) -> bool:
    """Whether a script's launch launches kernel `k`: its name (or, unnamed, the only kernel of
    a file it compiles) and, where the script's sources are known, `k`'s file among them."""
    if launch.inline and not launch.sources:
        return False  # the kernel is written in the script itself
    named = launch.kernel == k.name or (not launch.kernel and alone and bool(launch.sources))
    if not named:
        return False
    return not launch.sources or any(fnmatch.fnmatchcase(k.file, pattern) for pattern in launch.sources)


def _module_evidence(repo: _Repository, fn: kernel_scan.Kernel, module_text: str) -> drafting.Evidence:
    """What the repository says about a module function: the file defining it (when the module
    only declares it), the kernels it launches, and the script calling it."""
    includes: tuple[str, ...] = ()
    defining = fn.file
    if kernel_scan.find_function(module_text, fn.name, definition=True) is None:
        for f, text in repo.host.items():
            if repo.rel(f) != fn.file and kernel_scan.find_function(text, fn.name, definition=True):
                defining = repo.rel(f)
                includes = (defining,)
                break
    launched = []
    for name, found in repo.launches.items():
        if any(x.caller == fn.name and x.file in (defining, fn.file) for x in found):
            launched += [k for f in repo.host for k in repo.kernels_in(f) if k.name == name][:1]
    evidence = drafting.Evidence(type_aliases=repo.type_aliases, launched=tuple(launched), includes=includes)
    for f, text in repo.scripts.items():
        if f".{fn.entry}(" not in text:
            continue
        script = repo.rel(f)
        tensors = python_scan.script_tensors(script, text)
        made = {t.name for t in tensors if t.name}
        for call in python_scan.python_calls(script, text):
            prefix, _, entry = call.callee.rpartition(".")
            if entry != fn.entry or not prefix:
                continue
            if fn.module != "TORCH_EXTENSION_NAME" and prefix.split(".")[-1] != fn.module:
                continue
            if fn.module == "TORCH_EXTENSION_NAME" and not (call.args and all(a in made for a in call.args)
                                                            and len(call.args) == len(fn.params)):
                continue  # `forward` is a common name: only a call with the function's tensors counts
            return dataclasses.replace(evidence, script=script, tensors=tuple(tensors),
                                       sizes=python_scan.script_sizes(script, text), call_args=call.args,
                                       module=prefix.split(".")[-1] if fn.module == "TORCH_EXTENSION_NAME" else "")
    return evidence


def python_plan(root: Path, py_files: list[str], out_dir: str, taken: set[str], functional: bool | set[str]) -> Plan:
    """Drafts of the Python-side entries (`pipeline.onboarding.drafting_python`) of these repository-
    relative Python files: torch extensions they build, KernelBench problems and solutions, and
    (`functional`: every file, or those of the set) a module's public functions as entries."""
    from pipeline.onboarding import drafting_python, entries

    texts = {f.relative_to(root).as_posix(): f.read_text(errors="replace")
             for f in repository_sources(root, out_dir, (*kernel_scan.SOURCE_SUFFIXES, ".py"),
                                         MAX_HOST_FILES + MAX_SCRIPTS)}
    for rel in py_files:  # a file named on the command line is read even beyond the bounds
        if rel not in texts and (root / rel).is_file():
            texts[rel] = (root / rel).read_text(errors="replace")
    repo = drafting_python.Repo(texts, frozenset(texts) | _all_files(root, out_dir), root)
    drafts, notes, skipped = [], [], []
    for rel in py_files:
        wanted = functional if isinstance(functional, bool) else rel in functional
        found, said = entries.module_drafts(rel, repo, out_dir, taken, wanted, skipped)
        drafts += found
        notes += said
    return Plan(_one_per_entry(drafts, taken), notes, skipped)


_ENTRY_LINE = re.compile(r'^entry = "([^"]+)"', re.MULTILINE)


def _one_per_entry(drafts: list, taken: set[str]) -> list:
    """The first draft of each binding entry: `init` reads a setup.py (its TORCH_LIBRARY
    operators, called through the package's wrappers) and the package's ops.py (the same
    wrappers as public functions); a later draft of the same entry is dropped, its name freed."""
    seen: set[str] = set()
    out = []
    for d in drafts:
        m = _ENTRY_LINE.search(d.files.get("variant.toml", ""))
        if m and not (":" in m.group(1) or m.group(1).startswith("torch.ops.")):
            m = None  # a pybind11 function's name: unique only with its module
        if m and not m.group(1).endswith((":Model", ":ModelNew")) and m.group(1) in seen:
            taken.discard(d.name)
            continue
        if m:
            seen.add(m.group(1))
        out.append(d)
    return out


# Modules `init` reads as a package's kernel entry points (`flopwatch new` reads any module named).
ENTRY_MODULES = ("functional", "ops", "interface")
_REFERENCE_DEF = re.compile(r"^def (\w+_ref|ref_\w+|reference_\w+|\w+_reference|naive_\w+)\s*\(", re.MULTILINE)


def python_entry_files(root: Path, out_dir: str) -> list[str]:
    """The Python files `init` drafts: problems and solutions (class Model / ModelNew with
    get_inputs), the files that build torch extensions, and `entry_modules`."""
    found = []
    for f in repository_sources(root, out_dir, (".py",), MAX_SCRIPTS):
        text = f.read_text(errors="replace")
        if re.search(r"^class ModelNew\b", text, re.MULTILINE) or \
                ("get_inputs" in text and re.search(r"^class Model\b", text, re.MULTILINE)) or \
                re.search(r"\b(load_inline|cpp_extension|CUDAExtension|CppExtension)\b", text):
            found.append(f.relative_to(root).as_posix())
    return found + [m for m in entry_modules(root, out_dir) if m not in found]


def entry_modules(root: Path, out_dir: str) -> list[str]:
    """The modules `init` drafts every public function of, kept few: modules of a package (a
    folder with __init__.py, tests aside) named functional / ops / interface, or holding a
    reference beside their functions (`def foo_ref`). A package's other helpers are left to
    `flopwatch new <module>`."""
    from pipeline.onboarding import tests_scan

    found = []
    for f in repository_sources(root, out_dir, (".py",), MAX_SCRIPTS):
        rel = f.relative_to(root).as_posix()
        if tests_scan.is_test_file(rel) or not (f.parent / "__init__.py").is_file() or f.name == "__init__.py":
            continue
        if f.stem in ENTRY_MODULES or _REFERENCE_DEF.search(f.read_text(errors="replace")):
            found.append(rel)
    return found


def _all_files(root: Path, out_dir: str) -> frozenset[str]:
    """Every file of the repository but the drafts (what a setup.py glob may match), as
    discovery lists them (`pipeline.project.manifest.repository_files`)."""
    return frozenset(f for f in repository_files(root) if not (out_dir and f.startswith(out_dir + "/")))


def torch_extension_sources(root: Path, out_dir: str = "") -> dict[str, str]:
    """Repository-relative source file → `file:line` of the torch.utils.cpp_extension call that
    builds it (setup.py's CUDAExtension / CppExtension, load(); load_inline's sources are text,
    not files): the files `plan` leaves to the torch extension drafter (`skip_files`). A call
    flopwatch cannot read (`workers.torch_ext.spec`) is passed over: its files are drafted here."""
    from workers.torch_ext import setup_run, spec

    scripts = repository_sources(root, out_dir, (".py",), MAX_SCRIPTS)
    candidates = [(f, f.read_text(errors="replace")) for f in scripts]
    candidates = [(f, t) for f, t in candidates if "cpp_extension" in t]
    if not candidates:
        return {}
    files = frozenset(f.relative_to(root).as_posix() for f in repository_sources(
        root, out_dir, (*kernel_scan.SOURCE_SUFFIXES, ".py"), MAX_HOST_FILES + MAX_SCRIPTS))
    out: dict[str, str] = {}
    for f, text in candidates:
        try:
            specs = setup_run.read_extensions(f.relative_to(root).as_posix(), text, root, files)
        except (spec.ExtensionReadError, setup_run.SetupRunError):
            continue
        for s in specs:
            for source in s.sources:
                out.setdefault(source, s.origin)
    return out


_HEADERS = (".cuh", ".h", ".hpp", ".hh")
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


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


def write(root: Path, drafts: list[drafting.Draft], force: bool) -> list[Onboarded]:
    done = []
    for d in drafts:
        folder = root / d.folder
        if (folder / "variant.toml").exists() and not force:
            done.append(Onboarded(d, written=False, notes=[f"{d.folder}/variant.toml exists (--force overwrites)"]))
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in d.files.items():
            (folder / name).write_text(text)
        done.append(Onboarded(d, written=True))
    return done


def update_config(root: Path, out_dir: str, include_dirs: list[str]) -> list[str]:
    """Make the drafts discoverable and their kernels' folders shared include folders, in
    flopwatch.toml (created if the repository has neither it nor [tool.flopwatch]); returns
    what changed, for the user."""
    import tomlkit

    current = load_config(root)
    path, table_path = root / "flopwatch.toml", ()
    if not path.exists() and current.source == "pyproject.toml":
        path, table_path = root / "pyproject.toml", ("tool", "flopwatch")
    doc = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
    if not path.exists():
        doc.add(tomlkit.comment("flopwatch's configuration: where variants live, shared include folders, shape sets"))
    table = doc
    for key in table_path:
        table = table[key]
    if path.name == "flopwatch.toml" and "flopwatch" in table:
        table = table["flopwatch"]
    changes = []
    kernels = list(current.kernel_dirs)
    if not any(out_dir == k or out_dir.startswith(k.rstrip("/") + "/") for k in kernels):
        kept = [k for k in kernels if (root / k).is_dir() or "kernels" in table]
        table["kernels"] = [*kept, out_dir]
        changes.append(f"kernels = {[*kept, out_dir]}")
    includes = list(current.include_dirs)
    new = [d for d in sorted(set(include_dirs)) if d and d != "." and d not in includes]
    if new:
        table["include_dirs"] = [*includes, *new]
        changes.append(f"include_dirs += {new}")
    if changes or not path.exists():
        path.write_text(tomlkit.dumps(doc))
    return [f"{path.name}: {c}" for c in changes]


def build_all(root: Path, done: list[Onboarded]) -> None:
    """Load each written draft as a run would and build it on this machine."""
    config = load_config(root)
    repo_ops, _ = find_ops(root, config.kernel_dirs)
    tools = toolchains()
    for item in done:
        if not item.written:
            continue
        manifest = root / item.draft.folder / "variant.toml"
        try:
            variant = load_variant(root, manifest, config, repo_ops)
        except (ManifestError, KeyError, TypeError, ValueError) as exc:
            item.invalid = str(exc)
            continue
        ident = tools.get(variant.backend, {}).get("ident")
        if not ident:
            item.notes.append(f"no {variant.backend} toolchain here: {tools.get(variant.backend, {}).get('reason')}")
            continue
        p = build_plan(root, variant, config.include_dirs, ident)
        item.build, _ = build_variant(variant, p.bundle, p.build_hash, list(p.include_dirs))


def summary(item: Onboarded) -> str:
    """The build's outcome in one line: resources when it built, the first errors otherwise."""
    b = item.build
    if item.invalid:
        return item.invalid
    if b is None:
        return "; ".join(item.notes)
    if b.skip_reason:
        return b.skip_reason
    if not b.ok:
        return b.first_errors.strip()
    parts = []
    for name, k in (b.analysis.get("kernels") or {}).items():
        figures = [f"{label} {k[key]}" for key, label in (("registers", "registers"), ("vgprs", "VGPR"),
                                                          ("agprs", "AGPR"), ("smem_bytes", "smem B"),
                                                          ("lds_static_bytes", "LDS B"), ("waves_per_simd", "waves/SIMD"),
                                                          ("spill_stores", "spill B"), ("vgpr_spill", "VGPR spill"))
                   if k.get(key) is not None]
        parts.append(f"{name}: " + ", ".join(figures))
    return "; ".join(parts) or "built"


WORKFLOW = """\
# flopwatch on every push to main and every pull request: build, check and time each kernel
# variant, compare a pull request with its base, and keep the report as an artifact.
# Written by `flopwatch init`. Repository variables (Settings > Variables):
#   FLOPWATCH_RUNNER   the runner label of a GPU machine (default: a CPU runner, which builds and
#                      analyses every variant and times the CPU ones)
#   FLOPWATCH_PACKAGE  what pip installs flopwatch from (a wheel, a git URL; default: flopwatch)
#   TORCH_INDEX_URL    where torch comes from (default: the CPU wheels; a GPU runner sets its own)
# Pull requests from forks are skipped by the `if:` below, but a fork's PR runs the fork's own
# copy of this file, which can drop that line and name any runner. If FLOPWATCH_RUNNER is a
# self-hosted machine, put it in a runner group limited to this workflow on main and require
# approval for all outside contributors (flopwatch's docs/ci.md, "Why files are not enough");
# its pr-bench workflow shows how to admit a fork's commit with a `/bench <sha>` comment.
name: flopwatch

on:
  push:
    branches: [main]
  pull_request:

permissions: {}

jobs:
  bench:
    if: github.event_name != 'pull_request' || github.event.pull_request.head.repo.full_name == github.repository
    runs-on: ${{ vars.FLOPWATCH_RUNNER || 'ubuntu-latest' }}
    timeout-minutes: 120
    permissions:
      contents: read
    steps:
      - uses: actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09 # v5.1.0
        with:
          fetch-depth: 0
          persist-credentials: false
      - uses: actions/setup-python@ece7cb06caefa5fff74198d8649806c4678c61a1 # v6.3.0
        with:
          python-version: "3.11"
      - name: Install flopwatch
        env:
          FLOPWATCH_PACKAGE: ${{ vars.FLOPWATCH_PACKAGE || 'flopwatch' }}
          TORCH_INDEX_URL: ${{ vars.TORCH_INDEX_URL || 'https://download.pytorch.org/whl/cpu' }}
        run: |
          python -m pip install --quiet torch --index-url "$TORCH_INDEX_URL"
          python -m pip install --quiet "$FLOPWATCH_PACKAGE"
      - name: Run every variant
        run: flopwatch run
      - name: Compare with the base of the pull request
        if: github.event_name == 'pull_request'
        env:
          BASE_SHA: ${{ github.event.pull_request.base.sha }}
        run: flopwatch compare "$BASE_SHA" HEAD
      - name: Keep the report
        if: always()
        uses: actions/upload-artifact@b7c566a772e6b6bfb58ed0dc250532a479d7789f # v6.0.0
        with:
          name: flopwatch-report
          path: .flopwatch/site
          if-no-files-found: warn
"""


def write_workflow(root: Path) -> str:
    """`.github/workflows/flopwatch.yml`, unless the repository has one; returns what was done."""
    path = root / ".github" / "workflows" / "flopwatch.yml"
    if path.exists():
        return f"{path.relative_to(root)} exists: left as it is"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(WORKFLOW)
    return f"wrote {path.relative_to(root)}"
