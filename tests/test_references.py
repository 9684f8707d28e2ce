"""`flopwatch new` on a Python module drafts every public function with the reference the
repository keeps (pipeline/onboarding/decide/references.py, conventions/, write/entry_drafts.py): a built-in op by
name, a function named after the entry, a test's assert_close, or none (measured unchecked);
and lists the public functions it did not draft, with why. Fixture repositories are written
here, small, in the shape of Liger-Kernel, Mamba and pytorch/extension-cpp. Static: no torch."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from pipeline.onboarding.conventions.ref_names import common_prefix, stems
from pipeline.onboarding.decide.ops import op_by_name
from pipeline.onboarding.onboard import python_drafts
from pipeline.onboarding.source.repo import RepoFiles

ROOT = Path(__file__).resolve().parent.parent


def _write(root: Path, files: dict[str, str]) -> dict[str, str]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return files


def _drafts(files: dict[str, str], rel: str):
    repo = RepoFiles.from_texts(files)
    skipped: list = []
    drafts, _ = python_drafts(repo, rel, "flopwatch", set(), True, skipped)
    return {d.name: d for d in drafts}, skipped


def _toml(draft) -> dict:
    return tomllib.loads(draft.files["variant.toml"])


SELECTIVE = '''import torch


def selective_scan_fn(u, delta, A):
    return selective_scan_cuda(u, delta, A)


def selective_scan_ref(u, delta, A):
    return torch.cumsum(u * delta, dim=-1) * A


def helper(x):
    print(x)


def run_layer(x, layer):
    return layer(x)


def _private(x):
    return x
'''

MISH_TEST = '''import pytest
import torch

from mylib import activations as lib


def torch_mish_reference(x):
    return x * torch.tanh(torch.nn.functional.softplus(x))


@pytest.mark.parametrize("n, d, dtype", [(4, 256, torch.bfloat16), (1, 3, torch.float32)])
def test_fast_mish(n, d, dtype):
    x = torch.randn(n, d, dtype=dtype)
    y = lib.fast_mish(x)
    torch.testing.assert_close(y, torch_mish_reference(x))
'''


def test_a_reference_beside_the_entry_by_its_name(tmp_path):
    files = {"mylib/__init__.py": "", "mylib/scan.py": SELECTIVE}
    drafts, skipped = _drafts(files, "mylib/scan.py")
    m = _toml(drafts["selective_scan_fn"])
    assert drafts["selective_scan_fn"].files["variant.toml"].startswith(
        "# reference: mylib.scan:selective_scan_ref (by name, mylib/scan.py:8)")
    assert m["op"] == "selective_scan_fn" and m["binding"]["entry"] == "mylib.scan:selective_scan_fn"
    assert m["reference"]["call"] == "mylib.scan:selective_scan_ref" and m["reference"]["found"] == "convention"
    assert [i["name"] for i in m["reference"]["inputs"]] == ["u", "delta", "A"]  # no test: a marked guess
    assert "reference.inputs" in drafts["selective_scan_fn"].guessed
    assert m["devices"] == ["cpu", "cuda"]  # plain torch runs on the CPU too


def test_the_functions_not_drafted_are_listed_with_why(tmp_path):
    files = {"mylib/__init__.py": "", "mylib/scan.py": SELECTIVE}
    drafts, skipped = _drafts(files, "mylib/scan.py")
    reasons = {s.entry: s.reason for s in skipped}
    assert reasons == {"helper": "returns no tensor and takes no output buffer",
                       "run_layer": "takes an nn.Module or callable argument (layer), not tensors",
                       "_private": "not public", "selective_scan_ref": "the check of selective_scan_fn (its [reference], by name)"}
    assert set(drafts) == {"selective_scan_fn"}


def test_a_reference_from_a_tests_assert_close_with_the_tests_sizes_and_dtype(tmp_path):
    files = {"mylib/__init__.py": "",
             "mylib/activations.py": "import torch\n\n\ndef fast_mish(x):\n    return x * torch.tanh(x)\n",
             "tests/test_mish.py": MISH_TEST}
    drafts, _ = _drafts(files, "mylib/activations.py")
    draft = drafts["fast_mish"]
    m = _toml(draft)
    assert draft.files["variant.toml"].startswith(
        "# reference: tests/test_mish.py:15 (torch_mish_reference, compared by assert_close)")
    assert m["reference"]["call"] == "../../tests/test_mish.py:torch_mish_reference"
    assert m["reference"]["found"] == "test" and m["reference"]["where"] == "tests/test_mish.py:15"
    assert m["reference"]["sizes"] == {"n": 4, "d": 256}  # the parametrize row listed first
    assert m["reference"]["inputs"] == [{"name": "x", "shape": ["n", "d"]}]
    assert m["dtypes"] == ["bf16"] and draft.guessed == ()


def test_an_entry_with_no_reference_is_measured_unchecked(tmp_path):
    files = {"mylib/__init__.py": "", "mylib/misc.py": "def fancy_mix(x, w, eps):\n    return x * w + eps\n"}
    drafts, _ = _drafts(files, "mylib/misc.py")
    m = _toml(drafts["fancy_mix"])
    assert drafts["fancy_mix"].files["variant.toml"].startswith("# reference: none found — measured as unchecked")
    assert m["reference"]["check"] == "none" and "call" not in m["reference"]
    assert m["reference"]["inputs"][:2] == [{"name": "x", "shape": ["M", "N"]}, {"name": "w", "shape": ["M", "N"]}]
    assert m["reference"]["inputs"][2] == {"name": "eps", "value": 1e-6}
    assert "# TODO (guess)" in drafts["fancy_mix"].files["variant.toml"]


LIGER_LIKE = '''from mykern.ops import MyRMSNormFunction
from mykern.ops import MyNeighborhoodAttentionFunction


def liger_rms_norm(X, W, eps, offset: float = 0.0):
    return MyRMSNormFunction.apply(X, W, eps, offset)


def liger_fused_neighborhood_attention(query, key, value, kernel_size: int = 7):
    return MyNeighborhoodAttentionFunction.apply(query, key, value, kernel_size)
'''

NA_TEST = '''import torch
import pytest

from mykern.functional import liger_fused_neighborhood_attention
from mykern.ops import MyNeighborhoodAttentionFunction


def torch_window_attention(query, key, value, kernel_size=7):
    return query


@pytest.mark.parametrize("B, H, S, D", [(2, 4, 128, 64)])
def test_functional(B, H, S, D):
    q = torch.randn(B, H, S, D, dtype=torch.float16)
    k = torch.randn(B, H, S, D, dtype=torch.float16)
    v = torch.randn(B, H, S, D, dtype=torch.float16)
    same = MyNeighborhoodAttentionFunction.apply(q, k, v, 7)
    out = liger_fused_neighborhood_attention(q, k, v, kernel_size=7)
    assert torch.allclose(out, same)  # its own implementation: checks nothing
    expected = torch_window_attention(q.clone(), k.clone(), v.clone(), kernel_size=7)
    torch.testing.assert_close(out, expected)
'''


def test_a_built_in_op_by_name_and_a_window_attention_not_labelled_attention(tmp_path):
    files = {"src/mykern/__init__.py": "", "src/mykern/ops.py": "import triton\n\n@triton.jit\ndef k():\n    pass\n",
             "src/mykern/functional.py": LIGER_LIKE, "test/test_na.py": NA_TEST}
    drafts, _ = _drafts(files, "src/mykern/functional.py")
    rms = _toml(drafts["liger_rms_norm"])
    assert rms["op"] == "rms_norm" and rms["backend"] == "triton" and "devices" not in rms  # Triton: GPUs only
    assert drafts["liger_rms_norm"].files["variant.toml"].startswith("# reference: built-in op rms_norm")
    na = _toml(drafts["liger_fused_neighborhood_attention"])
    assert na["op"] == "liger_fused_neighborhood_attention"  # not the built-in `attention`
    assert na["reference"]["call"] == "../../test/test_na.py:torch_window_attention"
    assert na["reference"]["sizes"] == {"B": 2, "H": 4, "S": 128, "D": 64} and na["dtypes"] == ["fp16"]
    assert [i["name"] for i in na["reference"]["inputs"]] == ["query", "key", "value", "kernel_size"]
    assert na["reference"]["inputs"][3] == {"name": "kernel_size", "value": 7}


EXT_OPS = '''import torch
from torch import Tensor


def _backward(ctx, grad):
    return grad

__all__ = ["mymuladd", "myadd_out"]


def mymuladd(a: Tensor, b: Tensor, c: float) -> Tensor:
    return torch.ops.ext_cpp.mymuladd.default(a, b, c)


def myadd_out(a: Tensor, b: Tensor, out: Tensor) -> None:
    torch.ops.ext_cpp.myadd_out.default(a, b, out)


def unlisted(a):
    return a
'''

EXT_TEST = '''import torch
import ext_cpp


def reference_muladd(a, b, c):
    return a * b + c


class TestMulAdd:
    def sample_inputs(self, device):
        def make_tensor(*size):
            return torch.randn(size, device=device)

        return [[make_tensor(3), make_tensor(3), 1], [make_tensor(2, 8), make_tensor(2, 8), 0.5]]

    def test_correctness(self):
        for args in self.sample_inputs("cpu"):
            result = ext_cpp.ops.mymuladd(*args)
            expected = reference_muladd(*args)
            torch.testing.assert_close(result, expected)


class TestAddOut:
    def sample_inputs(self, device):
        def make_tensor(*size):
            return torch.randn(size, device=device)

        return [[make_tensor(16), make_tensor(16), make_tensor(16)]]

    def test_correctness(self):
        for args in self.sample_inputs("cpu"):
            result = args[-1]
            ext_cpp.ops.myadd_out(*args)
            expected = torch.add(*args[:2])
            torch.testing.assert_close(result, expected)
'''


def test_an_extension_packages_ops_checked_as_its_tests_check_them(tmp_path):
    files = {"ext_cpp/__init__.py": "from . import _C, ops\n", "ext_cpp/ops.py": EXT_OPS, "test/test_ext.py": EXT_TEST,
             "setup.py": "from torch.utils.cpp_extension import CppExtension\n"}
    drafts, skipped = _drafts(files, "ext_cpp/ops.py")
    assert [(s.entry, s.reason) for s in skipped] == [("_backward", "not public"),
                                                      ("unlisted", "not in the module's __all__")]
    muladd = _toml(drafts["mymuladd"])
    assert muladd["reference"]["call"] == "../../test/test_ext.py:reference_muladd"  # X with the prefix "my" taken off
    assert muladd["reference"]["found"] == "convention"
    assert muladd["reference"]["inputs"] == [{"name": "a", "shape": ["N", "M"]}, {"name": "b", "shape": ["N", "M"]},
                                             {"name": "c", "value": 0.5}]  # the largest sample
    assert muladd["backend"] == "torch" and muladd["extensions"] == [{"from": "../../setup.py"}]
    out = _toml(drafts["myadd_out"])
    assert out["reference"]["call"] == "torch.add" and out["reference"]["found"] == "test"
    assert out["reference"]["inputs"][2] == {"name": "out", "shape": ["N"], "output": True}
    assert "returns" not in out["binding"] and out["devices"] == ["cpu", "cuda"]


def test_names_an_entry_goes_by():
    assert common_prefix(["liger_rms_norm", "liger_dyt", "liger_geglu"]) == "liger_"
    assert common_prefix(["mymuladd", "myadd_out"]) == "my"
    assert {"rms_norm_fwd", "rms_norm"} <= set(stems("liger_rms_norm_fwd", "liger_"))
    assert op_by_name("liger_fused_neighborhood_attention", "liger_") == ""
    assert op_by_name("liger_rms_norm", "liger_") == "rms_norm"


def test_new_prints_and_lists_what_it_did_not_draft(tmp_path):
    repo = tmp_path / "repo"
    _write(repo, {"mylib/__init__.py": "", "mylib/scan.py": SELECTIVE})
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "new", "mylib/scan.py", "--no-build", "--json"],
                          cwd=repo, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    out = json.loads(proc.stdout)
    assert {"entry": "run_layer", "reason": "takes an nn.Module or callable argument (layer), not tensors"} \
        in out["undrafted"]
    assert out["drafts"][0]["reference"].startswith("mylib.scan:selective_scan_ref")
    text = subprocess.run([sys.executable, "-m", "pipeline.cli", "new", "mylib/scan.py", "--no-build", "--force"],
                          cwd=repo, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert "not drafted (4):" in text.stdout and "_private: not public" in text.stdout
    assert "1 entry drafted: 0 a built-in op, 1 the repository's reference, 0 unchecked (no reference found); " \
           "4 not drafted" in text.stdout and "helper: returns no tensor" in text.stdout


def _load_all(repo: Path) -> dict:
    from pipeline.project.config import load_config
    from pipeline.project.discovery import find_ops
    from pipeline.project.manifest import load_variant

    config = load_config(repo)
    ops, _ = find_ops(repo, config.kernel_dirs)
    return {m.parent.name: load_variant(repo, m, config, ops) for m in sorted((repo / "flopwatch").glob("*/variant.toml"))}


def test_every_draft_loads_as_a_manifest_and_init_reads_a_packages_entry_modules(tmp_path):
    repo = tmp_path / "repo"
    _write(repo, {"mylib/__init__.py": "", "mylib/functional.py": SELECTIVE, "mylib/activations.py":
                  "import torch\n\n\ndef fast_mish(x):\n    return x * torch.tanh(x)\n", "tests/test_mish.py": MISH_TEST,
                  "mylib/helpers.py": "def scale(x, s):\n    return x * s\n"})
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", "init", "--no-build", "--no-workflow", "--json"],
                          cwd=repo, capture_output=True, text=True, env=env)
    drafted = {d["variant"] for d in json.loads(proc.stdout)["drafts"]}
    assert drafted == {"selective_scan_fn"}  # functional.py; not helpers.py nor activations.py
    subprocess.run([sys.executable, "-m", "pipeline.cli", "new", "mylib/activations.py", "--no-build"], cwd=repo,
                   capture_output=True, text=True, env=env, check=True)
    loaded = _load_all(repo)
    assert set(loaded) == {"selective_scan_fn", "fast_mish"}
    assert loaded["fast_mish"].devices == ("cpu", "cuda")


def test_a_tests_transposed_tensors_keep_their_axes_in_order():
    test = '''import torch
import pytest
from mylib.rot import my_rot


def rot_reference(q):
    return q


@pytest.mark.parametrize("bsz, seq_len, heads, head_dim", [(2, 128, 8, 64)])
def test_rot(bsz, seq_len, heads, head_dim):
    q = torch.randn((bsz, seq_len, heads, head_dim)).transpose(1, 2).to(torch.float16)
    torch.testing.assert_close(my_rot(q.clone()), rot_reference(q.clone()))
'''
    files = {"mylib/__init__.py": "", "mylib/rot.py": "def my_rot(q):\n    return q * 2\n", "test/test_rot.py": test}
    drafts, _ = _drafts(files, "mylib/rot.py")
    m = _toml(drafts["my_rot"])
    assert m["reference"]["inputs"] == [{"name": "q", "shape": ["bsz", "heads", "seq_len", "head_dim"]}]
    assert m["dtypes"] == ["fp16"] and m["reference"]["call"] == "../../test/test_rot.py:rot_reference"


def test_a_reference_class_is_noted_not_called():
    test = '''import torch
from mylib.act import my_act


class TorchAct(torch.nn.Module):
    def __init__(self, hidden_size):
        super().__init__()

    def forward(self, x):
        return x
'''
    files = {"mylib/__init__.py": "", "mylib/act.py": "def my_act(x):\n    return x * 2\n", "tests/test_act.py": test}
    drafts, _ = _drafts(files, "mylib/act.py")
    m = _toml(drafts["my_act"])
    assert m["reference"]["check"] == "none"
    assert any("class TorchAct is a reference by name, but an nn.Module built with constructor arguments" in t
               for t in drafts["my_act"].todo)


def test_a_built_in_op_takes_its_sizes_and_dtype_from_the_test_that_calls_the_entry():
    test = MISH_TEST.replace("mish", "gelu").replace("assert_close(y, torch_gelu_reference(x))",
                                                     "assert_close(y, torch.nn.functional.gelu(x))")
    files = {"mylib/__init__.py": "",
             "mylib/activations.py": "import torch\n\n\ndef fast_gelu(x):\n    return torch.nn.functional.gelu(x)\n",
             "tests/test_gelu.py": test}
    drafts, _ = _drafts(files, "mylib/activations.py")
    draft = drafts["fast_gelu"]
    m = _toml(draft)
    assert draft.files["variant.toml"].startswith("# reference: built-in op gelu")  # torch's own gelu: the op's
    # the test's size is checked; the timed one is the test's scaled (its rows vary n and d)
    assert m["op"] == "gelu" and m["check"] == [{"shapes": [[4, 256]]}] and m["dtypes"] == ["bf16"]
    assert m["shapes"][0][0] > 4 and m["shapes"][0][1] > 256 and draft.guessed == ()
    assert "reference" not in m


def test_the_repositorys_own_reference_comes_before_the_built_in_op_its_name_says():
    """A test comparing the entry with a function the repository writes is its check; the
    built-in op the name says (gelu) is its peer only where they agree on the test's inputs
    (tests/test_bench_sizes.py runs them)."""
    files = {"mylib/__init__.py": "",
             "mylib/activations.py": "import torch\n\n\ndef fast_gelu(x):\n    return torch.nn.functional.gelu(x)\n",
             "tests/test_gelu.py": MISH_TEST.replace("mish", "gelu").replace(
                 "x * torch.tanh(torch.nn.functional.softplus(x))", "torch.nn.functional.gelu(x)")}
    drafts, _ = _drafts(files, "mylib/activations.py")
    draft = drafts["fast_gelu"]
    m = _toml(draft)
    assert draft.files["variant.toml"].startswith("# reference: tests/test_gelu.py:15 (torch_gelu_reference")
    assert m["op"] == "fast_gelu" and m["reference"]["call"] == "../../tests/test_gelu.py:torch_gelu_reference"
    # given as texts, nothing on disk to run them with: the built-in peer is offered, unverified, not taken
    assert "peer" not in m["reference"] and draft.peer == ""
    assert '# peer = { op = "gelu", inputs = { x = "X" } }  # the built-in gelu as its peer is unverified' \
        in draft.files["variant.toml"]


def test_a_functions_apply_bound_to_a_public_name_is_an_entry():
    ops = '''import torch


class ScaleFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps=1e-6):
        return x * w + eps
'''
    test = '''import torch
from mylib.ops import ScaleFunction


def torch_scale(x, w, eps=1e-6):
    return x * w + eps


def test_scale():
    x = torch.randn(8, 64)
    w = torch.randn(64)
    torch.testing.assert_close(ScaleFunction.apply(x, w), torch_scale(x, w))
'''
    files = {"mylib/__init__.py": "", "mylib/ops.py": ops, "mylib/functional.py":
             "from mylib.ops import ScaleFunction\n\nmy_scale = ScaleFunction.apply\nmy_other = Missing.apply\n",
             "tests/test_scale.py": test}
    drafts, skipped = _drafts(files, "mylib/functional.py")
    m = _toml(drafts["my_scale"])
    assert m["binding"]["entry"] == "mylib.functional:my_scale"
    assert m["reference"]["call"] == "../../tests/test_scale.py:torch_scale"  # `scale` once `my_` is taken off
    assert m["reference"]["inputs"] == [{"name": "x", "shape": ["N", "M"]}, {"name": "w", "shape": ["M"]}]
    assert [(s.entry, s.reason) for s in skipped] == [("my_other", "Missing.apply, whose forward flopwatch cannot find")]


def test_a_namesake_in_another_module_is_not_the_entry():
    other = '''import torch
from mylib.functional import my_loss


def test_other():
    a = torch.randn(3, 5)
    torch.testing.assert_close(my_loss(a, a, a), a)
'''
    mine = '''import torch
import pytest
from mylib.losses import my_loss


def loss_reference(x, y):
    return x - y


def test_mine():
    x = torch.randn(16, 32)
    y = torch.randn(16, 32)
    torch.testing.assert_close(my_loss(x, y, None), loss_reference(x, y))
'''
    files = {"mylib/__init__.py": "", "mylib/losses.py": "def my_loss(x, y, weight=None):\n    return x - y\n",
             "mylib/functional.py": "def my_loss(a, b, c):\n    return a\n",
             "tests/test_a_other.py": other, "tests/test_mine.py": mine}
    drafts, _ = _drafts(files, "mylib/losses.py")
    m = _toml(drafts["my_loss"])
    assert m["reference"]["call"] == "../../tests/test_mine.py:loss_reference"
    assert m["reference"]["inputs"] == [{"name": "x", "shape": ["N", "M"]}, {"name": "y", "shape": ["N", "M"]}]


def test_a_parametrized_test_handing_its_sizes_to_a_helper():
    test = '''import torch
import pytest
from mylib.act import my_scale


def torch_scale(x):
    return x * 2


def _check(B, T, V, dtype):
    x = torch.randn(B * T, V, dtype=dtype)
    torch.testing.assert_close(my_scale(x), torch_scale(x))


@pytest.mark.parametrize("B, T, V", [(2, 8, 512)])
@pytest.mark.parametrize("dtype", [torch.float16])
def test_scale(B, T, V, dtype):
    _check(B, T, V, dtype)
'''
    files = {"mylib/__init__.py": "", "mylib/act.py": "def my_scale(x):\n    return x * 2\n", "tests/test_s.py": test}
    drafts, _ = _drafts(files, "mylib/act.py")
    m = _toml(drafts["my_scale"])
    assert m["reference"]["inputs"] == [{"name": "x", "shape": ["N", "V"]}]
    assert m["reference"]["sizes"] == {"V": 512, "N": 16} and m["dtypes"] == ["fp16"]


LABELLED_TEST = '''import pytest
import torch

from mylib.gates import fused_gate
from mylib.slow import plain_gate
from mylib.utils import assert_close


@pytest.mark.parametrize(
    ('B', 'T', 'H', 'scale', 'dtype'),
    [
        pytest.param(*test, id="B{}-T{}-H{}-{}-{}".format(*test))
        for test in [
            (2, 63, 4, 0.5, torch.float16),
            (4, 1024, 8, 1.0, torch.float32),
        ]
    ],
)
def test_fused_gate(B, T, H, scale, dtype):
    q = torch.randn((B, T, H), dtype=dtype)
    g = torch.randn((B, T, H), dtype=torch.float32)
    ref = plain_gate(q, g, scale=scale)
    tri = fused_gate(q, g, scale=scale)
    assert_close('o', ref, tri, 0.005)
'''


def test_a_labelled_comparison_and_rows_built_by_a_comprehension(tmp_path):
    """flash-linear-attention's shape: `assert_close('o', ref, tri, ratio)` (a label first) and
    parametrize rows written `[pytest.param(*test, id=...) for test in [...]]`."""
    files = {"mylib/__init__.py": "", "mylib/utils.py": "", "mylib/slow.py": "",
             "mylib/gates.py": "def fused_gate(q, g, scale: float = 1.0):\n    return q * g * scale\n",
             "tests/test_gates.py": LABELLED_TEST}
    drafts, _ = _drafts(files, "mylib/gates.py")
    m = _toml(drafts["fused_gate"])
    assert m["reference"]["call"] == "mylib.slow:plain_gate" and m["reference"]["found"] == "test"
    assert m["reference"]["sizes"] == {"B": 2, "T": 63, "H": 4}  # the first row of the comprehension's list
    assert m["reference"]["inputs"] == [{"name": "q", "shape": ["B", "T", "H"]},
                                        {"name": "g", "shape": ["B", "T", "H"], "dtype": "fp32"},
                                        {"name": "scale", "value": 0.5}]
    assert m["dtypes"] == ["fp16"]


def test_a_helper_named_after_a_sibling_entry_does_not_take_the_siblings_reference(tmp_path):
    """`chunk_gla_fwd` beside `chunk_gla`: `naive_chunk_gla` is chunk_gla's reference; the helper
    (other arguments, other results) is not checked against it."""
    files = {"mylib/__init__.py": "",
             "mylib/chunk.py": "def chunk_gla_fwd(q, k, state):\n    return q + k, state\n\n\n"
                               "def chunk_gla(q, k):\n    return chunk_gla_fwd(q, k, None)[0]\n",
             "mylib/naive.py": "def naive_chunk_gla(q, k):\n    return q + k\n"}
    drafts, _ = _drafts(files, "mylib/chunk.py")
    assert _toml(drafts["chunk_gla"])["reference"]["call"] == "mylib.naive:naive_chunk_gla"
    assert _toml(drafts["chunk_gla_fwd"])["reference"]["check"] == "none"
