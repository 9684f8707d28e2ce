"""Torch extensions as PyTorch's custom-op tutorial (pytorch/extension-cpp) writes them, on the
CPU: a setup.py that picks `CUDAExtension if use_cuda else CppExtension` and globs its sources
(recorded by running it in a sandboxed child), operators registered with TORCH_LIBRARY /
TORCH_LIBRARY_IMPL in a library the package loads with `from . import _C, ops`, wrapped in
ops.py. The fixture repository is written here, in that shape, with an op of its own
(`scalelib::myscale(Tensor a, float s) -> Tensor`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import git
import pytest

from pipeline.fleet import cluster
from pipeline.onboarding.conventions.torch_library import parse_schema
from pipeline.onboarding.decide.ops import builtin_for_operator
from pipeline.onboarding.onboard import plan_files
from pipeline.onboarding.source.records import LibraryOp, SchemaArg
from pipeline.onboarding.source.repo import RepoFiles
from pipeline.project.config import load_config
from pipeline.project.discovery import discover
from pipeline.project.manifest import load_variant, repository_files
from pipeline.run.progress import Progress
from pipeline.run.runflow import RunOptions, Session, run_commit
from pipeline.store import Store
from workers.backends.base import Toolchain
from workers.backends.torch_ext import cpu_part
from workers.core.records import Binding, Variant
from workers.torch_ext import setup_run

SETUP = """\
import glob
import os

import torch
from setuptools import find_packages, setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension


def get_extensions():
    use_cuda = os.getenv("USE_CUDA", "1") == "1" and torch.cuda.is_available() and CUDA_HOME is not None
    extension = CUDAExtension if use_cuda else CppExtension
    here = os.path.join("scalelib", "csrc")
    sources = list(glob.glob(os.path.join(here, "*.cpp")))
    if use_cuda:
        sources += list(glob.glob(os.path.join(here, "cuda", "*.cu")))
    return [extension("scalelib._C", sources, extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O3"]})]


setup(name="scalelib", packages=find_packages(), ext_modules=get_extensions(),
      cmdclass={"build_ext": BuildExtension})
"""

# ATen where the tutorial's muladd.cpp has <torch/all.h> (all of the C++ frontend): the operators
# and their registration are the same, at half the compile.
CPP = """\
#include <Python.h>
#include <ATen/ATen.h>
#include <torch/library.h>

extern "C" {
  // an empty module: importing it loads the library, whose TORCH_LIBRARY blocks register the ops
  PyObject* PyInit__C(void) {
    static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};
    return PyModule_Create(&def);
  }
}

namespace scalelib {

at::Tensor myscale_cpu(const at::Tensor& a, double s) {
  at::Tensor x = a.contiguous();
  at::Tensor out = at::empty_like(x);
  const float* p = x.data_ptr<float>();
  float* q = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); i++) q[i] = p[i] * s;
  return out;
}

void myscale_out_cpu(const at::Tensor& a, double s, at::Tensor& out) {
  const float* p = a.data_ptr<float>();
  float* q = out.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); i++) q[i] = p[i] * s;
}

TORCH_LIBRARY(scalelib, m) {
  m.def("myscale(Tensor a, float s) -> Tensor");
  m.def("myscale_out(Tensor a, float s, Tensor(a!) out) -> ()");
}

TORCH_LIBRARY_IMPL(scalelib, CPU, m) {
  m.impl("myscale", &myscale_cpu);
  m.impl("myscale_out", &myscale_out_cpu);
}

}
"""

CU = """\
#include <torch/all.h>
#include <torch/library.h>

namespace scalelib {
__global__ void scale_kernel(int n, const float* a, float s, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * s;
}

at::Tensor myscale_cuda(const at::Tensor& a, double s) {
  at::Tensor out = torch::empty_like(a);
  scale_kernel<<<(a.numel() + 255) / 256, 256>>>(a.numel(), a.data_ptr<float>(), s, out.data_ptr<float>());
  return out;
}

TORCH_LIBRARY_IMPL(scalelib, CUDA, m) { m.impl("myscale", &myscale_cuda); }
}
"""

OPS = """\
import torch
from torch import Tensor


