"""Check points and the kernel-challenge format end to end on the CPU, through the harness on a
local Ray (issue 47): one commit of a repository made of tests/challenge_repo's two example
problems and variants written here to fail one way each.

- both examples `ok`, one result per benchmarks: entry, every tests: entry checked once per
  variant and device (in the job that ran first, its verdicts carried by the others);
- a submission wrong at one test shape only: every row `incorrect`, naming that shape, the
  problem's check_implementation's reason in the diagnostic;
- a problem without check_implementation judged by flopwatch's comparison with ref_kernel;
- generate_input that raises: `invalid`, naming the call and the file; a task.yml that does not
  parse: `invalid`, naming the file and the line; a problem whose code asks for CUDA: `skipped`
  on the CPU; an entry that writes into its data (an output buffer it carries) is no fault;
- `[[check]]` sets of a plain variant: a set's own tolerance fails a check point that the
  variant's tolerance passes; a kernel right at its small check shape and wrong at its large
  timed shape is `incorrect` at that shape.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest

HERE = Path(__file__).parent

WRONG_AT_64 = '''from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    out = a + b
    if a.shape[0] == 64:  # an indexing slip only this size reaches
        out[3, 5] += 1
    return out
'''

# off by a relative 2^-10: within flopwatch's fp16 tolerance, not within the problem's own check
OFF_BY_A_BIT = '''import torch

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    return (a + b) * (1 + 2 ** -10)
'''

SCALE_TASK = """files:
  - {"name": "submission.py", "source": "@SUBMISSION@"}
  - {"name": "reference.py", "source": "reference.py"}
tests:
  - {"n": 100, "seed": 1}
benchmarks:
  - {"n": 4096, "seed": 2}
