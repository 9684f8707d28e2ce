"""Drafts timed at the sizes that matter (issue 47, items 1, 2 and 4 on the drafting side).

- tests/sizes_repo/: a benchmark script computing its sizes as it runs is run under the recorder
  for the entries it reaches; each draft is timed at the sizes it recorded (several: one series
  each), says where they come from, and checks the test's own size at the test's tolerance;
  `scaled_silu` (2·x·σ(x)) is checked against its `scaled_silu_ref`, not the built-in silu its
  name suggests; a kernel right at its test's size and wrong at a recorded one is `incorrect`;
- a `triton.testing.Benchmark` sweep and a script's loop read from their text;
- without a benchmark, the test's sizes grown by the rule: working set ≥ 4 × the last-level
  cache, or FLOPs filling 100 µs at the peak, the dimensions the entry constrains kept;
- a built-in op as the peer where it agrees with the repository's reference, said as such;
- an extension function a drafted entry wraps is not drafted again; one that fits no op is
  drafted unchecked; a reference in a test module importing a test-only package is taken alone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import git
import pytest

from pipeline.onboarding.decide import scaling
from pipeline.onboarding.onboard import python_drafts
from pipeline.onboarding.source.repo import RepoFiles
from pipeline.project.config import load_config
from pipeline.project.discovery import find_ops
from pipeline.project.manifest import load_variant
from workers.ops import OPS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MiB = 1 << 20


def _new(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args, "--no-build", "--json"], cwd=repo,
                          capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "RAY_USAGE_STATS_ENABLED": "0"})


def _toml(repo: Path, name: str) -> dict:
    return tomllib.loads((repo / "flopwatch" / name / "variant.toml").read_text())


def _drafts(files: dict[str, str], rel: str, root: Path | None = None) -> tuple[dict, list]:
    repo = RepoFiles.from_texts(files, root=root)
    skipped: list = []
    drafts, _ = python_drafts(repo, rel, "flopwatch", set(), True, skipped)
    return {d.name: d for d in drafts}, skipped


def _m(draft) -> dict:
    return tomllib.loads(draft.files["variant.toml"])


# -- a benchmark script that computes its sizes as it runs ---------------------------------------


@pytest.fixture(scope="module")
def drafted(tmp_path_factory):
    root = tmp_path_factory.mktemp("sizes") / "repo"
    shutil.copytree(HERE / "sizes_repo", root)
    repo = git.Repo.init(root, initial_branch="main")
    repo.index.add([str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".git" not in p.parts])
    repo.index.commit("a package, its test and its benchmark", author=git.Actor("Dev", "dev@example.com"))
    proc = _new(root, "new", "src/toy_sizes/functional.py")
    assert proc.returncode == 0, proc.stderr
    return root, json.loads(proc.stdout), proc.stderr


def test_a_script_computing_its_sizes_as_it_runs_is_recorded_and_its_sizes_drafted(drafted):
    root, out, stderr = drafted
    # the probe (16 tokens), then every power of two from 64 to the budget's 4096: 4 kept, the largest among them
    m = _toml(root, "scaled_silu")
    assert m["shapes"] == [{"B": 1, "T": t, "H": 32} for t in (16, 128, 1024, 4096)]
    text = (root / "flopwatch" / "scaled_silu" / "variant.toml").read_text()
    assert "# sizes: benchmark/bench_scaled.py:19 and 1 more call(s) (recorded: the script computes its sizes as it runs)" \
        in text
    rows = {r["variant"]: r for r in out["drafts"]}
    assert rows["scaled_norm"]["sizes"] == "benchmark/bench_scaled.py:28 (recorded: the script computes its sizes as it runs)"
    assert "recording benchmark/bench_scaled.py (watching toy_sizes.functional:ScaledNormFunction, " \
           "toy_sizes.functional:ScaledSiLUFunction)" in stderr
    assert "benchmark/bench_scaled.py: swept after" in stderr  # stopped at its second mode, every size recorded


def test_the_tests_own_size_is_a_check_point_at_the_tests_tolerance(drafted):
    root, _, _ = drafted
    m = _toml(root, "scaled_silu")
    assert m["check"] == [{"shapes": [{"B": 2, "T": 4, "H": 8}], "rtol": 0.002}]  # the test's rtol=2e-3
    assert "tolerance" not in m  # the timed sizes: the dtype's tolerance
    assert _toml(root, "scaled_norm")["check"] == [{"shapes": [{"B": 2, "T": 4, "H": 8}]}]  # no rtol of its own
    # several timed sizes: one series each, the test's size a check point beside them
    config = load_config(root)
    ops, _ = find_ops(root, config.kernel_dirs)
    v = load_variant(root, root / "flopwatch" / "scaled_silu" / "variant.toml", config, ops)
    assert [s.key for s in v.shapes] == [f"B=1,T={t},H=32" for t in (16, 128, 1024, 4096)]
    assert [p["dims"] for p in v.check_points] == [{"B": 2, "T": 4, "H": 8}]


def test_scaled_silu_is_checked_against_its_own_reference_not_the_built_in_silu(drafted):
    root, out, _ = drafted
    m = _toml(root, "scaled_silu")
    assert m["op"] == "scaled_silu" and m["reference"]["call"] == "toy_sizes.functional:scaled_silu_ref"
    assert "peer" not in m["reference"]
    text = (root / "flopwatch" / "scaled_silu" / "variant.toml").read_text()
    assert "# not timed against the built-in silu: it disagrees with the reference on the test's inputs " \
           "(B=2, T=4, H=8, fp64 on the CPU: relative error 0.5)" in text
    assert {"entry": "scaled_silu_ref", "reason": "the check of scaled_silu (its [reference], by name)"} \
        in out["undrafted"]


@pytest.mark.slow
def test_a_kernel_right_at_the_tests_size_and_wrong_at_a_benchmark_size_is_incorrect(drafted):
    from pipeline.fleet import cluster
    from pipeline.run.progress import Progress
    from pipeline.run.runflow import RunOptions, Session, run_commit
    from pipeline.store import Store

    root, _, _ = drafted
    repo = git.Repo(root)
    repo.git.add("-A")
    repo.index.commit("drafts", author=git.Actor("Dev", "dev@example.com"))
    session = Session(Store(root.parent / "results.db"), root.parent, cluster.connect(None), Progress(enabled=False))
    try:
        outcome = run_commit(session, repo, "HEAD", RunOptions(only=("scaled_norm",), with_peer=False,
                                                               budget_s=0.2))
    finally:
        cluster.shutdown(session.cluster_info)
    rows = {r.shape: r for r in outcome.results if r.variant == "scaled_norm" and r.device.startswith("cpu")}
    # its "grid" covers 1000 rows: right at the test's 8 rows (its check point) and the recorded 64 and 256,
    # wrong at 1024 and 4096
    assert {k: r.status for k, r in rows.items()} == {"B=1,T=64,H=32": "ok", "B=1,T=256,H=32": "ok",
                                                      "B=1,T=1024,H=32": "incorrect",
                                                      "B=1,T=4096,H=32": "incorrect"}, rows
    assert "out.view(-1, last)[960:1024, 0:64]" in rows["B=1,T=1024,H=32"].diagnostic  # the rows past 1000


# -- sweeps read from the text -------------------------------------------------------------------

FUSED = '''import torch


def fused_softmax(x):
    return torch.softmax(x, dim=-1)
'''


def test_a_triton_benchmark_sweep_is_read_from_its_text():
    bench = '''import torch
import triton

from mypkg.ops import fused_softmax


@triton.testing.perf_report(
    triton.testing.Benchmark(
        x_names=["N"],
        x_vals=[128 * i for i in range(2, 100)],
        line_arg="provider",
        line_vals=["triton", "torch"],
        args={"M": 4096},
    ))
def benchmark(M, N, provider):
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    if provider == "torch":
        return triton.testing.do_bench(lambda: torch.softmax(x, axis=-1))
    return triton.testing.do_bench(lambda: fused_softmax(x))
'''
    files = {"mypkg/__init__.py": "", "mypkg/ops.py": FUSED, "benchmarks/bench_softmax.py": bench}
    drafts, _ = _drafts(files, "mypkg/ops.py")
    d = drafts["fused_softmax"]
    m = _m(d)
    # 98 points (N = 256 ... 12672 at M = 4096): four kept, spread by rank, the largest among them
    assert m["op"] == "softmax" and m["shapes"] == [[4096, 256], [4096, 4352], [4096, 8576], [4096, 12672]]
    assert m["dtypes"] == ["fp16"]
    assert d.sizes == "benchmarks/bench_softmax.py:19 (its triton.testing.Benchmark)"


def test_a_benchmark_scripts_sizes_are_read_from_its_loops():
    bench = '''import argparse
import torch

from mypkg.ops import fused_softmax

parser = argparse.ArgumentParser()
parser.add_argument("--hidden", type=int, default=4096)
args = parser.parse_args()
for rows in [1024, 8192]:
    x = torch.randn(rows, args.hidden)
    fused_softmax(x)
'''
    files = {"mypkg/__init__.py": "", "mypkg/ops.py": FUSED, "bench/run.py": bench}
    drafts, _ = _drafts(files, "mypkg/ops.py")
    assert _m(drafts["fused_softmax"])["shapes"] == [[1024, 4096], [8192, 4096]]
    assert drafts["fused_softmax"].sizes == "bench/run.py:11 (read from the script)"


# -- no benchmark: the test's sizes, scaled by the rule ------------------------------------------

ATTN = '''import torch


def window_attention(q, k, v):
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return torch.softmax(s, dim=-1) @ v


def window_attention_ref(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)
'''
ATTN_TEST = '''import pytest
import torch

from mypkg.attn import window_attention, window_attention_ref


@pytest.mark.parametrize("B, H, S, D", [(1, 2, 8, 64), (1, 2, 8, 128)])
def test_attention(B, H, S, D):
    q = torch.randn(B, H, S, D)
    k = torch.randn(B, H, S, D)
    v = torch.randn(B, H, S, D)
    torch.testing.assert_close(window_attention(q, k, v), window_attention_ref(q, k, v))
'''


def _bytes(sizes: dict, tensors: int, itemsize: int = 4) -> int:
    n = 1
    for v in sizes.values():
        n *= v
    return n * tensors * itemsize


def test_without_a_benchmark_the_tests_sizes_grow_to_four_times_the_last_level_cache():
    files = {"mypkg/__init__.py": "", "mypkg/attn.py": ATTN, "tests/test_attn.py": ATTN_TEST}
    drafts, _ = _drafts(files, "mypkg/attn.py")
    d = drafts["window_attention"]
    m = _m(d)
    (timed,) = m["shapes"]
    # batch and sequence grow, the smallest first; H (not varied, not token-like) and the head_dim D (varied
    # by the test, but the entry's to constrain) stay; q, k and v share B, H, S and D: they stay equal
    assert timed["H"] == 2 and timed["D"] == 64 and timed["B"] > 1 and timed["S"] > 8
    assert [r["shape"] for r in m["reference"]["inputs"]] == [["B", "H", "S", "D"]] * 3
    # plain torch runs on the CPU and CUDA GPUs: 4 × an H200's 60 MiB, the largest cache of the CUDA kinds
    goal = scaling.target(("cpu", "cuda"), "fp32")
    assert goal.bytes == 4 * 60 * MiB
    work = _bytes(timed, 4)  # q, k, v read, the output written
    assert goal.bytes <= work < 2 * goal.bytes
    assert m["check"] == [{"shapes": [{"B": 1, "H": 2, "S": 8, "D": 64}]}]
    assert d.sizes.startswith("scaled from tests/test_attn.py:12: grew B, S (batch- or token-like); "
                              "working set 256 MiB ≥ 4 × the 60 MiB last-level cache of an H200")


def test_a_flop_bound_op_grows_until_it_fills_100_us_at_the_peak():
    goal = scaling.target(("cuda",), "bf16")
    assert goal.flops == pytest.approx(100e-6 * 989.4e12)
    shape, why, stop = scaling.scaled_builtin(OPS["gemm"], [64, 4096, 4096], "bf16", goal)
    assert shape == [4096, 4096, 4096] and why == "grew M (batch- or token-like)"  # N and K kept
    assert stop == "1.37e+11 FLOPs ≥ 100 µs at the peak of an H200"
    assert OPS["gemm"].bytes_moved(dict(zip("MNK", shape)), 2) < goal.bytes  # the FLOPs reached it first


def test_the_target_is_the_largest_cache_among_the_kinds_a_draft_runs_on():
    assert scaling.target(("cuda", "rocm"), "bf16").bytes == 4 * 256 * MiB  # a Triton draft: an MI300X's
    assert scaling.target(("cuda",), "bf16", local=("cuda", "H100")).bytes == 4 * 50 * MiB  # this node's GPU
    assert scaling.target(("cpu", "cuda"), "fp32").cap == scaling.CPU_CAP


# -- references and peers ------------------------------------------------------------------------

SILU_MUL = '''import torch


def fused_silu_mul(a, b):
    return torch.nn.functional.silu(a) * b


def fused_silu_mul_ref(a, b):
    return a * torch.sigmoid(a) * b
'''
SILU_MUL_TEST = '''import torch

from mypkg.ops import fused_silu_mul, fused_silu_mul_ref


def test_it():
    a = torch.randn(4, 16)
    b = torch.randn(4, 16)
    torch.testing.assert_close(fused_silu_mul(a, b), fused_silu_mul_ref(a, b))
'''


def test_a_built_in_op_is_the_peer_where_it_agrees_with_the_repositorys_reference(tmp_path):
    files = {"mypkg/__init__.py": "", "mypkg/ops.py": SILU_MUL, "tests/test_ops.py": SILU_MUL_TEST}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    drafts, skipped = _drafts(files, "mypkg/ops.py", root=tmp_path)
    d = drafts["fused_silu_mul"]
    m = _m(d)
    assert m["reference"]["call"] == "mypkg.ops:fused_silu_mul_ref"  # the check: the repository's own
    assert m["reference"]["peer"] == {"op": "swiglu", "inputs": {"a": "A", "b": "B"}} and d.peer == "swiglu"
    assert "# timed as its peer: agrees with the reference on the test's inputs" in d.files["variant.toml"]
    # the not-drafted line says which is the check and which the peer
    assert {s.entry: s.reason for s in skipped}["fused_silu_mul_ref"] == \
        "the check of fused_silu_mul (its [reference], by name); the built-in op swiglu is fused_silu_mul's peer"


def test_a_reference_in_a_test_module_needing_a_test_only_package_is_taken_alone():
    test = '''import torch
from torch.testing._internal.common_utils import TestCase, make_tensor

import extpkg


def reference_myscale(a, b, c):
    return a * b + c


def reference_myneedy(a):
    return make_tensor(a.shape, dtype=a.dtype, device="cpu") * 0 + a


class TestScale(TestCase):
    def test_it(self):
        a, b = torch.randn(20), torch.randn(20)
        torch.testing.assert_close(extpkg.ops.myscale(a, b, 3.0), reference_myscale(a, b, 3.0))
'''
    ops = "import torch\n\n\ndef myscale(a, b, c):\n    return a * b + c\n\n\ndef myneedy(a):\n    return a\n"
    files = {"extpkg/__init__.py": "from . import ops\n", "extpkg/ops.py": ops, "test/test_extension.py": test}
    drafts, _ = _drafts(files, "extpkg/ops.py")
    d = drafts["myscale"]
    m = _m(d)
    assert m["reference"]["call"] == "reference.py:reference_myscale"
    assert d.files["reference.py"].endswith("\n\ndef reference_myscale(a, b, c):\n    return a * b + c\n")
    assert "\nimport" not in d.files["reference.py"]  # nothing of the test module's imports: it needs none
    needy = drafts["myneedy"]
    assert _m(needy)["reference"]["call"] == "../../test/test_extension.py:reference_myneedy"
    assert "reference.py" not in needy.files
    assert any("test-only package expecttest" in t for t in needy.todo)
    assert "# needs the test-only package expecttest: pip install expecttest" in needy.files["variant.toml"]


# -- extension functions -------------------------------------------------------------------------

SETUP = '''from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(name="convpkg", ext_modules=[CppExtension("conv_ext", sources=["csrc/conv.cpp"])],
      cmdclass={"build_ext": BuildExtension})
'''
CONV_CPP = '''#include <torch/extension.h>

torch::Tensor conv_fwd(torch::Tensor x, torch::Tensor w) { return x * w; }

torch::Tensor frobnicate(torch::Tensor a, int64_t k, double s) { return a * s + k; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("conv_fwd", &conv_fwd, "the conv");
  m.def("frobnicate", &frobnicate, "something of its own");
}
'''
INTERFACE = '''import torch

import conv_ext


class ConvFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        return conv_ext.conv_fwd(x, w)


def conv_fn(x, w):
    return ConvFn.apply(x, w)


def conv_ref(x, w):
    return x * w
'''


@pytest.fixture
def conv_repo(tmp_path):
    files = {"setup.py": SETUP, "csrc/conv.cpp": CONV_CPP, "convpkg/__init__.py": "",
             "convpkg/interface.py": INTERFACE}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    proc = _new(tmp_path, "init", "--no-workflow")
    assert proc.stdout.strip(), proc.stderr
    return tmp_path, json.loads(proc.stdout)


def test_an_extension_function_a_drafted_entry_wraps_is_not_drafted_again(conv_repo):
    _, out = conv_repo
    drafted = {d["variant"] for d in out["drafts"]}
    assert "conv_fn" in drafted and not any("conv_fwd" in name for name in drafted)
    assert any(n.startswith("conv_ext.conv_fwd: called by the drafted entries' package (convpkg/interface.py:9)")
               for n in out["notes"]), out["notes"]


def test_a_signature_that_fits_no_op_is_drafted_unchecked_not_guessed(conv_repo):
    root, out = conv_repo
    (row,) = [d for d in out["drafts"] if d["variant"] == "conv_ext_frobnicate"]
    m = _toml(root, "conv_ext_frobnicate")
    assert m["op"] == "conv_ext_frobnicate" and m["op"] not in OPS  # an op of its own: no gemm guessed
    assert m["reference"]["check"] == "none" and row["reference"] == "none found — measured as unchecked"
    assert [i["name"] for i in m["reference"]["inputs"]] == ["a", "k", "s"]
    config = load_config(root)
    ops, _ = find_ops(root, config.kernel_dirs)
    load_variant(root, root / "flopwatch" / "conv_ext_frobnicate" / "variant.toml", config, ops)  # a manifest that loads


def test_a_repository_ops_named_token_sizes_grow_alone_and_a_bias_keeps_its_length():
    """liger_mhc_coeffs' test: x [B, T, HC, C], phi [N, M], b [M], the test varying HC and C. On an
    H100, HC and C grown with N (= HC·C) left behind broke the reference's matmul, and M (the
    bias's one axis) grew too: only the batch- and token-like B and T grow."""
    from pipeline.onboarding.source.records import InputRow

    rows = [InputRow("x", ("B", "T", "HC", "C")), InputRow("phi", ("N", "M")), InputRow("b", ("M",), "fp32")]
    test = {"B": 2, "T": 4, "HC": 2, "C": 32, "N": 64, "M": 8}
    goal = scaling.Target(bytes=256 << 20, flops=0.0, device="H100", cache=50 << 20)
    grown, why, _ = scaling.scaled_reference(rows, test, "fp16", goal, named=set(test), varied={"HC", "C"})
    assert {k: v for k, v in grown.items() if k not in ("B", "T")} == {"HC": 2, "C": 32, "N": 64, "M": 8}
    assert grown["B"] * grown["T"] > 1000 and why == "grew B, T (batch- or token-like)"
    # a test naming no batch-like size still grows what it varies
    grown, why, _ = scaling.scaled_reference([InputRow("x", ("R", "W"))], {"R": 4, "W": 8}, "fp32", goal,
                                             named={"R", "W"}, varied={"W"})
    assert grown["R"] == 4 and grown["W"] > 8 and why == "grew W (the test varies it)"
    # every input 1-D: the one axis is the data's length
    grown, _, _ = scaling.scaled_reference([InputRow("x", ("Q",)), InputRow("y", ("Q",))], {"Q": 8}, "fp32", goal,
                                           named={"Q"})
    assert grown["Q"] > 8


def test_a_fused_linear_loss_is_grown_within_what_its_logits_hold():
    """fused_linear_jsd at Liger's test size (H = 4) grown on its inputs alone reached M = 131072,
    V = 65536 and asked an H100 for 64 GiB at once: its peak (both heads' [M, V] logits) is held
    to the per-call bound."""
    goal = scaling.Target(bytes=1 << 30, flops=1.3e11, device="MI300X", cache=256 << 20)
    for name, test in (("fused_linear_jsd", [8, 4, 64]), ("fused_linear_cross_entropy", [4, 8, 8])):
        module = OPS[name]
        shape, _, stop = scaling.scaled_builtin(module, test, "bf16", goal, {"H": ["H"], "V": ["V"]})
        dims = dict(zip(module.DIMS, shape))
        assert module.peak_bytes(dims, 2) <= scaling.MAX_WORKING_SET, (name, shape, stop)
        assert shape != test
    assert scaling.scaled_builtin(OPS["fused_linear_jsd"], [8, 4, 64], "bf16", goal, {"V": ["V"]})[2].endswith(
        "at flopwatch's bound of 4096 MiB per call")
