"""Torch extensions read from source text: setup.py CUDAExtension/CppExtension, load() and
load_inline() calls, their arguments evaluated statically, and the exact complaint (file, line,
argument) for what only running the file would tell."""

from __future__ import annotations

import json
import pickle

import pytest

from workers.torch_ext.spec import ExtensionReadError, ExtensionSpec, digest, find_extensions, select


def line_of(text: str, marker: str) -> int:
    """1-based line of the only line of `text` containing `marker`."""
    hits = [i for i, line in enumerate(text.splitlines(), 1) if marker in line]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def read_error(path: str, text: str, files: set[str]) -> ExtensionReadError:
    with pytest.raises(ExtensionReadError) as info:
        find_extensions(path, text, files)
    return info.value


BENCH = '''import math

import torch
from torch.utils.cpp_extension import load

minimal_attn = load(name="minimal_attn", sources=["main.cpp", "flash.cu"], extra_cuda_cflags=["-O2"])

q = torch.randn(16, 12, 64, 64).cuda()
'''
BENCH_FILES = {"bench.py", "main.cpp", "flash.cu", "README.md"}


def test_load_beside_its_sources():
    [spec] = find_extensions("bench.py", BENCH, BENCH_FILES)
    assert spec == ExtensionSpec(name="minimal_attn", module="minimal_attn", kind="load", origin="bench.py:6",
                                 sources=("main.cpp", "flash.cu"), extra_cuda_cflags=("-O2",))
    assert spec.cuda and spec.package_dir == "" and spec.with_cuda is None


def test_load_sources_from_the_files_folder_then_the_root():
    files = {"attn/bench.py", "attn/main.cpp", "flash.cu"}
    [spec] = find_extensions("attn/bench.py", BENCH, files)
    assert spec.sources == ("attn/main.cpp", "flash.cu")
    assert spec.origin == "attn/bench.py:6"


def test_load_through_a_module_alias_with_paths_from_file():
    text = '''import glob
import os
import torch.utils.cpp_extension as ce
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = os.path.join(os.path.dirname(os.path.realpath(__file__)), "kernels")
flags = ["-O3"]
flags += ["-lineinfo"]
flags.append(f"-DTILE={64}")


def build():
    cu = sorted(glob.glob(os.path.join(KERNELS, "*.cu")))
    return ce.load("tiled", [str(HERE / "bind.cpp")] + cu, extra_cflags=["-O2"], extra_cuda_cflags=flags,
                   extra_include_paths=[str(HERE.parent / "include"), "/usr/local/cuda/include"],
                   build_directory=os.environ["BUILD_DIR"], verbose=True, with_cuda=True)
'''
    files = {"ops/run.py", "ops/bind.cpp", "ops/kernels/b.cu", "ops/kernels/a.cu", "ops/kernels/notes.txt",
             "include/tile.cuh"}
    [spec] = find_extensions("ops/run.py", text, files)
    assert spec.sources == ("ops/bind.cpp", "ops/kernels/a.cu", "ops/kernels/b.cu")
    assert spec.extra_cflags == ("-O2",)
    assert spec.extra_cuda_cflags == ("-O3", "-lineinfo", "-DTILE=64")
    assert spec.include_dirs == ("include",)
    assert spec.with_cuda is True
    assert spec.notes == (
        "extra_include_paths: /usr/local/cuda/include dropped: outside the repository (torch adds its own and CUDA's)",
    )


def test_pathlib_globs_and_string_building():
    text = '''from pathlib import Path
from torch.utils.cpp_extension import load, load_inline

ROOT = Path(__file__).parent
TILE = 128
cuda_src = (f"#define TILE {TILE}\\n"
            "__global__ void k() {}")
ext = load(name="globbed", sources=sorted(ROOT.glob("k*.cu")) + [ROOT / "sub" / "bind.cpp"],
           extra_cflags=["-D" + "X=" + str(1)])
inline = load_inline("inl", "", cuda_src, functions={"k": "the kernel"})
'''
    files = {"a/run.py", "a/k2.cu", "a/k1.cu", "a/x.cu", "a/sub/bind.cpp"}
    ext, inline = find_extensions("a/run.py", text, files)
    assert ext.sources == ("a/k1.cu", "a/k2.cu", "a/sub/bind.cpp")
    assert ext.extra_cflags == ("-DX=1",)
    assert inline.cpp_sources == ("",) and inline.cuda_sources == ("#define TILE 128\n__global__ void k() {}",)
    assert inline.functions == ("k",)


