"""Decisions on the kernel-challenge records (`conventions.competition`): each problem's op name,
each submission's variant name, the dtype that labels the rows, the devices, the back end and
the FLOPs expression. Records in, words out; nothing is read here."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from pipeline.onboarding.conventions.competition import SUBMISSION_FOLDERS, in_folder
from pipeline.onboarding.decide.devices import solution_backend
from pipeline.onboarding.source.records import ChallengeProblem, ChallengeSubmission
from pipeline.project.challenge import REFERENCE_FILE
from workers.ops import DTYPES, OPS

# The matrix product's keywords: where task.yml's shapes are exactly these, one call is
# 2·m·n·k FLOPs. Any other keyword (a batch `l`, a second GEMM, a world size) makes the count
# something only the problem's author can say.
_GEMM = ("m", "n", "k")


def _clean(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text).strip("_.-") or "problem"


def op_names(folders: list[str]) -> dict[str, str]:
    """Each problem folder's op: its folder's name (`vectoradd_py`), as every submission of the
    problem shares it; where two folders share a name (reference-kernels' `pmpp/vectoradd_py`
    and `pmpp_v2/vectoradd_py`) or a name is a built-in op's, the folders above it join it
    (`pmpp_vectoradd_py`, `pmpp_v2_vectoradd_py`) until the names are the problem's alone."""
    parts = {f: [p for p in PurePosixPath(f).parts if p not in (".", "")] or ["problem"] for f in folders}
    depth = {f: 1 for f in folders}
    while True:
        names = {f: _clean("_".join(parts[f][-depth[f]:])) for f in folders}
        seen: dict[str, list[str]] = {}
        for f, n in names.items():
            seen.setdefault(n, []).append(f)
        clash = [f for f, n in names.items() if (len(seen[n]) > 1 or n in OPS) and depth[f] < len(parts[f])]
        if not clash:
            break
        for f in clash:
            depth[f] += 1
    taken: set[str] = set()
    out = {}
    for f in folders:  # what no folder above tells apart (or a built-in op's name at the top): a suffix
        name, i = names[f], 2
        base = name if name not in OPS else f"{name}_problem"
        name = base
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        out[f] = name
    return out


def variant_bases(op: str, submissions: list[ChallengeSubmission]) -> dict[str, str]:
    """The name each submission of one problem is drafted under: the problem's folder's `submission.py`
    is the problem (`vectoradd_py`); another is the problem and its stem, a leading `submission_`
    taken off (`solutions/correct/submission_triton.py` → `vectoradd_py_triton`), with the
    folders below solutions/ where two stems agree (`vectoradd_py_correct_ref`)."""
    def words(s: ChallengeSubmission, depth: int) -> str:
        inner = PurePosixPath(s.file).relative_to(s.folder) if s.folder not in (".", "") else PurePosixPath(s.file)
        folders = [p for p in inner.parts[:-1] if p not in SUBMISSION_FOLDERS]
        stem = re.sub(r"^submission_", "", inner.stem)
        return "_".join([*(folders[max(0, len(folders) - depth):] if depth else []), stem])

    own = {s.file for s in submissions if s.file == in_folder(s.folder, "submission.py")}
    depth = {s.file: 0 for s in submissions}
    while True:
        names = {s.file: op if s.file in own else f"{op}_{_clean(words(s, depth[s.file]))}" for s in submissions}
        repeated = [s for s in submissions if s.file not in own and list(names.values()).count(names[s.file]) > 1
                    and depth[s.file] < len(PurePosixPath(s.file).parts)]
        if not repeated:
            return names
        for s in repeated:
            depth[s.file] += 1


def dtype(problem: ChallengeProblem) -> tuple[str, str, bool]:
    """(the dtype labelling the rows, why, whether it is a guess): the first of generate_input's
    dtypes that flopwatch labels rows with (fp32, fp16, bf16), the others named in the why; fp32
    where it names none of those, a guess where it names no dtype at all."""
    named = list(dict.fromkeys(w for w, _ in problem.dtypes))
    usable = [(w, line) for w, line in problem.dtypes if w in DTYPES]
    if not usable:
        if named:
            return "fp32", f"generate_input makes {', '.join(named)}, none of them a dtype rows are labelled with", False
        return "fp32", "generate_input names no dtype (torch's default is fp32)", True
    word, line = usable[0]
    others = [w for w in named if w not in DTYPES]
    extra = f"; {', '.join(others)} too, which no row is labelled with" if others else ""
    return word, f"generate_input makes {word} ({in_folder(problem.folder, REFERENCE_FILE)}:{line}){extra}", False


def devices(problem: ChallengeProblem, submission: ChallengeSubmission, backend: str, specs: tuple) -> tuple[tuple[str, ...], str]:
    """(devices, why): the GPUs only where the problem's code or the submission names the CUDA
    device, the submission launches Triton kernels or builds CUDA sources; the CPU too
    otherwise, so a draft made on a machine without a GPU runs there."""
    if problem.cuda_at:
        return ("cuda",), f"the problem's code names the CUDA device ({problem.cuda_at})"
    if submission.cuda_at:
        return ("cuda",), f"the submission names the CUDA device ({submission.cuda_at})"
    if backend == "triton":
        return ("cuda",), "the submission launches Triton kernels"
    if any(s.cuda for s in specs):
        return ("cuda",), "the submission builds CUDA sources (load_inline)"
    return ("cpu", "cuda"), "no code of the problem or the submission names the CUDA device"


def backend(text: str, specs: tuple) -> str:
    """The submission's back end: `torch` where it builds extensions (load_inline), `triton`
    where it launches Triton kernels, `python` otherwise (KernelBench solutions' rule)."""
    return solution_backend(text, specs)


def flops(keywords: tuple[str, ...]) -> str:
    """`2*m*n*k` where task.yml's keywords are exactly a matrix product's (in their own case);
    "" otherwise: the rows show bytes per second."""
    if len(keywords) == 3 and {k.lower() for k in keywords} == set(_GEMM):
        by = {k.lower(): k for k in keywords}
        return "2*" + "*".join(by[k] for k in _GEMM)
    return ""
