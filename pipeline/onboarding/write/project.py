"""What onboarding writes into the repository: the draft folders (a draft that exists is left
alone unless forced), `flopwatch.toml` (the drafts' folder among the kernel folders, the kernels'
folders among the shared include folders; created where the repository has neither it nor
`[tool.flopwatch]`, an existing one keeping its comments through tomlkit) and `init`'s workflow;
every path resolved first and written only inside the repository (`inside`), and a draft that
would repeat the name of a variant of another folder refused (`existing`). Their first build is
`builds`'."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.onboarding.source.records import Draft
from pipeline.onboarding.write.existing import name_taken
from pipeline.onboarding.write.inside import OutsideRepository, within
from pipeline.project.config import load_config
from workers.core.records import BuildResult


@dataclass
class Onboarded:
    """One draft and what became of it here."""

    draft: Draft
    written: bool = False
    invalid: str = ""
    build: BuildResult | None = None
    notes: list[str] = field(default_factory=list)
    refused: bool = False  # not written, and why is its note: a link out of the repository, a name taken

    @property
    def state(self) -> str:
        if self.refused:
            return "refused"
        if not self.written:
            return "exists"
        if self.invalid:
            return "invalid"
        if self.build is None:
            return "not built"
        if self.build.ok:
            return "built"
        return "skipped" if self.build.skip_reason else "build_failed"


def write(root: Path, drafts: list[Draft], force: bool, names: dict[str, list[str]] | None = None) -> list[Onboarded]:
    """Write each draft's folder, leaving one that exists alone unless `force`. A draft is
    refused, the others still written, where its folder or a file of it resolves outside the
    repository, or where `names` (the project's variants by name: `existing.variant_names`)
    has its name in another folder."""
    done = []
    for d in drafts:
        try:
            folder = within(root, d.folder)
            paths = {name: within(root, f"{d.folder}/{name}") for name in d.files}
        except OutsideRepository as exc:
            done.append(Onboarded(d, refused=True, notes=[str(exc)]))
            continue
        if (folder / "variant.toml").exists() and not force:
            done.append(Onboarded(d, written=False, notes=[f"{d.folder}/variant.toml exists (--force overwrites)"]))
            continue
        if taken := name_taken(d, names or {}):
            done.append(Onboarded(d, refused=True, notes=[taken]))
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in d.files.items():
            paths[name].write_text(text)
        done.append(Onboarded(d, written=True))
    return done


def update_config(root: Path, out_dir: str, include_dirs: list[str]) -> list[str]:
    """Make the drafts discoverable and their kernels' folders shared include folders, in
    flopwatch.toml (created if the repository has neither it nor [tool.flopwatch]); returns
    what changed, for the user."""
    import tomlkit

    current = load_config(root)
    path = config_file(root, current)
    table_path = ("tool", "flopwatch") if path.name == "pyproject.toml" else ()
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


def config_file(root: Path, current=None) -> Path:
    """The file `update_config` writes: flopwatch.toml, or pyproject.toml where that holds the
    configuration; resolved inside the repository (else OutsideRepository)."""
    current = current if current is not None else load_config(root)
    name = "pyproject.toml" if not (root / "flopwatch.toml").exists() and current.source == "pyproject.toml" \
        else "flopwatch.toml"
    return within(root, name)


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


WORKFLOW_FILE = ".github/workflows/flopwatch.yml"


def write_workflow(root: Path) -> str:
    """`.github/workflows/flopwatch.yml`, unless the repository has one; returns what was done."""
    path = within(root, WORKFLOW_FILE)
    if path.exists():
        return f"{WORKFLOW_FILE} exists: left as it is"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(WORKFLOW)
    return f"wrote {WORKFLOW_FILE}"