KERNELBENCH = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
__global__ void f_kernel(const float* a, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * 2.0f;
}
torch::Tensor f(torch::Tensor a) {
    auto out = torch::empty_like(a);
    f_kernel<<<(a.numel() + 255) / 256, 256>>>(a.data_ptr<float>(), out.data_ptr<float>(), a.numel());
    return out;
}
"""
cpp_src = "torch::Tensor f(torch::Tensor a);"

x = load_inline(name="x", cpp_sources=cpp_src, cuda_sources=source, functions=["f"],
                extra_cuda_cflags=["--ptxas-options=-v"], verbose=True)


class ModelNew(nn.Module):
    def forward(self, a):
        return x.f(a)
'''
KERNELBENCH_SOURCE = KERNELBENCH.split('source = """', 1)[1].split('"""', 1)[0]


def test_load_inline_kernelbench_style():
    [spec] = find_extensions("solution.py", KERNELBENCH, {"solution.py"})
    assert spec == ExtensionSpec(name="x", module="x", kind="load_inline",
                                 origin=f"solution.py:{line_of(KERNELBENCH, 'x = load_inline(')}",
                                 cpp_sources=("torch::Tensor f(torch::Tensor a);",),
                                 cuda_sources=(KERNELBENCH_SOURCE,), functions=("f",),
                                 extra_cuda_cflags=("--ptxas-options=-v",))
    assert spec.cuda


def test_load_inline_positional_arguments():
    text = '''from torch.utils.cpp_extension import load_inline

decl_a = "torch::Tensor add(torch::Tensor a, torch::Tensor b);"
decl_b = "torch::Tensor scale(torch::Tensor a, double s);"
body = "\\n".join(["#include <torch/extension.h>", "// kernels here"])
ext = load_inline("add_ext", [decl_a, decl_b], body, None, {"add": "adds two tensors", "scale": "scales"},
                  ["-O3"], None, None, ["-lcublas"])
'''
    [spec] = find_extensions("sol.py", text, {"sol.py"})
    assert spec.name == "add_ext" and spec.origin == "sol.py:6"
    assert spec.cpp_sources == ("torch::Tensor add(torch::Tensor a, torch::Tensor b);",
                                "torch::Tensor scale(torch::Tensor a, double s);")
    assert spec.cuda_sources == ("#include <torch/extension.h>\n// kernels here",)
    assert spec.functions == ("add", "scale")
    assert spec.extra_cflags == ("-O3",) and spec.extra_cuda_cflags == () and spec.extra_ldflags == ("-lcublas",)


TWO_INLINE = '''from torch.utils.cpp_extension import load_inline

cpp = "torch::Tensor g(torch::Tensor a);"
first = load_inline(name="first", cpp_sources=cpp, functions="g")
second = load_inline(name="second", cpp_sources=cpp + "", functions=("g",), with_cuda=False,
                     is_python_module=False)
'''


def test_two_load_inline_calls_and_select():
    specs = find_extensions("two.py", TWO_INLINE, {"two.py"})
    assert [s.name for s in specs] == ["first", "second"]
    assert [s.origin for s in specs] == ["two.py:4", "two.py:5"]
    assert specs[1].with_cuda is False and specs[1].is_python_module is False and not specs[1].cuda
    assert select(specs, "second", "two.py") is specs[1]
    with pytest.raises(ExtensionReadError) as info:
        select(specs, None, "two.py")
    err = info.value
    assert (err.path, err.line, err.key) == ("two.py", 4, "name")
    assert str(err) == ("two.py:4: name: 2 torch extensions here: first (line 4), second (line 5); "
                        "name the one to build in [[extensions]] name of the variant")
    with pytest.raises(ExtensionReadError, match=r"^two\.py:4: name: no torch extension named 'third'"):
        select(specs, "third", "two.py")


def test_name_filter_skips_the_other_calls_arguments():
    text = TWO_INLINE.replace('cpp_sources=cpp + ""', "cpp_sources=make_decl()")
    with pytest.raises(ExtensionReadError) as info:
        find_extensions("two.py", text, {"two.py"})
    assert (info.value.line, info.value.key) == (5, "cpp_sources")
    [spec] = find_extensions("two.py", text, {"two.py"}, name="first")
    assert spec.name == "first"


SETUP = '''import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

this_dir = os.path.dirname(os.path.abspath(__file__))

setup(
    name="mypkg",
    packages=["mypkg"],
    package_dir={"": "src"},
    ext_modules=[
        CUDAExtension(
            "mypkg._C",
            sources=glob.glob("csrc/*.cu") + ["csrc/bind.cpp"],
            include_dirs=[os.path.join(this_dir, "csrc", "include")],
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", "--use_fast_math"]},
            define_macros=[("WITH_X", None)],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=os.environ.get("NINJA", "1") == "1")},
)
'''
SETUP_FILES = {"setup.py", "csrc/b.cu", "csrc/a.cu", "csrc/bind.cpp", "csrc/include/common.h",
               "src/mypkg/__init__.py"}


def test_setup_cuda_extension():
    [spec] = find_extensions("setup.py", SETUP, SETUP_FILES)
    assert spec == ExtensionSpec(
        name="_C", module="mypkg._C", kind="setup", origin=f"setup.py:{line_of(SETUP, 'CUDAExtension(')}",
        sources=("csrc/a.cu", "csrc/b.cu", "csrc/bind.cpp"),
        extra_cflags=("-DWITH_X", "-O3"), extra_cuda_cflags=("-DWITH_X", "-O3", "--use_fast_math"),
        include_dirs=("csrc/include",), with_cuda=True, package_dir="src")
    assert spec.cuda


def test_setup_in_a_subfolder_without_package_dir():
    files = {f"python/{f}" for f in SETUP_FILES}
    text = SETUP.replace('    package_dir={"": "src"},\n', "")
    [spec] = find_extensions("python/setup.py", text, files)
    assert spec.sources == ("python/csrc/a.cu", "python/csrc/b.cu", "python/csrc/bind.cpp")
    assert spec.include_dirs == ("python/csrc/include",)
    assert spec.package_dir == "python"


def test_spec_round_trips_through_json_and_digests_stably():
    [spec] = find_extensions("setup.py", SETUP, SETUP_FILES)
    back = ExtensionSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert back == spec and isinstance(back.sources, tuple) and isinstance(back.notes, tuple)
    assert digest(back) == digest(spec) and len(digest(spec)) == 64
    [other] = find_extensions("setup.py", SETUP.replace('"--use_fast_math"', '"-lineinfo"'), SETUP_FILES)
    assert digest(other) != digest(spec)


def test_cpp_extension_with_libraries():
    text = '''from setuptools import setup
from torch.utils import cpp_extension

setup(
    name="cpu_ops",
    ext_modules=[cpp_extension.CppExtension(
        name="cpu_ops",
        sources=["ops.cpp"],
        extra_compile_args=["-O3", "-fopenmp"],
        define_macros=[("BLOCK", "64")],
        libraries=["gomp"],
        library_dirs=["lib", "/opt/intel/lib"],
        extra_link_args=["-fopenmp"],
    )],
    cmdclass={"build_ext": cpp_extension.BuildExtension},
)
'''
    [spec] = find_extensions("setup.py", text, {"setup.py", "ops.cpp", "lib/libhelper.a"})
    assert spec == ExtensionSpec(
        name="cpu_ops", module="cpu_ops", kind="setup", origin="setup.py:6", sources=("ops.cpp",),
        extra_cflags=("-DBLOCK=64", "-O3", "-fopenmp"), extra_cuda_cflags=("-DBLOCK=64",),
        extra_ldflags=("-Llib", "-lgomp", "-fopenmp"), with_cuda=None,
        notes=("library_dirs: /opt/intel/lib dropped: outside the repository",))
    assert not spec.cuda


def test_setup_extensions_in_variables_ifs_and_functions():
    text = '''import torch
from setuptools import setup
from torch.utils.cpp_extension import *

ext_modules = []
if torch.cuda.is_available():
    ext_modules.append(CUDAExtension("a_cuda", ["a.cu"]))


def get_extensions():
    srcs = ["b.cpp"]
    srcs += ["b_kernel.cu"]
    if torch.version.hip:
        srcs.append("b_kernel.cu")  # hipified in place
        return [CUDAExtension(name="b_hip", sources=srcs)]
    return [CUDAExtension(name="b_cuda", sources=srcs)]


setup(name="ab", ext_modules=ext_modules + get_extensions())
'''
    specs = find_extensions("setup.py", text, {"setup.py", "a.cu", "b.cpp", "b_kernel.cu"})
    assert [(s.module, s.sources) for s in specs] == [
        ("a_cuda", ("a.cu",)),
        ("b_hip", ("b.cpp", "b_kernel.cu", "b_kernel.cu")),
        ("b_cuda", ("b.cpp", "b_kernel.cu")),
    ]
    assert specs == find_extensions("setup.py", text, frozenset({"setup.py", "a.cu", "b.cpp", "b_kernel.cu"}))


def test_shared_keyword_arguments_and_recursive_globs():
    text = '''import glob
from torch.utils.cpp_extension import CUDAExtension

common = dict(extra_compile_args={"nvcc": ["-O3"], "nvcc_dlink": ["-dlto"]}, dlink=True)
ext = CUDAExtension("m", glob.glob("csrc/**/*.cu", recursive=True), **common)
'''
    files = {"setup.py", "csrc/a.cu", "csrc/x/b.cu", "csrc/x/y/c.cu", "csrc/.cache/d.cu", "csrc/x/e.cpp"}
    [spec] = find_extensions("setup.py", text, files)
    assert spec.sources == ("csrc/a.cu", "csrc/x/b.cu", "csrc/x/y/c.cu")
    assert spec.extra_cflags == () and spec.extra_cuda_cflags == ("-O3",)
    assert spec.notes == ("extra_compile_args['nvcc_dlink'] dropped: flopwatch passes the cxx and nvcc flags",
                          "dlink (device linking) is not reproduced by flopwatch's build")


def test_no_extension_calls():
    assert find_extensions("util.py", "import torch\nx = torch.ones(3)\n", {"util.py"}) == []
    with pytest.raises(ExtensionReadError, match=r"^util\.py:1: name: no CUDAExtension"):
        select([], None, "util.py")


# --- what only running the file would tell ----------------------------------------------------


def test_sources_from_a_function_call():
    text = SETUP.replace('glob.glob("csrc/*.cu")', 'get_sources("csrc")')
    err = read_error("setup.py", text, SETUP_FILES)
    line = line_of(text, "get_sources(")
    assert (err.path, err.line, err.key) == ("setup.py", line, "sources")
    assert str(err) == (f"setup.py:{line}: sources: computed by get_sources(...), which flopwatch cannot read "
                        f"without running setup.py; describe the extension in the variant's [[extensions]] table "
                        "instead (name, sources, extra_cuda_cflags ...: docs/variants.md)")


def test_sources_from_a_list_comprehension_through_a_name():
    text = BENCH.replace("minimal_attn = load(", 'srcs = [f + ".cu" for f in ["flash"]]\nminimal_attn = load(')
    text = text.replace('sources=["main.cpp", "flash.cu"]', "sources=srcs")
    err = read_error("bench.py", text, BENCH_FILES)
    line = line_of(text, "minimal_attn = load(")
    assert (err.line, err.key) == (line, "sources")
    assert str(err).startswith(f"bench.py:{line}: sources: built by a comprehension "
                               f'([f + ".cu" for f in ["flash"]]) (through srcs at line {line - 1}), ')


def test_sources_from_an_environment_variable():
    text = BENCH.replace('"flash.cu"]', 'os.environ.get("KERNEL", "flash.cu")]').replace("import math", "import os")
    err = read_error("bench.py", text, BENCH_FILES)
    assert (err.line, err.key) == (6, "sources")
    assert str(err).startswith('bench.py:6: sources: read from the environment (os.environ.get("KERNEL", '
                               '"flash.cu")), which flopwatch cannot read without running bench.py')


def test_sources_imported_from_another_module():
    text = BENCH.replace("import load\n", "import load\nfrom kernels import SOURCES\n")
    text = text.replace('sources=["main.cpp", "flash.cu"]', "sources=SOURCES")
    err = read_error("bench.py", text, BENCH_FILES)
    assert (err.line, err.key) == (7, "sources")
    assert str(err) == ("bench.py:7: sources: SOURCES is imported from kernels (line 5), which flopwatch cannot "
                        "read without running bench.py; describe the extension in the variant's [[extensions]] table "
                        "instead (name, sources, extra_cuda_cflags ...: docs/variants.md)")


def test_flags_set_under_an_if():
    text = BENCH.replace("minimal_attn = load(",
                         'flags = ["-O2"]\nif torch.cuda.get_device_capability()[0] >= 9:\n'
                         '    flags = ["-O3"]\nminimal_attn = load(')
    text = text.replace('extra_cuda_cflags=["-O2"]', "extra_cuda_cflags=flags")
    err = read_error("bench.py", text, BENCH_FILES)
    line = line_of(text, "minimal_attn = load(")
    assert (err.line, err.key) == (line, "extra_cuda_cflags")
    assert f"flags is set under an if (line {line - 1})" in err.message


def test_extensions_named_by_a_loop_variable():
    text = '''from torch.utils.cpp_extension import CUDAExtension

ext_modules = []
for name in ["relu", "gelu"]:
    ext_modules.append(CUDAExtension(name, [f"csrc/{name}.cu"]))
'''
    err = read_error("setup.py", text, {"setup.py", "csrc/relu.cu", "csrc/gelu.cu"})
    assert (err.line, err.key) == (5, "name")
    assert err.message.startswith("name is the loop variable of line 4, which flopwatch cannot read")


def test_missing_source_file():
    err = read_error("bench.py", BENCH, BENCH_FILES - {"flash.cu"})
    assert (err.line, err.key) == (6, "sources")
    assert str(err) == "bench.py:6: sources: flash.cu is not a file of the repository (looked for flash.cu)"


def test_absolute_source_path():
    err = read_error("bench.py", BENCH.replace('"flash.cu"', '"/tmp/flash.cu"'), BENCH_FILES)
    assert (err.line, err.key) == (6, "sources")
    assert str(err) == ("bench.py:6: sources: /tmp/flash.cu is an absolute path; sources must be files of "
                        "the repository")


def test_source_path_escaping_the_repository():
    err = read_error("attn/bench.py", BENCH.replace('"flash.cu"', '"../../flash.cu"'),
                     {"attn/bench.py", "attn/main.cpp"})
    assert (err.path, err.line, err.key) == ("attn/bench.py", 6, "sources")
    assert err.message == "../../flash.cu leads out of the repository (from attn)"


def test_include_folder_escaping_the_repository():
    text = SETUP.replace('os.path.join(this_dir, "csrc", "include")', 'os.path.join(this_dir, "..", "include")')
    err = read_error("setup.py", text, SETUP_FILES)
    assert (err.line, err.key) == (line_of(text, "include_dirs="), "include_dirs")
    assert err.message == "../include leads out of the repository (from its root)"


def test_ignored_arguments_may_be_unreadable():
    text = BENCH.replace('extra_cuda_cflags=["-O2"]', 'extra_cuda_cflags=["-O2"], build_directory=tmp_dir(), '
                                                      "verbose=os.environ.get('V')")
    [spec] = find_extensions("bench.py", text, BENCH_FILES)
    assert spec.extra_cuda_cflags == ("-O2",)


def test_unknown_keyword_of_load():
    err = read_error("bench.py", BENCH.replace('extra_cuda_cflags=["-O2"]', 'extra_cuda_flags=["-O2"]'),
                     BENCH_FILES)
    assert (err.line, err.key, err.message) == (6, "extra_cuda_flags", "not a parameter of load()")


def test_syntax_error():
    err = read_error("bench.py", "from torch.utils.cpp_extension import load\nload(name=\n", BENCH_FILES)
    assert (err.path, err.key) == ("bench.py", "syntax")
    assert str(err).startswith(f"bench.py:{err.line}: syntax: ")


def test_error_pickles_with_its_attributes():
    err = pickle.loads(pickle.dumps(ExtensionReadError("setup.py", 14, "sources", "why")))
    assert (err.path, err.line, err.key, err.message, str(err)) == (
        "setup.py", 14, "sources", "why", "setup.py:14: sources: why")