"""
SCALE_REFERENCE = '''import torch


def generate_input(n: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=gen),)


def ref_kernel(data):
    return data[0] * 2
'''
SCALE_SUBMISSION = '''def custom_kernel(data):
    return data[0] * 2.02  # 1% off: within no fp32 tolerance
'''

RAISES_REFERENCE = SCALE_REFERENCE.replace("    gen = torch.Generator()",
                                           "    if n == 100:\n        raise ValueError('n=100 is not supported')\n"
                                           "    gen = torch.Generator()")
CUDA_REFERENCE = SCALE_REFERENCE.replace("torch.Generator()", "torch.Generator(device='cuda')").replace(
    "generator=gen)", "generator=gen, device='cuda')")
RIGHT_SUBMISSION = "def custom_kernel(data):\n    return data[0] * 2\n"
# data that is an output buffer the kernel fills (as an fp8 GEMM's data carries its `c`)
ZERO_REFERENCE = '''import torch


def generate_input(n: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=gen)


def ref_kernel(data):
    return torch.zeros_like(data)
'''
ZERO_SUBMISSION = "def custom_kernel(data):\n    data.zero_()\n    return data\n"

ADD_KERNELS = '''import torch


def add_off(A, B):
    return (A + B) * (1 + 1e-4)  # a relative error of 1e-4


def add_big_wrong(A, B):
    out = A + B
    if A.numel() > 4096:  # right at small sizes only
        out[-1] += 1
    return out
'''


def _challenge_variant(name: str, op: str, folder: str, entry: str, devices: str = '["cpu"]', extra: str = "") -> str:
    return (f'name = "{name}"\nop = "{op}"\nbackend = "python"\ndtypes = ["fp16"]\ndevices = {devices}\n{extra}\n'
            f'[challenge]\nfolder = "../../problems/{folder}"\n\n'
            f'[binding]\nkind = "python"\nentry = "../../problems/{folder}/{entry}"\n')


def _add_variant(name: str, entry: str, shapes: str, extra: str) -> str:
    return (f'name = "{name}"\nop = "elementwise_add"\nbackend = "python"\ndtypes = ["fp32"]\nshapes = {shapes}\n\n'
            f'[binding]\nkind = "python"\nentry = "add_kernels.py:{entry}"\nreturns = true\n\n{extra}')


def _write(root: Path) -> None:
    shutil.copytree(HERE / "challenge_repo", root)
    for name in ("vectoradd_py", "matmul_py"):  # the examples' own manifests, on the CPU only here
        path = root / "flopwatch" / name / "variant.toml"
        path.write_text(path.read_text().replace('devices = ["cpu", "cuda"]', 'devices = ["cpu"]'))
    files = {
        "problems/vectoradd_py/wrong_at_64.py": WRONG_AT_64,
        "flopwatch/wrong_at_64/variant.toml": _challenge_variant("wrong_at_64", "vectoradd_py", "vectoradd_py",
                                                                 "wrong_at_64.py:custom_kernel"),
        "problems/vectoradd_py/off_by_a_bit.py": OFF_BY_A_BIT,
        "flopwatch/off_by_a_bit/variant.toml": _challenge_variant("off_by_a_bit", "vectoradd_py", "vectoradd_py",
                                                                  "off_by_a_bit.py:custom_kernel"),
        "problems/scale_py/task.yml": SCALE_TASK, "problems/scale_py/reference.py": SCALE_REFERENCE,
        "problems/scale_py/submission.py": SCALE_SUBMISSION,
        "flopwatch/scale_py/variant.toml": _challenge_variant("scale_py", "scale_py", "scale_py",
                                                              "submission.py:custom_kernel").replace("fp16", "fp32"),
        "problems/raises_py/task.yml": SCALE_TASK, "problems/raises_py/reference.py": RAISES_REFERENCE,
        "problems/raises_py/submission.py": RIGHT_SUBMISSION,
        "flopwatch/raises_py/variant.toml": _challenge_variant("raises_py", "raises_py", "raises_py",
                                                               "submission.py:custom_kernel").replace("fp16", "fp32"),
        "problems/cuda_py/task.yml": SCALE_TASK, "problems/cuda_py/reference.py": CUDA_REFERENCE,
        "problems/cuda_py/submission.py": RIGHT_SUBMISSION,
        "flopwatch/cuda_py/variant.toml": _challenge_variant("cuda_py", "cuda_py", "cuda_py",
                                                             "submission.py:custom_kernel").replace("fp16", "fp32"),
        "problems/zero_py/task.yml": SCALE_TASK, "problems/zero_py/reference.py": ZERO_REFERENCE,
        "problems/zero_py/submission.py": ZERO_SUBMISSION,
        "flopwatch/zero_py/variant.toml": _challenge_variant("zero_py", "zero_py", "zero_py",
                                                             "submission.py:custom_kernel").replace("fp16", "fp32"),
        "problems/broken_py/task.yml": "tests:\n  - {n: 1, seed: 1\nbenchmarks: []\n",
        "problems/broken_py/reference.py": SCALE_REFERENCE, "problems/broken_py/submission.py": RIGHT_SUBMISSION,
        "flopwatch/broken_py/variant.toml": _challenge_variant("broken_py", "broken_py", "broken_py",
                                                               "submission.py:custom_kernel"),
        # [[check]] of a plain variant: tolerance 1e-3 for the variant, 1e-5 for its check set
        "flopwatch/add_strict/add_kernels.py": ADD_KERNELS,
        "flopwatch/add_strict/variant.toml": _add_variant(
            "add_strict", "add_off", "[[2048]]", "[tolerance]\nrtol = 1e-3\natol = 1e-3\n\n"
                                                "[[check]]\nshapes = [[1000]]\nrtol = 1e-5\natol = 1e-5\n"),
        "flopwatch/add_loose/add_kernels.py": ADD_KERNELS,
        "flopwatch/add_loose/variant.toml": _add_variant(
            "add_loose", "add_off", "[[2048]]", "[tolerance]\nrtol = 1e-3\natol = 1e-3\n\n[[check]]\nshapes = [[1000]]\n"),
        "flopwatch/add_big_wrong/add_kernels.py": ADD_KERNELS,
        "flopwatch/add_big_wrong/variant.toml": _add_variant("add_big_wrong", "add_big_wrong", "[[8192]]",
                                                             "[[check]]\nshapes = [[64], [1000]]\n"),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from pipeline.fleet import cluster
    from pipeline.run.progress import Progress
    from pipeline.run.runflow import RunOptions, Session, run_commit
    from pipeline.store import Store

    base = tmp_path_factory.mktemp("challenge")
    root = base / "repo"
    _write(root)
    repo = git.Repo.init(root, initial_branch="main")
    repo.index.add([str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".git" not in p.parts])
    repo.index.commit("two problems, their variants and broken ones", author=git.Actor("Dev", "dev@example.com"))
    session = Session(Store(base / "results.db"), base, cluster.connect(None), Progress(enabled=False))
    try:
        outcome = run_commit(session, repo, "HEAD", RunOptions())
    finally:
        cluster.shutdown(session.cluster_info)
    rows: dict[str, dict[str, object]] = {}
    for r in outcome.results:
        rows.setdefault(r.variant, {})[r.shape] = r
    return outcome, rows


@pytest.mark.slow
@pytest.mark.parametrize("name, sizes, tests", [
    ("vectoradd_py", ["size=256", "size=1024", "size=2048"], ["size=31", "size=64", "size=127"]),
    ("matmul_py", ["m=128,n=128,k=128", "m=512,n=512,k=512", "m=1024,n=1024,k=1024"],
     ["m=32,n=48,k=16", "m=64,n=64,k=64", "m=96,n=32,k=128"]),
])
def test_the_examples_are_ok_one_row_per_benchmark_every_test_checked_once(run, name, sizes, tests):
    _, rows = run
    got = rows[name]
    assert sorted(got, key=sizes.index) == sizes
    assert all(r.status == "ok" for r in got.values()), {s: r.diagnostic for s, r in got.items()}
    ran = {r.correctness["check_points"]["ran_in"] for r in got.values()}
    assert len(ran) == 1  # checked once, in one job; the others carry its verdicts
    assert sum(r.correctness["check_points"]["here"] for r in got.values()) == 1
    for r in got.values():
        points = r.correctness["check_points"]["points"]
        assert [p["shape"] for p in points] == tests and all(p["passed"] for p in points)
        assert all(p["problem_check"] == {"passed": True, "reason": "", "where": f"problems/{name}/reference.py"}
                   for p in points)  # judged by the problem's own check_implementation
        assert r.correctness["checks"][0]["problem_check"]["passed"]  # every timed size checked too
    # the peer is ref_kernel, timed at the same sizes
    assert sorted(rows[f"peer.{name}"], key=sizes.index) == sizes
    assert all(r.status == "ok" for r in rows[f"peer.{name}"].values())
    if name == "matmul_py":  # [challenge] flops = "2*m*n*k"
        assert got["m=512,n=512,k=512"].flops == 2 * 512 ** 3


@pytest.mark.slow
def test_a_submission_wrong_at_one_test_shape_makes_every_row_incorrect_naming_it(run):
    _, rows = run
    got = rows["wrong_at_64"]
    assert sorted(got) == ["size=1024", "size=2048", "size=256"] and {r.status for r in got.values()} == {"incorrect"}
    first = next(r for r in got.values() if r.correctness["check_points"]["here"])
    assert first.diagnostic.startswith("check point size=64 (task.yml tests[1]): seed ")
    # the problem's own check_implementation said why, in its words
    assert "check_implementation (problems/vectoradd_py/reference.py): output differs from the reference: 1 of " \
           "4096 elements differ" in first.diagnostic
    for r in got.values():
        if r is not first:
            assert r.diagnostic.startswith(f"check point size=64 (task.yml tests[1]), checked in the job at "
                                           f"{first.shape}: seed ")
            assert not r.samples_s  # nothing of the variant ran for it
    verdicts = {p["shape"]: p["passed"] for p in first.correctness["check_points"]["points"]}
    assert verdicts == {"size=31": True, "size=64": False, "size=127": True}


@pytest.mark.slow
def test_the_problems_own_check_decides_where_flopwatchs_comparison_would_pass(run):
    _, rows = run
    got = rows["off_by_a_bit"]
    assert {r.status for r in got.values()} == {"incorrect"}
    first = next(r for r in got.values() if r.correctness["check_points"]["here"])
    assert first.diagnostic.startswith("check point size=31 (task.yml tests[0]): seed ")
    assert "check_implementation (problems/vectoradd_py/reference.py): output differs from the reference: " \
        in first.diagnostic
    (point, *_) = first.correctness["check_points"]["points"]
    assert point["rel_fro_err"] < point["rtol"]  # flopwatch's own figures would have passed it


@pytest.mark.slow
def test_a_problem_without_its_own_check_is_judged_against_ref_kernel(run):
    _, rows = run
    (r,) = rows["scale_py"].values()
    assert r.status == "incorrect"
    assert r.diagnostic.startswith("check point n=100 (task.yml tests[0]): seed ")
    assert "relative error 0.01 > tolerance 0.001" in r.diagnostic


@pytest.mark.slow
def test_generate_input_that_raises_is_invalid_naming_it(run):
    _, rows = run
    (r,) = rows["raises_py"].values()
    assert r.status == "invalid"
    assert r.diagnostic.startswith("problem 'raises_py' (problems/raises_py/reference.py): generate_input(n=100, "
                                   "seed=") and r.diagnostic.endswith("raised ValueError: n=100 is not supported")


@pytest.mark.slow
def test_a_task_yml_that_does_not_parse_is_invalid_naming_file_and_line(run):
    _, rows = run
    (r,) = rows["broken_py"].values()
    assert r.status == "invalid"
    assert r.diagnostic == ("flopwatch/broken_py/variant.toml: challenge.folder: problems/broken_py/task.yml: (syntax): "
                            "not valid YAML: line 3, column 11: expected ',' or '}', but got ':'"), \
        r.diagnostic


@pytest.mark.slow
def test_a_problem_that_makes_its_inputs_on_cuda_is_skipped_on_the_cpu(run):
    _, rows = run
    (r,) = rows["cuda_py"].values()
    assert r.status == "skipped"
    assert "generate_input(n=100, seed=" in r.diagnostic and "makes its inputs on the CUDA device" in r.diagnostic


@pytest.mark.slow
def test_a_check_set_with_a_tolerance_of_its_own(run):
    _, rows = run
    (strict,) = rows["add_strict"].values()
    assert strict.status == "incorrect"
    assert strict.diagnostic.startswith("check point N=1000 (check[0].shapes[0]): seed ")
    assert "tolerance 1e-05" in strict.diagnostic
    (loose,) = rows["add_loose"].values()  # the same kernel, the set at the variant's tolerance
    assert loose.status == "ok", loose.diagnostic
    (point,) = loose.correctness["check_points"]["points"]
    assert point["passed"] and point["rtol"] == 1e-3


@pytest.mark.slow
def test_right_at_the_check_shapes_wrong_at_the_timed_one_is_incorrect(run):
    _, rows = run
    (r,) = rows["add_big_wrong"].values()
    assert r.shape == "N=8192" and r.status == "incorrect"
    assert r.diagnostic.startswith("seed ") and "chunk 1 = out[4096:8192]" in r.diagnostic
    assert [p["passed"] for p in r.correctness["check_points"]["points"]] == [True, True]


@pytest.mark.slow
def test_the_entry_may_write_into_its_data(run):
    """The data is the entry's own copy, as the challenge's runner hands it one: an output buffer
    it carries is written by the kernel, and the reference and the check read the data as made."""
    _, rows = run
    (r,) = rows["zero_py"].values()
    assert r.status == "ok", r.diagnostic
