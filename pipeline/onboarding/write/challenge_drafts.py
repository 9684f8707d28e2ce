"""The drafts of kernel-challenge submissions (`conventions.competition`): each file defining
`custom_kernel(data)` measured against its problem folder's `ref_kernel` through `[challenge]`
(docs/variants.md) — the inputs generate_input makes at each task.yml shape, the problem's
check_implementation at every `tests:` entry, one timed point per `benchmarks:` entry — named
after its problem folder (a second submission: the folder and the file's stem). The problem's
harness (reference.py, task.py, utils.py, eval.py, template*.py) is never drafted on its own:
a file of it gets a note instead."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from pipeline.onboarding.conventions import competition, found, torch_extension
from pipeline.onboarding.decide import challenge
from pipeline.onboarding.source.records import ChallengeHarness, ChallengeProblem, ChallengeSubmission, Draft
from pipeline.onboarding.write.manifest import (
    GUESS,
    binding,
    common_lines,
    draft,
    extensions,
    first_line,
    from_folder,
    variant_name,
)
from pipeline.project.challenge import REFERENCE_FILE


def drafts_of(repo, rel: str, read: list, out_dir: str, taken: set[str]) -> tuple[list[Draft], list[str]]:
    """The draft of a submission, or the note on a harness file (nothing drafted)."""
    harness = next((x for x in read if isinstance(x, ChallengeHarness)), None)
    if harness is not None:
        return [], [harness_note(harness)]
    submission = next(x for x in read if isinstance(x, ChallengeSubmission))
    return [submission_draft(repo, submission, out_dir, taken)], []


def harness_note(h: ChallengeHarness) -> str:
    """One line per problem folder (a file of the folder above: per file), the same for each of
    its harness files, so that a folder named to `new` says it once."""
    if len(h.folders) == 1 and str(PurePosixPath(h.file).parent) == h.folders[0]:
        return (f"{h.folders[0]}: a challenge problem (reference.py, task.yml); its harness (reference.py, task.py, "
                f"…) is not drafted on its own: each submission's custom_kernel is drafted against its ref_kernel")
    folders = ", ".join(h.folders[:3]) + (f", … ({len(h.folders)} problems)" if len(h.folders) > 3 else "")
    return f"{h.file}: the harness of the challenge problems {folders}: not drafted on its own"


def submission_draft(repo, sub: ChallengeSubmission, out_dir: str, taken: set[str]) -> Draft:
    """A submission's `custom_kernel` against its problem's `ref_kernel`, through `[challenge]`."""
    problems = competition.problems(repo)
    problem: ChallengeProblem = problems[sub.folder]
    op = challenge.op_names(list(problems))[sub.folder]
    siblings = found(repo, ChallengeSubmission, competition.files_of(repo, sub.folder))
    name = variant_name(None, taken, challenge.variant_bases(op, siblings)[sub.file])
    folder = f"{out_dir}/{name}"
    text = repo.text(sub.file)
    specs = torch_extension.extensions(repo, sub.file).specs
    backend = challenge.backend(text, specs)
    dtype, dtype_why, dtype_guessed = challenge.dtype(problem)
    devices, devices_why = challenge.devices(problem, sub, backend, specs)
    reference = competition.in_folder(sub.folder, REFERENCE_FILE)
    judge = "judged by the problem's check_implementation" if problem.checks_itself else \
        "compared at flopwatch's tolerances: the problem has no check_implementation"
    label = f"ref_kernel of {reference} ({judge})"
    wrong = "wrong" in PurePosixPath(sub.file).parts[len(PurePosixPath(sub.folder).parts):-1]
    origin = (f"{sub.file} (custom_kernel of the challenge problem {sub.folder}"
              + ("; kept by the repository as a wrong solution: expected incorrect" if wrong else "") + ")")
    todo, guessed = [], []
    lines = [first_line(label), *common_lines(name, op, backend, origin)]
    if dtype_guessed:
        lines.append(f'dtypes = ["{dtype}"]  {GUESS}: {dtype_why}')
        guessed.append("dtypes")
        todo.append(f"dtypes: {dtype_why}; write the dtype its inputs have")
    else:
        lines.append(f'dtypes = ["{dtype}"]  # {dtype_why}')
    lines += [f"devices = {json.dumps(list(devices))}  # {devices_why}", "", "[challenge]"]
    if problem.error:
        lines.append(f"# the problem cannot be read as a run reads it: {problem.error}")
        todo.append(f"challenge.folder: {problem.error}")
    lines.append(f'folder = "{from_folder(folder, sub.folder)}"  # timed at task.yml\'s benchmarks:, checked at '
                 "its tests:")
    flops = challenge.flops(problem.keywords)
    if flops:
        lines.append(f'flops = "{flops}"  # a matrix product of task.yml\'s keywords')
    else:
        said = ", ".join(problem.keywords) or "none read"
        lines.append(f'# flops = "…"  # FLOPs of one call in task.yml\'s keywords ({said}): not written, the rows '
                     "show bytes per second")
    entry = f"{from_folder(folder, sub.file)}:{competition.ENTRY}"
    lines += binding("triton" if backend == "triton" else "python", entry)
    if specs:
        lines += extensions(from_folder(folder, sub.file), ", ".join(s.name for s in specs))
    return draft(name, folder, lines, op, todo, guessed, entry=entry, reference=label)
