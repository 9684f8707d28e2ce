"""The kernel-challenge problem format (`[challenge]`, issue 47): a problem folder with
reference.py (generate_input, ref_kernel, check_implementation), task.yml (tests:, benchmarks:,
files:), task.py and utils.py one folder up, measured through a submission's custom_kernel.

The example folders are tests/challenge_repo/problems/{vectoradd_py,matmul_py}, each with the
variant.toml a draft would give it under tests/challenge_repo/flopwatch/. Here: what the driver
reads of them and refuses (no code runs), and the op as a job's child loads it; the end-to-end
runs through the harness are in tests/test_challenge_run.py.
"""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest

from pipeline.project.config import load_config
from pipeline.project.manifest import ManifestError, load_variant

HERE = Path(__file__).parent
EXAMPLE = HERE / "challenge_repo"


@pytest.fixture(autouse=True)
def _own_modules(monkeypatch):
    """The problem's modules (`reference`, `task`, `utils`) a test loads go with it."""
    for name in ("reference", "task", "utils"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield
    for name in ("reference", "task", "utils"):
        sys.modules.pop(name, None)


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root)
    return root


def _load(root: Path, name: str = "vectoradd_py"):
    return load_variant(root, root / "flopwatch" / name / "variant.toml", load_config(root))


def _refused(root: Path, name: str = "vectoradd_py") -> str:
    with pytest.raises(ManifestError) as err:
        _load(root, name)
    return str(err.value)


# -- what the driver reads -------------------------------------------------------------------------

def test_the_examples_load_with_benchmarks_as_shapes_and_tests_as_check_points(repo):
    v = _load(repo)
    assert [s.key for s in v.shapes] == ["size=256", "size=1024", "size=2048"]  # task.yml's benchmarks:, no seed
    assert [(p["dims"], p["where"]) for p in v.check_points] == [
        ({"size": 31}, "task.yml tests[0]"), ({"size": 64}, "task.yml tests[1]"), ({"size": 127}, "task.yml tests[2]")]
    assert v.binding.returns and v.dtypes == ("fp16",)
    op = v.repo_op
    assert op["kind"] == "challenge" and op["dims"] == ["size"] and op["seeded"] and op["checks_itself"]
    # task.yml's files: by the names the problem's code imports them (utils.py lies one folder up)
    assert {k: m["path"] for k, m in op["modules"].items()} == {
        "reference": "problems/vectoradd_py/reference.py", "task": "problems/vectoradd_py/task.py",
        "utils": "problems/utils.py"}
    assert "problems/utils.py" in v.extra_files and "problems/vectoradd_py/task.yml" in v.extra_files
    m = _load(repo, "matmul_py")
    assert [s.dims for s in m.shapes][-1] == {"m": 1024, "n": 1024, "k": 1024}


def test_the_op_identity_covers_utils_one_folder_up(repo):
    from workers.ops import op_source_digest

    before = op_source_digest(_load(repo).repo_op)
    utils = repo / "problems" / "utils.py"
    utils.write_text(utils.read_text() + "\n# a change of the shared helpers\n")
    assert op_source_digest(_load(repo).repo_op) != before


@pytest.mark.parametrize("task, words", [
    ("tests:\n  - {size: 3, seed: 1\nbenchmarks: []\n",
     "problems/vectoradd_py/task.yml: (syntax): not valid YAML: line 3, column 1"),
    ("tests: []\nbenchmarks:\n  - {size: 8, seed: 1}\n  - {size: big, seed: 2}\n",
     "problems/vectoradd_py/task.yml: benchmarks[1].size: expected an integer or a boolean, got 'big' (a string)"),
    ("benchmarks: []\n", "problems/vectoradd_py/task.yml: benchmarks: expected a non-empty list"),
    ("tests:\n  - {size: 3}\nbenchmarks:\n  - {size: 8, seed: 1}\n",
     "problems/vectoradd_py/task.yml: tests[0]: has the keywords ['size']; every entry gives those of benchmarks[0]"),
    ("benchmarks:\n  - {size: 8, seed: 1, width: 3}\n",
     "problems/vectoradd_py/reference.py: generate_input: takes no 'width'"),
    ("files:\n  - {name: utils.py, source: ../../../../etc/utils.py}\nbenchmarks:\n  - {size: 8, seed: 1}\n",
     "problems/vectoradd_py/task.yml: files[0].source: '../../../../etc/utils.py' points outside the repository"),
    ("- just a list\n", "problems/vectoradd_py/task.yml: (top level): expected a mapping"),
])
def test_a_broken_task_yml_is_refused_naming_the_file_and_the_key(repo, task, words):
    (repo / "problems" / "vectoradd_py" / "task.yml").write_text(task)
    text = _refused(repo)
    assert text.startswith("flopwatch/vectoradd_py/variant.toml: challenge.folder: ") and words in text, text


