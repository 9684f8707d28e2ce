"""What `flopwatch new` drafts for an entry whose output carries an autograd graph — `modes`, its
backward and full passes beside the forward (docs/variants.md) — and the warning it gives for a
draft whose largest timed size would be launch-bound (docs/measurement.md, "Launch floors")."""

from __future__ import annotations

import json
import tomllib

import git
import pytest

from pipeline.cli import main as cli
from pipeline.commands import new as new_command
from pipeline.onboarding.conventions import autograd
from pipeline.onboarding.onboard import python_drafts
from pipeline.onboarding.source.records import Draft
from pipeline.onboarding.source.repo import RepoFiles
from pipeline.onboarding.write import launch_check

ALL_PASSES = ["forward", "backward", "full"]

OPS = '''import torch
from torch.autograd import Function


class ScaleFunction(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(w)
        return x * w

    @staticmethod
    def backward(ctx, dy):
        (w,) = ctx.saved_tensors
        return dy * w, None


class OnlyForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2


def my_scale(x, w):
    return ScaleFunction.apply(x, w)


def my_twice(x):
    return OnlyForward.apply(x)


def my_plain(x, w):
    return x * w + 1


def my_untested(x, w):
    return x * w - 1


def my_scale_into(x, w, out):
    out.copy_(ScaleFunction.apply(x, w))
'''
TEST = '''import torch

from mypkg.ops import my_plain, my_scale, my_scale_into, my_twice, my_untested


def test_scale():
    x, w = torch.randn(64, 128, requires_grad=True), torch.randn(64, 128)
    y = my_scale(x, w)
    torch.testing.assert_close(y, x * w)


def test_plain():
    x = torch.randn(64, 128, requires_grad=True)
    w = torch.randn(64, 128)
    out = my_plain(x, w)
    torch.testing.assert_close(out, x * w + 1)
    out.sum().backward()


def test_others():
    x = torch.randn(64, 128, requires_grad=True)
    w = torch.randn(64, 128)
    torch.testing.assert_close(my_twice(x), x * 2)
    y = my_untested(x, w)
    torch.testing.assert_close(y, x * w - 1)
    x.sum().backward()  # not the entry's output
    out = torch.empty(64, 128)
    my_scale_into(x, w, out)
    torch.testing.assert_close(out, x * w)
'''
# Liger-Kernel's layout: the Function in the package's ops, re-exported by ops/__init__.py and
# imported by the functional module, whose entry does more than forward to it.
LIGER_LIKE = {
    "src/lk/__init__.py": "",
    "src/lk/ops/__init__.py": "from lk.ops.norm import NormFunction  # noqa: F401\n",
    "src/lk/ops/norm.py": '''import torch


class NormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps):
        return x * w

    @staticmethod
    def backward(ctx, dy):
        return dy, None, None
''',
    "src/lk/functional.py": '''from lk.ops import NormFunction


def lk_norm(x, w, eps=1e-6):
    y = NormFunction.apply(x, w, eps)
    return y
''',
    "test/test_norm.py": '''import torch

from lk.functional import lk_norm


def test_norm():
    x, w = torch.randn(4, 8), torch.randn(8)
    torch.testing.assert_close(lk_norm(x, w), x * w)
''',
}


def _drafts(files: dict[str, str], rel: str) -> dict[str, Draft]:
    drafts, _ = python_drafts(RepoFiles.from_texts(files), rel, "flopwatch", set(), True, [])
    return {d.name: d for d in drafts}


def _text(d: Draft) -> str:
    return d.files["variant.toml"]


# -- modes ---------------------------------------------------------------------------------------------

def test_an_entry_calling_an_autograd_function_with_a_backward_is_drafted_in_every_pass():
    d = _drafts({"mypkg/__init__.py": "", "mypkg/ops.py": OPS, "tests/test_ops.py": TEST}, "mypkg/ops.py")
    assert tomllib.loads(_text(d["my_scale"]))["modes"] == ALL_PASSES
    assert ('modes = ["forward", "backward", "full"]  # it calls ScaleFunction.apply, an autograd Function with '
            "a backward (mypkg/ops.py:12)") in _text(d["my_scale"])


