"""Kernel-challenge problem folders drafted by `flopwatch new` / `init` (issue 47, item 3;
pipeline/onboarding/conventions/competition.py, decide/challenge.py, write/challenge_drafts.py):

- tests/challenge_repo's two problems drafted unedited, by `init` and by `new` (on the
  submissions, on the problem folders), give exactly the manifests written by hand there
  (loaded, compared key by key), and those drafts run `ok` on the CPU: one point per
  `benchmarks:` entry, every `tests:` entry checked;
- no harness function (generate_input, ref_kernel, check_implementation, eval.py's, utils.py's,
  template.py's) is drafted, whichever files are named;
- a second submission of one problem is named after the folder and the file, with the back end
  and devices its code asks for; problems sharing a folder name get the folders above;
- a problem folder whose task.yml does not parse is drafted, and `new` shows the manifest's
  error instead of failing;
- on a copy of gpu-mode/reference-kernels, `init` drafts one variant per submission, none a
  harness entry, none named `custom_kernel_N`.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import git
import pytest

from pipeline.cli import main as cli
from pipeline.onboarding.decide import challenge
from pipeline.onboarding.source.records import ChallengeProblem, ChallengeSubmission

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE / "challenge_repo"
# a whole checkout of gpu-mode/reference-kernels, where the machine has one: FLOPWATCH_EXT names the
# folder of public checkouts (as benchmarks/onboarding_golden.py --ext takes it)
REFERENCE_KERNELS = Path(os.environ.get("FLOPWATCH_EXT", "/nonexistent")) / "reference-kernels"
HARNESS_FUNCTIONS = ("generate_input", "ref_kernel", "check_implementation", "make_match_reference", "default_device",
                     "mismatches", "main", "copy", "sync")

TRITON_SUBMISSION = '''import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _add(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + i, tl.load(a_ptr + i, mask=i < n) + tl.load(b_ptr + i, mask=i < n), mask=i < n)


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    c = torch.empty_like(a)
    _add[(triton.cdiv(a.numel(), 1024),)](a, b, c, a.numel(), BLOCK=1024)
    return c
'''
INLINE_SUBMISSION = '''from torch.utils.cpp_extension import load_inline
from task import input_t, output_t

CUDA = """
__global__ void add_kernel(const at::Half* a, const at::Half* b, at::Half* c, int n) {}
torch::Tensor add(torch::Tensor a, torch::Tensor b) { return a + b; }
"""
module = load_inline(name="add_inline", cpp_sources="torch::Tensor add(torch::Tensor a, torch::Tensor b);",
                     cuda_sources=CUDA, functions=["add"])


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    return module.add(a, b)
'''
SLOW_SUBMISSION = '''from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    return (a.float() + b.float()).half()
'''


def _repo(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    """tests/challenge_repo without its hand-written manifests and flopwatch.toml, committed."""
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("flopwatch", "flopwatch.toml", "__pycache__"))
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    g = git.Repo.init(root, initial_branch="main")
    g.index.add([p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts])
    g.index.commit("two problems", author=git.Actor("Dev", "dev@example.com"))
    return root


def _draft(capsys, root: Path, *command: str, build: bool = False) -> tuple[int, dict]:
    code = cli([*command, "--repo", str(root), "--json", *(() if build else ("--no-build",)),
                *(("--no-workflow",) if command[0] == "init" else ())])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _manifest(root: Path, name: str) -> dict:
    return tomllib.loads((root / "flopwatch" / name / "variant.toml").read_text())


# -- the examples, drafted unedited ---------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    ["init"],
    ["new", "problems/vectoradd_py/submission.py", "problems/matmul_py/submission.py"],
    ["new", "problems/vectoradd_py", "problems/matmul_py"],
    ["new", "problems"],
])
def test_the_examples_are_drafted_as_their_hand_written_manifests(tmp_path, capsys, command):
    root = _repo(tmp_path)
    code, out = _draft(capsys, root, *command)
    assert code == 0, out
    assert sorted(d["variant"] for d in out["drafts"]) == ["matmul_py", "vectoradd_py"]
    for name in ("vectoradd_py", "matmul_py"):
        hand = tomllib.loads((EXAMPLE / "flopwatch" / name / "variant.toml").read_text())
        assert _manifest(root, name) == hand, name
    assert all(d["guessed"] == [] and d["todo"] == [] for d in out["drafts"])
    first = (root / "flopwatch" / "matmul_py" / "variant.toml").read_text().splitlines()[0]
    assert first == ("# reference: ref_kernel of problems/matmul_py/reference.py (judged by the problem's "
                     "check_implementation)")


@pytest.fixture(scope="module")
def drafted_run(tmp_path_factory):
    """The examples drafted by `init`, unedited, run on this machine's CPU through the harness."""
    from pipeline.fleet import cluster
    from pipeline.run.progress import Progress
    from pipeline.run.runflow import RunOptions, Session, run_commit
    from pipeline.store import Store

    base = tmp_path_factory.mktemp("drafted")
    root = _repo(base)
    assert cli(["init", "--repo", str(root), "--no-build", "--no-workflow"]) == 0
    repo = git.Repo(root)
    repo.git.add("-A")
    repo.index.commit("drafted by flopwatch init", author=git.Actor("Dev", "dev@example.com"))
    session = Session(Store(base / "results.db"), base, cluster.connect(None), Progress(enabled=False))
    try:
        outcome = run_commit(session, repo, "HEAD", RunOptions())
    finally:
        cluster.shutdown(session.cluster_info)
    rows: dict[str, dict[str, object]] = {}
    for r in outcome.results:
        if r.device.startswith("cpu"):  # the CUDA rows are skipped here: no GPU
            rows.setdefault(r.variant, {})[r.shape] = r
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("name, sizes, tests", [
    ("vectoradd_py", ["size=256", "size=1024", "size=2048"], ["size=31", "size=64", "size=127"]),
    ("matmul_py", ["m=128,n=128,k=128", "m=512,n=512,k=512", "m=1024,n=1024,k=1024"],
     ["m=32,n=48,k=16", "m=64,n=64,k=64", "m=96,n=32,k=128"]),
])
def test_the_drafts_run_ok_on_the_cpu_one_point_per_benchmark_every_test_checked(drafted_run, name, sizes, tests):
    got = drafted_run[name]
    assert sorted(got, key=sizes.index) == sizes  # one timed point per benchmarks: entry
    assert all(r.status == "ok" for r in got.values()), {s: r.diagnostic for s, r in got.items()}
    for r in got.values():
        points = r.correctness["check_points"]["points"]
        assert [p["shape"] for p in points] == tests and all(p["passed"] for p in points)
        assert all(p["problem_check"]["passed"] for p in points)  # the problem's own check_implementation
    if name == "matmul_py":
        assert got["m=512,n=512,k=512"].flops == 2 * 512 ** 3  # the drafted flops = "2*m*n*k"