def test_a_reference_without_ref_kernel_is_refused(repo):
    ref = repo / "problems" / "vectoradd_py" / "reference.py"
    ref.write_text(ref.read_text().replace("def ref_kernel(", "def reference_kernel("))
    assert "problems/vectoradd_py/reference.py: ref_kernel: missing: def ref_kernel(data) returning the expected " \
           "output" in _refused(repo)


@pytest.mark.parametrize("change, key, words", [
    (('dtypes = ["fp16"]', 'dtypes = ["fp16", "bf16"]'), "dtypes", "a challenge problem makes its own inputs"),
    (("[challenge]", "[tolerance]\nrtol = 1e-3\n\n[challenge]"), "tolerance",
     "the problem's check_implementation (problems/vectoradd_py/reference.py) judges its outputs"),
    (("[challenge]", "[[check]]\nshapes = [[31]]\nrtol = 1e-3\n\n[challenge]"), "check[0].rtol",
     "check_implementation (problems/vectoradd_py/reference.py) judges its outputs; remove it"),
    (('folder = "../../problems/vectoradd_py"', 'folder = "../../problems/nothing_here"'), "challenge.folder",
     "folder '../../problems/nothing_here' does not exist"),
    (('op = "vectoradd_py"', 'op = "gemm"'), "op", "'gemm' is a built-in op; a [challenge] variant names"),
    (("[challenge]", '[problem]\nfile = "x.py"\n\n[challenge]'), "challenge",
     "a variant has one of [problem]"),
])
def test_manifest_mistakes_of_a_challenge_variant(repo, change, key, words):
    path = repo / "flopwatch" / "vectoradd_py" / "variant.toml"
    path.write_text(path.read_text().replace(*change))
    text = _refused(repo)
    assert f"flopwatch/vectoradd_py/variant.toml: {key}: " in text and words in text, text


def test_manifest_check_sets_replace_the_tests_and_shapes_the_benchmarks(repo):
    ref = repo / "problems" / "vectoradd_py" / "reference.py"
    ref.write_text(ref.read_text().replace("check_implementation = make_match_reference(ref_kernel)", ""))
    path = repo / "flopwatch" / "vectoradd_py" / "variant.toml"
    path.write_text(path.read_text().replace("[challenge]", "shapes = [{size = 512}]\n\n[[check]]\nshapes = [[7]]\n"
                                                            "rtol = 1e-4\n\n[challenge]"))
    v = _load(repo)
    assert [s.key for s in v.shapes] == ["size=512"]
    assert v.check_points == ({"dims": {"size": 7}, "rtol": 1e-4, "atol": None, "where": "check[0].shapes[0]"},)
    assert not v.repo_op["checks_itself"]


# -- what a job's child loads ----------------------------------------------------------------------

def _op(root: Path, name: str = "vectoradd_py"):
    from workers.ops import for_variant

    return for_variant(_load(root, name))


def test_the_problem_imports_its_files_by_their_names_even_where_another_utils_was_imported(repo, monkeypatch):
    """`from task import input_t` and `from utils import make_match_reference` (one folder up)
    resolve in the child as the challenge's own runner lays the files out, before anything of
    the same name on sys.path or already imported."""
    import torch

    monkeypatch.setitem(sys.modules, "utils", types.ModuleType("utils"))  # some other package's `utils`
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    op = _op(repo)
    inputs = op.make_inputs({"size": 31}, torch.float16, "default", "cpu", torch.Generator().manual_seed(5))
    a, b = inputs["data"]
    assert a.shape == (31, 31) and a.dtype == torch.float16
    ref = op.reference(inputs)
    assert torch.equal(ref, a + b)
    assert sys.modules["utils"].__file__ == "problems/utils.py"
    assert op.verdict(inputs, a + b) == (True, "")
    passed, reason = op.verdict(inputs, (a + b) * 2)
    assert not passed and reason.startswith("output differs from the reference: ")


def test_the_entry_gets_data_its_own_the_reference_and_check_see_it_as_made(repo, monkeypatch):
    """A submission may write into its data (the challenge's runner hands it a copy): the
    reference and the problem's check still read the inputs as generate_input made them."""
    import torch

    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    op = _op(repo)
    inputs = op.make_inputs({"size": 16}, torch.float16, "default", "cpu", torch.Generator().manual_seed(9))
    a, b = inputs["data"]
    expected = a + b
    a.zero_()  # the entry scribbles on its own copy
    assert torch.equal(op.reference(inputs), expected)
    assert op.verdict(inputs, expected) == (True, "")


