"""flopwatch init: `flopwatch new` for every kernel source of a repository, plus a minimal CI
workflow that runs flopwatch on pushes and pull requests."""

from __future__ import annotations

from pathlib import Path

from pipeline.commands.common import UsageError
from pipeline.commands.new import add_common, draft_and_report
from pipeline.onboarding import onboard

HELP = "draft variants for every kernel source of the repository and write a CI workflow"


def add_arguments(p) -> None:
    add_common(p)
    p.add_argument("--no-workflow", action="store_true", help="do not write .github/workflows/flopwatch.yml")


def main(args) -> int:
    root = Path(args.repo).resolve()
    texts = {f: f.read_text(errors="replace") for f in onboard.repository_sources(root, args.out.strip("/"))}
    files = [f for f, text in texts.items()
             if onboard.kernel_scan.find_kernels(text, "") or onboard.kernel_scan.find_pybind_functions(text, "")]
    py_files = onboard.python_entry_files(root, args.out.strip("/"))
    if not files and not py_files:
        raise UsageError(f"no __global__ kernel, pybind11 module, torch extension or KernelBench problem in the "
                         f"sources of {root}")
    extra = [] if args.no_workflow else [onboard.write_workflow(root)]
    # a package's entry modules have every public function drafted; other files only their
    # problems, solutions and extensions (not every helper of a package)
    functional = set(onboard.entry_modules(root, args.out.strip("/")))
    return draft_and_report(root, files, args, extra, py_files=py_files, functional=functional)