def test_a_test_differentiating_the_entry_s_output_drafts_every_pass():
    d = _drafts({"mypkg/__init__.py": "", "mypkg/ops.py": OPS, "tests/test_ops.py": TEST}, "mypkg/ops.py")
    assert tomllib.loads(_text(d["my_plain"]))["modes"] == ALL_PASSES
    assert "# tests/test_ops.py:17 calls backward() on its output" in _text(d["my_plain"])


@pytest.mark.parametrize("entry", ["my_twice", "my_untested", "my_scale_into"])
def test_forward_alone_without_a_backward_a_differentiated_output_or_a_returned_one(entry):
    """A Function without backward; a test that differentiates something else; an entry that
    writes into a buffer (no graph to differentiate, whatever it calls)."""
    d = _drafts({"mypkg/__init__.py": "", "mypkg/ops.py": OPS, "tests/test_ops.py": TEST}, "mypkg/ops.py")
    assert "modes" not in tomllib.loads(_text(d[entry])), _text(d[entry])


def test_a_function_of_another_module_of_the_package_is_found_as_liger_s_are():
    d = _drafts(LIGER_LIKE, "src/lk/functional.py")
    assert tomllib.loads(_text(d["lk_norm"]))["modes"] == ALL_PASSES
    assert "it calls NormFunction.apply, an autograd Function with a backward (src/lk/ops/norm.py:10)" in \
        _text(d["lk_norm"])


def test_what_derives_from_torch_s_autograd_function():
    """Directly, under any name the module imports it by, or through the repository's own base
    class in another module (Liger's chunked losses); not a `Function` of another library."""
    repo = RepoFiles.from_texts({
        "a.py": "import torch\nclass A(torch.autograd.Function):\n    def backward(ctx, dy):\n        return dy\n",
        "b.py": "from torch.autograd import Function as F\nclass B(F):\n    pass\n",
        "c.py": "import torch.autograd as ag\nclass C(ag.Function):\n    def backward(ctx, dy):\n        return dy\n",
        "d.py": "from mylib import Function\nclass D(Function):\n    def backward(ctx, dy):\n        return dy\n",
        "pkg/__init__.py": "",
        "pkg/base.py": "import torch\n\n\nclass Base(torch.autograd.Function):\n    def backward(ctx, dy):\n"
                       "        return dy\n",
        "pkg/loss.py": "from .base import Base\n\n\nclass LossFunction(Base):\n    pass\n",
        "pkg/functional.py": "from pkg.loss import LossFunction\n\n\ndef loss(x):\n    return LossFunction.apply(x)\n",
    })
    found = {name: autograd.function_named(repo, rel, name) for rel, name in
             (("a.py", "A"), ("b.py", "B"), ("c.py", "C"), ("d.py", "D"), ("pkg/functional.py", "LossFunction"))}
    assert {k: (f.file, f.backward) if f else None for k, f in found.items()} == {
        "A": ("a.py", "a.py:3"), "B": ("b.py", ""), "C": ("c.py", "c.py:3"), "D": None,
        "LossFunction": ("pkg/loss.py", "pkg/base.py:5")}


# -- launch-bound sizes --------------------------------------------------------------------------------

def _draft(text: str, folder: str = "flopwatch/k") -> Draft:
    return Draft("k", folder, {"variant.toml": text}, "", "")


RMS = '''name = "k"
op = "rms_norm"
backend = "triton"
dtypes = ["bf16"]
devices = ["cuda"]
shapes = {shapes}

[binding]
kind = "triton"
entry = "pkg.ops:k"
returns = true
'''