def myscale(a: Tensor, s: float) -> Tensor:
    return torch.ops.scalelib.myscale.default(a, s)


def myscale_out(a: Tensor, s: float, out: Tensor) -> None:
    torch.ops.scalelib.myscale_out.default(a, s, out)
"""

# The op for the variants of this test (a `[reference]` table would name the test's reference).
OP = """\
import torch

INPUTS = ("a",)
OUTPUT = "out"
DIMS = ("N",)
SCALARS = ("s",)
TOLERANCE = {"fp32": (1e-6, 1e-5)}
PEER_NAME = "torch.mul"


def scalars(dims):
    return {"s": 1.5}


def flops(dims):
    return float(dims["N"])


def bytes_moved(dims, itemsize):
    return float(2 * itemsize * dims["N"])


def output_shape(dims):
    return (dims["N"],)


def make_inputs(dims, dtype, layout, device, generator):
    return {"a": torch.randn((dims["N"],), generator=generator, device=generator.device).to(dtype=dtype, device=device)}


def reference(inputs, layout, alpha=1.0, beta=0.0, c_init=None):
    return inputs["a"].double() * 1.5


def peer(inputs, out, layout, alpha=1.0, beta=0.0):
    torch.mul(inputs["a"], 1.5, out=out)
"""


def _variant(name: str, entry: str, extensions: str = 'from = "../../../setup.py"') -> str:
    return textwrap.dedent(f"""\
        name = "{name}"
        op = "myscale"
        backend = "torch"
        dtypes = ["fp32"]
        devices = ["cpu"]
        shapes = [[4096]]

        [binding]
        kind = "python"
        entry = "{entry}"
        returns = true

        [[extensions]]
        """) + extensions + "\n"


def write_repo(root: Path) -> Path:
    files = {
        "setup.py": SETUP,
        "scalelib/__init__.py": "import torch\nfrom . import _C, ops\n",
        "scalelib/ops.py": OPS,
        "scalelib/csrc/myscale.cpp": CPP,
        "scalelib/csrc/cuda/myscale.cu": CU,
        "test/test_scalelib.py": "def reference_scale(a, s):\n    return a * s\n",
        "flopwatch.toml": '[defaults]\ntiming_budget_s = 0.1\n',
        "kernels/myscale/op.py": OP,
        "kernels/myscale/ext/variant.toml": _variant("myscale_ext", "scalelib.ops:myscale"),
        # a package that lies nowhere under the import roots: invalid at planning, never a crash
        "kernels/myscale/lost/variant.toml": _variant("myscale_lost", "scalelib_lost.ops:myscale"),
        "elsewhere/lib/scalelib_lost/__init__.py": "",
        "elsewhere/lib/scalelib_lost/ops.py": OPS,
        # an operator of a namespace nothing registers
        "kernels/myscale/unregistered/variant.toml": _variant("myscale_unregistered", "torch.ops.nolib.myscale"),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture(scope="module")
def scalelib(tmp_path_factory) -> Path:
    return write_repo(tmp_path_factory.mktemp("scalelib"))


def test_the_setup_py_is_run_with_the_gpu_condition_true(scalelib):
    files = repository_files(scalelib)
    (spec,) = setup_run.read_extensions("setup.py", (scalelib / "setup.py").read_text(), scalelib, files)
    assert (spec.module, spec.name, spec.kind) == ("scalelib._C", "_C", "setup")
    # as pip install on a GPU node sees it: the CUDAExtension branch, the .cu globbed in
    assert spec.with_cuda and spec.cuda
    assert spec.sources == ("scalelib/csrc/myscale.cpp", "scalelib/csrc/cuda/myscale.cu")
    assert spec.extra_cflags == ("-O2",) and spec.extra_cuda_cflags == ("-O3",)
    assert spec.origin == "setup.py:16" and spec.package_dir == ""
    # on a node whose torch is CPU-only, a variant that runs on the CPU builds the C++ sources
    # (the CppExtension branch): the CPU op
    variant = Variant(name="v", op="myscale", backend="torch", folder="k", sources=(),
                      binding=Binding(kind="python", entry="scalelib.ops:myscale"), dtypes=("fp32",), shapes=(),
                      devices=("cpu",))
    cpu = Toolchain("torch", "c++", "torch 2 cpu ninja", {"cuda": None, "hip": None})
    (built,), note = cpu_part([spec.to_dict()], variant, cpu)
    assert built["sources"] == ["scalelib/csrc/myscale.cpp"] and built["with_cuda"] is False
    assert "without ['scalelib/csrc/cuda/myscale.cu']" in note


def test_a_setup_py_that_fails_when_run_is_invalid_with_its_last_line(tmp_path):
    (tmp_path / "setup.py").write_text(
        "from torch.utils.cpp_extension import CppExtension\n"
        "from setuptools import setup\n"
        "def exts():\n    raise RuntimeError('set MY_SDK to the SDK folder')\n"
        "setup(name='x', ext_modules=[e for e in exts()])\n")
    with pytest.raises(setup_run.SetupRunError, match="RuntimeError: set MY_SDK to the SDK folder"):
        setup_run.read_extensions("setup.py", (tmp_path / "setup.py").read_text(), tmp_path, {"setup.py"})


def test_the_records_become_the_specs_the_static_read_makes():
    record = {"extensions": [{"name": "pkg._ext", "class": "CppExtension", "line": 7,
                              "sources": ["csrc/a.cpp", "@/third/b.cpp"], "include_dirs": ["/usr/include", "inc"],
                              "define_macros": [["FAST", None], ["N", "4"]], "libraries": ["m"],
                              "extra_compile_args": ["-O3"], "extra_link_args": ["-s"]}],
              "package_dir": {"": "src"}}
    (spec,) = setup_run.specs_from_record(record, "sub/setup.py")
    assert spec.sources == ("sub/csrc/a.cpp", "third/b.cpp") and spec.include_dirs == ("sub/inc",)
    assert spec.extra_cflags == ("-DFAST", "-DN=4", "-O3") and spec.extra_ldflags == ("-lm", "-s")
    assert spec.with_cuda is None and spec.package_dir == "sub/src" and spec.origin == "sub/setup.py:7"


def test_schema_strings_are_parsed():
    assert parse_schema("myadd_out(Tensor a, Tensor b, Tensor(a!) out) -> ()") == (
        "myadd_out", (SchemaArg("a", "Tensor"), SchemaArg("b", "Tensor"),
                      SchemaArg("out", "Tensor(a!)")), "()")
    name, args, returns = parse_schema("f.vec(Tensor x, int[] dims, *, float eps=1e-5) -> Tensor")
    assert name == "f" and [(a.name, a.type) for a in args] == [("x", "Tensor"), ("dims", "int[]"), ("eps", "float")]
    assert parse_schema("bare_name") is None


def test_an_operator_named_and_shaped_as_a_built_in_op_is_checked_against_it():
    def op(schema: str) -> LibraryOp:
        name, args, returns = parse_schema(schema)
        return LibraryOp("extension_cpp", name, args, returns, "muladd.cpp:1", ("cpu",))

    builtin = builtin_for_operator
    assert builtin(op("mymul(Tensor a, Tensor b) -> Tensor"), True) == "elementwise_mul"  # extension-cpp's mymul
    assert builtin(op("myadd(Tensor a, Tensor b) -> Tensor"), True) == "elementwise_add"
    assert builtin(op("mymul(Tensor a, Tensor b, float c) -> Tensor"), True) == ""  # a scalar mul has not
    assert builtin(op("mymuladd(Tensor a, Tensor b, float c) -> Tensor"), True) == ""  # no such op
    assert builtin(op("mymul_out(Tensor a, Tensor b, Tensor(a!) out) -> ()"), False) == ""  # writes, returns nothing


def test_an_operator_both_setup_py_and_its_wrappers_module_give_is_drafted_once(scalelib):
    """`init` reads the setup.py (its operators, called through the package's wrappers) and the
    package's ops.py (the same wrappers as public functions): one draft per entry, told apart by
    the drafts' `entry` field, not by their text."""
    plan = plan_files(RepoFiles.at(scalelib, "flopwatch"), [], ["setup.py", "scalelib/ops.py"])
    assert sorted(d.name for d in plan.drafts) == ["myscale", "myscale_out"]
    assert sorted(d.entry for d in plan.drafts) == ["scalelib.ops:myscale", "scalelib.ops:myscale_out"]


def test_drafts_one_variant_per_registered_operator(scalelib):
    plan = plan_files(RepoFiles.at(scalelib, "flopwatch"), [], ["setup.py"])
    drafts = {d.name: d.files["variant.toml"] for d in plan.drafts}
    assert sorted(drafts) == ["myscale", "myscale_out"]
    scale = drafts["myscale"]
    assert 'entry = "scalelib.ops:myscale"' in scale and "returns = true" in scale
    assert 'devices = ["cpu", "cuda"]' in scale  # a CPU and a CUDA TORCH_LIBRARY_IMPL
    assert 'call = "../../test/test_scalelib.py:reference_scale"' in scale and 'found = "convention"' in scale
    assert '{ name = "a", shape = ["N"] }' in scale and '{ name = "s", value = 0.5 }' in scale
    assert 'from = "../../setup.py"' in scale and 'name = "scalelib._C"' in scale
    out = drafts["myscale_out"]
    assert 'devices = ["cpu"]' in out and "returns" not in out.split("[binding]")[1].split("[reference]")[0]
    assert '{ name = "out", shape = ["N"], output = true }' in out and 'check = "none"' in out
    # the same drafts from the module that wraps the ops; the raw kernel of the .cu is no draft
    again = plan_files(RepoFiles.at(scalelib, "flopwatch"), [], ["scalelib/ops.py"])
    assert sorted(d.name for d in again.drafts) == ["myscale", "myscale_out"]
    # each draft is a manifest that loads as written ([reference] op, the setup.py run)
    for d in plan.drafts:
        (scalelib / d.folder).mkdir(parents=True, exist_ok=True)
        (scalelib / d.folder / "variant.toml").write_text(d.files["variant.toml"])
        variant = load_variant(scalelib, scalelib / d.folder / "variant.toml", load_config(scalelib))
        assert variant.extensions[0]["module"] == "scalelib._C" and variant.devices[0] == "cpu"


def test_an_entry_that_cannot_be_imported_is_invalid_when_planned(scalelib):
    valid, invalid = discover(scalelib, load_config(scalelib))
    assert [v.name for v in valid] == ["myscale_ext"]
    assert valid[0].extensions[0]["with_cuda"] and "scalelib" in valid[0].extra_files  # the package is shipped
    errors = {i.folder: i.error for i in invalid}
    lost = errors["kernels/myscale/lost"]
    assert "scalelib_lost.ops cannot be imported" in lost
    assert "add the folder holding package scalelib_lost (elsewhere/lib) to include_dirs in flopwatch.toml" in lost
    assert "nothing of the variant registers namespace 'nolib'" in errors["kernels/myscale/unregistered"]


@pytest.mark.slow
@pytest.mark.timeout(900)  # a local Ray and a torch extension compiled on the 2-core CI machine
def test_the_cpu_op_runs_end_to_end(tmp_path_factory):
    root = write_repo(tmp_path_factory.mktemp("scalelib_run"))
    repo = git.Repo.init(root, initial_branch="main")
    repo.index.add([str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".git" not in p.parts])
    repo.index.commit("scalelib", author=git.Actor("Dev", "dev@example.com"))
    session = Session(Store(root.parent / "results.db"), root.parent, cluster.connect(None), Progress(enabled=False))
    try:
        outcome = run_commit(session, repo, "HEAD", RunOptions())
    finally:
        cluster.shutdown(session.cluster_info)
    rows = {r.variant: r for r in outcome.results if not r.peer}
    ext = rows["myscale_ext"]
    # the package's `from . import _C` found the prebuilt library; TORCH_LIBRARY registered the op
    assert ext.status == "ok", ext.diagnostic
    assert ext.toolchain.startswith("torch:torch ") and ext.correctness  # built by torch, checked against op.py
    lost = rows["lost"]  # an invalid manifest is named by its folder
    assert lost.status == "invalid" and "include_dirs in flopwatch.toml" in lost.diagnostic
