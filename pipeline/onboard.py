"""`flopwatch new` and `flopwatch init`: from kernel sources to drafted variants that are built
once here, with what still needs the user's hand.

Steps: find the kernels (`pipeline.kernel_scan`) in the given files, and their launches in every
source file of the repository; draft one variant folder per kernel (`pipeline.drafting`); write
them; add the drafts' folder to the kernel folders and the kernels' folders to the shared include
folders of `flopwatch.toml` (tomlkit keeps the file's comments); load each draft as `run` would
and build it on this machine.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import drafting, kernel_scan
from pipeline.config import load_config
from pipeline.discovery import find_ops
from pipeline.manifest import ManifestError, load_variant
from pipeline.plan import build_plan
from workers.build import build_variant, toolchains
from workers.records import BuildResult

# Host code searched for launches: enough for a kernel collection, bounded for a monorepo.
MAX_HOST_FILES, MAX_FILE_BYTES = 3000, 2 << 20


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
            found += sorted(f for f in path.rglob("*") if f.suffix in kernel_scan.SOURCE_SUFFIXES and f.is_file())
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"{p}: no such file or folder")
    return [f for f in found if f.resolve().is_relative_to(root.resolve())]


def repository_sources(root: Path, skip: str = "") -> list[Path]:
    """Every C/C++/CUDA/HIP source of the repository (git's list where it is one)."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard"], capture_output=True,
                                text=True, timeout=60, check=True).stdout.splitlines()
        files = [root / f for f in listed]
    except (OSError, subprocess.SubprocessError):
        files = [f for f in root.rglob("*") if ".git" not in f.parts]
    picked = [f for f in files if f.suffix in kernel_scan.SOURCE_SUFFIXES and f.is_file()
              and f.stat().st_size <= MAX_FILE_BYTES and not (skip and f.relative_to(root).as_posix().startswith(skip + "/"))]
    return sorted(picked)[:MAX_HOST_FILES]


def plan(root: Path, files: list[Path], out_dir: str) -> list[drafting.Draft]:
    """One draft per kernel of `files` (a pybind11 module: one per exported function, its
    kernels then being its own business)."""
    texts = {f: f.read_text(errors="replace") for f in files}
    host = {f: (texts.get(f) or f.read_text(errors="replace")) for f in repository_sources(root, out_dir)}
    # Constants a launch may use: those of the kernels' files (a kernel header's #define of its
    # thread count), then those of the launch's own file above it. Not every file's: a test
    # program's `const int N = 4096` must not turn a size into a number.
    kernel_constants: dict[str, str] = {}
    for text in texts.values():
        kernel_constants.update(kernel_scan.int_constants(text))
    launches: dict[str, kernel_scan.Launch] = {}
    for f, text in host.items():
        for launch in kernel_scan.find_launches(text, f.relative_to(root).as_posix(), kernel_constants):
            launches.setdefault(launch.kernel, launch)  # the first launch found: a big-shape branch first
    taken: set[str] = set()  # names within this run; an existing draft of the same name is kept (write)
    drafts = []
    for f, text in texts.items():
        rel = f.relative_to(root).as_posix()
        module = kernel_scan.find_pybind_functions(text, rel)
        kernels = module or kernel_scan.find_kernels(text, rel)
        include = umbrella_header(root, f, host)
        for k in kernels:
            drafts.append(drafting.draft(k, launches.get(k.name), text, out_dir, taken, include=include))
    return drafts


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
# Pull requests from forks do not run here: their code would run on your runner. The project's
# own pr-bench workflow shows how to admit them behind a label (docs/ci.md of flopwatch).
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