def test_a_draft_whose_largest_size_would_be_launch_bound_is_warned_about_by_that_size():
    tiny = launch_check.launch_bound([_draft(RMS.format(shapes="[[4, 8], [64, 256]]"))])
    w = tiny["flopwatch/k"]
    assert (w.shape, w.dtype, w.device) == ("M=64,N=256", "bf16", "H200")  # the largest; the fastest GPU of its kinds
    assert w.line().startswith("k: its largest timed size M=64,N=256 (bf16) would be launch-bound (the work takes at "
                               "least ")
    assert w.line().endswith("under 2x the 16 µs floor of the call path): its rows would time the call, not the "
                             "kernel; give larger sizes in `shapes` (flopwatch/k/variant.toml)")
    # this node's GPU where it has one of a kind the draft runs on
    assert launch_check.launch_bound([_draft(RMS.format(shapes="[[64, 256]]"))], ("cuda", "H100"))[
        "flopwatch/k"].device == "H100"
    assert launch_check.launch_bound([_draft(RMS.format(shapes="[[4, 8], [65536, 4096]]"))]) == {}


def test_no_warning_where_nothing_can_be_estimated():
    """A draft for the CPU alone (no launch floor is measured there), one that does not parse, one
    the manifest's schema refuses."""
    cpu = RMS.format(shapes="[[4, 8]]").replace('devices = ["cuda"]', 'devices = ["cpu"]')
    assert launch_check.launch_bound([_draft(cpu), _draft("not toml ["), _draft('name = "k"\n')]) == {}


REFERENCE = '''name = "k"
op = "k"
backend = "python"
dtypes = ["fp32"]
devices = ["cpu", "cuda"]
shapes = [{ N = 8 }]

[binding]
kind = "python"
entry = "../../ops.py:k"
returns = true

[reference]
call = "../../ops.py:k_ref"
sizes = { M = 4, N = 1024 }
inputs = [
  { name = "a", shape = ["M", "N"] },
  { name = "b", shape = ["M", "N"] },
]
'''


def test_a_reference_table_s_work_is_counted_from_its_inputs():
    w = launch_check.launch_bound([_draft(REFERENCE)])["flopwatch/k"]
    assert (w.shape, w.dtype) == ("M=4,N=8", "fp32")  # [reference] sizes fill what a shape leaves out
    assert "4 µs floor" in w.why  # plain torch: one launch's floor


# -- what `new` says ------------------------------------------------------------------------------------

USER_OPS = '''import torch


def fused_silu_mul(a, b):
    return torch.nn.functional.silu(a) * b
'''
# A benchmark script's sizes are taken as it writes them: here too small to time the kernel.
BENCH = '''import torch

from ops import fused_silu_mul

for n in (256, 512):
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    fused_silu_mul(a, b)
'''


def test_new_warns_of_a_launch_bound_draft_and_says_so_in_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(new_command, "local_gpu", lambda: None)  # the GPUs of its kinds, whatever this node has
    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "ops.py").write_text(USER_OPS)
    (repo / "benchmarks" / "bench_ops.py").write_text(BENCH)
    g = git.Repo.init(repo, initial_branch="main")
    g.index.add(["ops.py", "benchmarks/bench_ops.py"])
    g.index.commit("ops", author=git.Actor("Dev", "dev@example.com"))
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert tomllib.loads((repo / "flopwatch" / "fused_silu_mul" / "variant.toml").read_text())["shapes"] == \
        [[256, 256], [512, 512]]
    assert ("warning: fused_silu_mul: its largest timed size M=512,N=512 (fp32) would be launch-bound (the work "
            "takes at least 0.655 µs on NVIDIA H200 SXM (its roofs), under 2x the 4 µs floor of the call path): its "
            "rows would time the call, not the kernel; give larger sizes in `shapes` "
            "(flopwatch/fused_silu_mul/variant.toml)") in out, out
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build", "--force", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["drafts"]
    assert row["launch_bound"].startswith("fused_silu_mul: its largest timed size M=512,N=512 (fp32)")