# -- the harness is never an entry ----------------------------------------------------------------------

@pytest.mark.parametrize("named", [
    ["problems/vectoradd_py/reference.py"],
    ["problems/vectoradd_py/task.py", "problems/utils.py", "problems/eval.py"],
    ["problems/matmul_py/reference.py", "problems/matmul_py/task.py"],
])
def test_no_harness_file_is_drafted_whichever_is_named(tmp_path, capsys, named):
    root = _repo(tmp_path, {"problems/template.py": "def custom_kernel(data):\n    pass\n"})
    code, out = _draft(capsys, root, "new", *named, "problems/template.py")
    assert out["drafts"] == [] and code == 1
    assert any("a challenge problem (reference.py, task.yml); its harness" in n for n in out["notes"]), out["notes"]
    assert any(n.startswith("problems/template.py: the harness of the challenge problems") for n in out["notes"])


def test_a_file_task_yml_lists_is_harness_whatever_its_name(tmp_path, capsys):
    task = (EXAMPLE / "problems" / "vectoradd_py" / "task.yml").read_text().replace(
        '  - {"name": "task.py", "source": "task.py"}\n',
        '  - {"name": "task.py", "source": "task.py"}\n  - {"name": "helpers.py", "source": "../common/scaling.py"}\n')
    root = _repo(tmp_path, {"problems/vectoradd_py/task.yml": task,
                            "problems/common/scaling.py": "def scale(x, alpha: float = 2.0):\n    return x * alpha\n"})
    code, out = _draft(capsys, root, "new", "problems/common/scaling.py")
    assert out["drafts"] == [] and code == 1
    assert out["notes"] == ["problems/common/scaling.py: the harness of the challenge problems problems/vectoradd_py: "
                            "not drafted on its own"]


def test_init_drafts_no_harness_function_though_reference_py_keeps_ref_kernel_beside_its_functions(tmp_path, capsys):
    """In a package, reference.py (`ref_kernel` beside `generate_input`: the `ref_X` rule) is an
    entry module and a template building a load_inline extension an extension build: init asks
    about both, and drafts neither."""
    root = _repo(tmp_path, {"problems/vectoradd_py/__init__.py": "",
                            "problems/vectoradd_py/template.py": "def custom_kernel(data):\n    pass\n",
                            "problems/vectoradd_py/template-hip.py": INLINE_SUBMISSION})
    _, out = _draft(capsys, root, "init")
    assert sorted(d["variant"] for d in out["drafts"]) == ["matmul_py", "vectoradd_py"]
    assert not [d for d in out["drafts"] if d["variant"].startswith(HARNESS_FUNCTIONS)]
    assert not [n for n in out["notes"] if "harness" in n]  # init leaves the harness out without a word


