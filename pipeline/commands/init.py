"""flopwatch init: `flopwatch new` for every kernel source of a repository, plus a minimal CI
workflow that runs flopwatch on pushes and pull requests."""

from __future__ import annotations

from pathlib import Path

from pipeline.commands.common import UsageError
from pipeline.commands.new import add_common, draft_and_report, out_folder
from pipeline.onboarding import bench_runs, onboard
from pipeline.onboarding.source.repo import RepoFiles
from pipeline.project import checkout

HELP = "draft variants for every kernel source of the repository and write a CI workflow"


def add_arguments(p) -> None:
    add_common(p)
    p.add_argument("--no-workflow", action="store_true", help="do not write .github/workflows/flopwatch.yml")


def main(args) -> int:
    asked = Path(args.repo).resolve()
    root = checkout.root_around(asked)
    if root != asked:
        # init drafts a whole repository and writes its workflow: from a folder inside it (a
        # project in a home kept under git, a subfolder) it says which repository and stops.
        raise UsageError(f"{asked} is inside the git repository {root}; init drafts a whole repository: run it "
                         f"there, or `flopwatch init --repo {root}` (to draft files of this folder: flopwatch new FILE)")
    with bench_runs.recording_budget(args.record_budget):
        planned = onboard.plan_init(RepoFiles.at(root, out_folder(root, args.out)))
    if planned is None:
        raise UsageError(f"no __global__ kernel, pybind11 module, torch extension, KernelBench problem or Python "
                         f"entry module (functional.py, ops.py or interface.py, or a module keeping `def foo_ref` "
                         f"beside `def foo`) in the sources of {root}; to draft another file's kernels or "
                         f"functions: flopwatch new FILE")
    return draft_and_report(root, planned, args, init=True)