@pytest.mark.parametrize("returned, verdict", [
    ('""', (True, "")), ('"wrong at 3"', (False, "wrong at 3")), ("(False, 'max err 2')", (False, "max err 2")),
    ("(True, 'max err 0')", (True, "max err 0")), ("False", (False, "")),
])
def test_check_implementation_answers_in_each_form_the_format_has(repo, monkeypatch, returned, verdict):
    import torch

    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    ref = repo / "problems" / "vectoradd_py" / "reference.py"
    ref.write_text(ref.read_text().replace("check_implementation = make_match_reference(ref_kernel)",
                                           f"def check_implementation(data, output):\n    return {returned}\n"))
    op = _op(repo)
    inputs = op.make_inputs({"size": 4}, torch.float16, "default", "cpu", torch.Generator().manual_seed(1))
    assert op.verdict(inputs, None) == verdict


def test_a_problem_that_makes_its_inputs_on_cuda_is_skipped_on_a_cpu_job(repo, monkeypatch):
    import torch

    from workers.ops.challenge import NeedsDevice

    if torch.cuda.is_available():
        pytest.skip("this machine has the device the problem asks for")
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    ref = repo / "problems" / "vectoradd_py" / "reference.py"
    ref.write_text(ref.read_text().replace("device = default_device()", "device = 'cuda'"))
    op = _op(repo)
    with pytest.raises(NeedsDevice, match=r"generate_input\(size=8, seed=3\) makes its inputs on the CUDA device"):
        op.make_inputs({"size": 8}, torch.float16, "default", "cpu", torch.Generator().manual_seed(3))


def test_generate_input_that_raises_is_an_op_error_naming_the_call_and_the_file(repo, monkeypatch):
    import torch

    from workers.ops.repo import OpCodeError

    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    ref = repo / "problems" / "vectoradd_py" / "reference.py"
    ref.write_text(ref.read_text().replace('    """Two size', '    if size == 8:\n        raise ValueError("no 8")\n'
                                                               '    """Two size'))
    op = _op(repo)
    with pytest.raises(OpCodeError) as err:
        op.make_inputs({"size": 8}, torch.float16, "default", "cpu", torch.Generator().manual_seed(3))
    assert str(err.value) == ("problem 'vectoradd_py' (problems/vectoradd_py/reference.py): generate_input(size=8, "
                              "seed=3) raised ValueError: no 8")


def test_the_output_is_expected_in_the_references_dtype_whatever_the_rows_label(repo, monkeypatch):
    """`dtypes` labels a challenge's rows; its generate_input decides the data (fp16 here, the
    rows labelled fp32): the entry's output is held to the reference's dtype, not the label's."""
    import torch

    from workers.job import child

    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    path = repo / "flopwatch" / "vectoradd_py" / "variant.toml"
    path.write_text(path.read_text().replace('dtypes = ["fp16"]', 'dtypes = ["fp32"]'))
    v = _load(repo)
    op = _op(repo)
    armed = child.arm(op, v, {"size": 8}, torch.float32, "cpu", 3, returns=True)
    assert child.expected_output(armed, op, v, torch.float32) == ((8, 8), torch.float16)
    a, b = armed.inputs["data"]
    child.take_returned(armed, a + b, op, v, torch.float32)
    assert armed.returned_problem == "" and armed.g is not None


def test_two_problem_folders_under_one_op_name_are_refused(repo):
    """Submissions of one problem share its op; a second folder under that name would be a second
    op in its series."""
    import shutil as sh

    from pipeline.project.discovery import discover

    sh.copytree(repo / "problems" / "vectoradd_py", repo / "problems" / "vectoradd_v2")
    (repo / "problems" / "vectoradd_v2" / "task.yml").write_text(
        (repo / "problems" / "vectoradd_py" / "task.yml").read_text().replace("31", "33"))
    folder = repo / "flopwatch" / "vectoradd_v2"
    folder.mkdir()
    (folder / "variant.toml").write_text((repo / "flopwatch" / "vectoradd_py" / "variant.toml").read_text()
                                         .replace('name = "vectoradd_py"', 'name = "vectoradd_v2"')
                                         .replace("problems/vectoradd_py", "problems/vectoradd_v2"))
    (repo / "flopwatch" / "again").mkdir()
    (repo / "flopwatch" / "again" / "variant.toml").write_text(
        (repo / "flopwatch" / "vectoradd_py" / "variant.toml").read_text().replace('name = "vectoradd_py"',
                                                                                   'name = "again"'))
    valid, invalid = discover(repo, load_config(repo))
    assert {v.name for v in valid} >= {"vectoradd_py", "again", "matmul_py"}  # one problem, two submissions
    (bad,) = [b for b in invalid if b.name == "vectoradd_v2"]
    assert "'vectoradd_py' is already the op of problem problems/vectoradd_py; name the problem of " \
           "problems/vectoradd_v2 otherwise" in bad.error, bad.error