# -- names, back ends, devices ---------------------------------------------------------------------------

def test_a_second_submission_is_named_after_the_folder_and_its_file(tmp_path, capsys):
    root = _repo(tmp_path, {"problems/vectoradd_py/solutions/correct/submission_triton.py": TRITON_SUBMISSION,
                            "problems/vectoradd_py/solutions/correct/submission_inline.py": INLINE_SUBMISSION,
                            "problems/vectoradd_py/solutions/wrong/slow.py": SLOW_SUBMISSION,
                            "problems/vectoradd_py/solutions/correct/slow.py": SLOW_SUBMISSION})
    _, out = _draft(capsys, root, "init")
    names = sorted(d["variant"] for d in out["drafts"])
    assert names == ["matmul_py", "vectoradd_py", "vectoradd_py_correct_slow", "vectoradd_py_inline",
                     "vectoradd_py_triton", "vectoradd_py_wrong_slow"]
    for name in names[1:]:
        m = _manifest(root, name)
        assert m["op"] == "vectoradd_py" and m["challenge"]["folder"] == "../../problems/vectoradd_py"
    triton = _manifest(root, "vectoradd_py_triton")
    assert triton["backend"] == "triton" and triton["devices"] == ["cuda"] and triton["binding"]["kind"] == "triton"
    inline = _manifest(root, "vectoradd_py_inline")
    assert inline["backend"] == "torch" and inline["devices"] == ["cuda"]
    assert inline["extensions"] == [{"from": "../../problems/vectoradd_py/solutions/correct/submission_inline.py"}]
    assert _manifest(root, "vectoradd_py_wrong_slow")["devices"] == ["cpu", "cuda"]
    header = (root / "flopwatch" / "vectoradd_py_wrong_slow" / "variant.toml").read_text().splitlines()[1]
    assert "kept by the repository as a wrong solution: expected incorrect" in header


def test_op_names_are_the_folders_names_with_the_folders_above_where_they_meet():
    assert challenge.op_names(["a/pmpp/vectoradd_py", "a/pmpp/matmul_py", "a/pmpp_v2/vectoradd_py", "x/softmax",
                               "gemm"]) == {
        "a/pmpp/vectoradd_py": "pmpp_vectoradd_py", "a/pmpp/matmul_py": "matmul_py",
        "a/pmpp_v2/vectoradd_py": "pmpp_v2_vectoradd_py", "x/softmax": "x_softmax", "gemm": "gemm_problem"}


def test_variant_names_of_one_problems_submissions():
    subs = [ChallengeSubmission(f"p/add/{rel}", "p/add") for rel in (
        "submission.py", "solutions/correct/submission_triton.py", "solutions/correct/ref.py",
        "solutions/wrong/ref.py", "submissions/low-precision.py")]
    assert challenge.variant_bases("add", subs) == {
        "p/add/submission.py": "add", "p/add/solutions/correct/submission_triton.py": "add_triton",
        "p/add/solutions/correct/ref.py": "add_correct_ref", "p/add/solutions/wrong/ref.py": "add_wrong_ref",
        "p/add/submissions/low-precision.py": "add_low-precision"}


@pytest.mark.parametrize("dtypes, label, guessed", [
    ((("fp16", 9), ("fp16", 11)), "fp16", False),
    ((("float8_e4m3fnuz", 20), ("bf16", 21)), "bf16", False),  # fp8 labels no row: the first that does
    ((("uint8", 33), ("fp32", 37)), "fp32", False),
    ((("uint8", 33),), "fp32", False),
    ((), "fp32", True),  # generate_input names none (it calls a helper): a marked guess
])
def test_the_rows_dtype_is_the_first_generate_input_makes_that_labels_rows(dtypes, label, guessed):
    got, why, is_guess = challenge.dtype(ChallengeProblem("p/x", dtypes=dtypes))
    assert (got, is_guess) == (label, guessed), why


@pytest.mark.parametrize("keywords, flops", [
    (("m", "n", "k"), "2*m*n*k"), (("M", "K", "N"), "2*M*N*K"), (("m", "n", "k", "l"), ""), (("size",), ""),
])
def test_flops_only_for_a_matrix_products_keywords(keywords, flops):
    assert challenge.flops(keywords) == flops


GUARDED = '''import torch


def device():
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")
'''


@pytest.mark.parametrize("utils, reference_line, devices", [
    (GUARDED, "    a = torch.randn(size, size, dtype=torch.float16, device=default_device(), generator=gen)",
     ["cpu", "cuda"]),  # code that asks whether CUDA is there chooses its device
    (GUARDED, "    a = torch.randn(size, size, dtype=torch.float16, device='cuda', generator=gen)", ["cuda"]),
    (GUARDED.replace("    if torch.cuda.is_available():\n", "    if True:\n"),
     "    a = torch.randn(size, size, dtype=torch.float16, device=default_device(), generator=gen)", ["cuda"]),
])
def test_devices_follow_whether_the_problems_code_names_cuda(tmp_path, capsys, utils, reference_line, devices):
    reference = (EXAMPLE / "problems" / "vectoradd_py" / "reference.py").read_text()
    old = "    a = torch.randn(size, size, dtype=torch.float16, device=device, generator=gen)"
    assert old in reference
    root = _repo(tmp_path, {"problems/utils.py": (EXAMPLE / "problems" / "utils.py").read_text().replace(
        "def default_device", utils + "\n\ndef default_device"), "problems/vectoradd_py/reference.py":
        reference.replace(old, reference_line)})
    _draft(capsys, root, "new", "problems/vectoradd_py/submission.py")
    assert _manifest(root, "vectoradd_py")["devices"] == devices


# -- a broken problem is drafted, its manifest's complaint shown ---------------------------------------------

def test_a_problem_whose_task_yml_does_not_parse_is_drafted_with_the_manifests_error(tmp_path, capsys):
    root = _repo(tmp_path, {"problems/vectoradd_py/task.yml": "tests:\n  - {size: 31, seed: 1\nbenchmarks: []\n"})
    code, out = _draft(capsys, root, "new", "problems/vectoradd_py", build=True)
    assert code == 1  # an invalid draft: said, not raised
    (row,) = out["drafts"]
    assert row["variant"] == "vectoradd_py" and row["state"] == "invalid"
    assert row["detail"].startswith("flopwatch/vectoradd_py/variant.toml: challenge.folder: "
                                    "problems/vectoradd_py/task.yml: (syntax): not valid YAML: line 3, column 11"), row["detail"]
    assert any("not valid YAML" in t for t in row["todo"])  # said without a build too
    assert (root / "flopwatch" / "vectoradd_py" / "variant.toml").is_file()


# -- reference-kernels -----------------------------------------------------------------------------------------

@pytest.mark.skipif(not (REFERENCE_KERNELS / "problems").is_dir(), reason="no checkout of gpu-mode/reference-kernels in $FLOPWATCH_EXT")
def test_init_on_reference_kernels_drafts_one_variant_per_submission(tmp_path, capsys):
    root = tmp_path / "reference-kernels"
    shutil.copytree(REFERENCE_KERNELS, root, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    _, out = _draft(capsys, root, "init")
    drafts = out["drafts"]
    entries = [_manifest(root, d["variant"])["binding"]["entry"] for d in drafts]
    # the submissions: every file defining custom_kernel in a problem folder or below its solutions/,
    # submissions/ folders, the harness (eval.py, template*.py) aside
    folders = {p.parent for p in (root / "problems").rglob("task.yml")
               if "def generate_input(" in (p.parent / "reference.py").read_text()}
    submissions = {p.relative_to(root).as_posix() for f in folders for p in f.rglob("*.py")
                   if "def custom_kernel" in p.read_text() or "\ncustom_kernel = " in p.read_text()
                   if not p.name.startswith(("eval", "template")) and p.name != "reference.py"}
    assert len(folders) == 41 and len(submissions) == 76
    assert sorted(e.split("../../", 1)[1].rsplit(":", 1)[0] for e in entries) == sorted(submissions)
    assert all(e.endswith(":custom_kernel") for e in entries)
    assert not [d["variant"] for d in drafts if d["variant"].startswith(("custom_kernel", *HARNESS_FUNCTIONS))]
    assert len({d["variant"] for d in drafts}) == len(drafts) == 76
    ops = {_manifest(root, d["variant"])["challenge"]["folder"]: d["op"] for d in drafts}
    assert len(set(ops.values())) == len(ops) == 41  # one op per problem folder
    assert ops["../../problems/pmpp/vectoradd_py"] == "pmpp_vectoradd_py"
    assert ops["../../problems/pmpp_v2/vectoradd_py"] == "pmpp_v2_vectoradd_py"
    assert _manifest(root, "pmpp_matmul_py")["challenge"]["flops"] == "2*m*n*k"
    assert _manifest(root, "pmpp_vectoradd_py_triton")["backend"] == "triton"
