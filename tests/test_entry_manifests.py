"""The manifest keys of entries as the PyTorch world writes them, checked without running
anything: `binding.returns` / `args` / `kwargs`, `[problem]`, `[[extensions]]`, the `torch`
back end, one name per back end for the launch's dynamic shared memory, files that lead up into
the repository; the problem file read statically; what Triton's JIT recorded, as resources."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.project.config import ProjectConfig
from pipeline.project.discovery import discover
from pipeline.project.manifest import ManifestError, load_variant
from workers.bindings.python_entry import entry_parts, repo_path
from workers.job import triton_jit
from workers.ops.problem import parse_problem
from workers.ops.repo import OpDefinitionError

PROBLEM = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, A, B):
        return A @ B

N = 1024 * 2
M = N // 4
scale = 0.5

def get_inputs():
    return [torch.randn(M, N), torch.randn(N, M)]
'''


def _write(root: Path, folder: str, text: str, files: dict[str, str] | None = None) -> Path:
    for rel, content in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    path = root / folder / "variant.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


FUNCTIONAL = '''name = "f"
op = "rms_norm"
backend = "python"
dtypes = ["fp32"]
shapes = [[8, 64]]
[binding]
kind = "python"
entry = "../../lib/f.py:rms"
returns = true
'''


def test_a_functional_entry_outside_its_folder_is_shipped(tmp_path):
    v = load_variant(tmp_path, _write(tmp_path, "kernels/f", FUNCTIONAL, {"lib/f.py": "def rms(X, W, eps): ..."}),
                     ProjectConfig())
    assert v.binding.returns and v.extra_files == ("lib/f.py",) and v.sources == ()


@pytest.mark.parametrize("change, key, words", [
    (('entry = "../../lib/f.py:rms"', 'entry = "../../../x.py:rms"'), "binding.entry", "outside the repository"),
    (('entry = "../../lib/f.py:rms"', 'entry = "../../lib/none.py:rms"'), "binding.entry", "does not exist"),
    (('entry = "../../lib/f.py:rms"', 'entry = "rms"'), "binding.entry", "expected \"file.py:name\""),
    (("returns = true", 'args = ["X", "W", "Y"]\nreturns = true'), "binding.args", "Y is returned, not passed"),
    (("returns = true", 'kwargs = { mode = [1] }'), "binding.kwargs.mode", "a number, a boolean or a string"),
    (('returns = true', 'returns = true\n[problem]\nfile = "../../lib/f.py"'), "op",
     "'rms_norm' is a built-in op; a [problem] variant names its problem's own op"),
])
def test_bad_functional_entries_name_the_key(tmp_path, change, key, words):
    """Each mistake is one line naming the key (the last: a problem named like a built-in op)."""
    path = _write(tmp_path, "kernels/f", FUNCTIONAL.replace(*change), {"lib/f.py": "def rms(X, W, eps): ..."})
    with pytest.raises(ManifestError) as err:
        load_variant(tmp_path, path, ProjectConfig())
    assert err.value.key == key and words in str(err.value), str(err.value)


def test_a_problem_file_without_a_model_is_named(tmp_path):
    text = FUNCTIONAL.replace('op = "rms_norm"', 'op = "p"') + '[problem]\nfile = "../../lib/f.py"\n'
    with pytest.raises(ManifestError) as err:
        load_variant(tmp_path, _write(tmp_path, "kernels/f", text, {"lib/f.py": "def rms(X, W, eps): ..."}),
                     ProjectConfig())
    assert str(err.value) == ("kernels/f/variant.toml: problem.file: lib/f.py: Model: missing: a problem file "
                              "defines class Model(nn.Module), the reference computation")


RAW = '''name = "r"
op = "gemm"
backend = "{backend}"
sources = ["k.cu"]
dtypes = ["fp32"]
shapes = [[64, 64, 64]]
[binding]
kind = "raw"
entry = "k"
grid = [1]
block = [64]
[launch]
{launch} = 1024
'''


@pytest.mark.parametrize("backend, launch, ok", [
    ("cuda", "dynamic_smem_bytes", True), ("hip", "dynamic_lds_bytes", True),
    ("cuda", "dynamic_lds_bytes", False), ("hip", "dynamic_smem_bytes", False),
])
def test_one_name_per_back_end_for_dynamic_shared_memory(tmp_path, backend, launch, ok):
    path = _write(tmp_path, "kernels/r", RAW.format(backend=backend, launch=launch), {"kernels/r/k.cu": ""})
    if ok:
        assert load_variant(tmp_path, path, ProjectConfig()).launch == {launch: 1024}
        return
    with pytest.raises(ManifestError) as err:
        load_variant(tmp_path, path, ProjectConfig())
    wanted = "dynamic_smem_bytes" if backend == "cuda" else "dynamic_lds_bytes"
    assert err.value.key == f"launch.{launch}" and f"name for it is {wanted!r}" in str(err.value)


def test_a_c_entry_cannot_return_its_output(tmp_path):
    text = RAW.format(backend="cuda", launch="dynamic_smem_bytes").replace('kind = "raw"', 'kind = "raw"\nreturns = true')
    with pytest.raises(ManifestError, match="binding.returns: a raw entry writes into the output it is given"):
        load_variant(tmp_path, _write(tmp_path, "kernels/r", text, {"kernels/r/k.cu": ""}), ProjectConfig())


TORCH = '''name = "t"
op = "swiglu"
backend = "torch"
dtypes = ["fp32"]
shapes = [[8, 64]]
[binding]
kind = "pybind11"
module = "{module}"
entry = "swiglu"
returns = true
'''


def test_the_torch_back_end_names_its_extensions(tmp_path):
    bench = "from torch.utils.cpp_extension import load\next = load(name='sw', sources=['sw.cu'])\n"
    files = {"bench.py": bench, "sw.cu": ""}
    with pytest.raises(ManifestError, match="extensions: missing"):
        load_variant(tmp_path, _write(tmp_path, "kernels/t", TORCH.format(module="sw"), files), ProjectConfig())
    text = TORCH.format(module="sw") + '[[extensions]]\nfrom = "../../bench.py"\n'
    v = load_variant(tmp_path, _write(tmp_path, "kernels/t", text, files), ProjectConfig())
    assert v.devices == ("cuda", "rocm") and v.extra_files == ("sw.cu",)  # CUDA sources: GPUs
    assert v.extensions[0]["origin"] == "bench.py:2"
    wrong = TORCH.format(module="other") + '[[extensions]]\nfrom = "../../bench.py"\n'
    with pytest.raises(ManifestError, match="binding.module: 'other' is none of the extensions"):
        load_variant(tmp_path, _write(tmp_path, "kernels/t", wrong, files), ProjectConfig())
    python = text.replace('backend = "torch"', 'backend = "python"').replace('kind = "pybind11"', 'kind = "python"')
    python = python.replace('entry = "swiglu"', 'entry = "../../bench.py:ext"')
    with pytest.raises(ManifestError, match='extensions: only for backend = "torch"'):
        load_variant(tmp_path, _write(tmp_path, "kernels/t", python, files), ProjectConfig())


def test_an_extension_described_in_the_manifest(tmp_path):
    text = TORCH.format(module="sw") + ('[[extensions]]\nname = "sw"\nsources = ["../../csrc/sw.cpp"]\n'
                                        'extra_cflags = ["-O3"]\ninclude_dirs = ["../../csrc/include"]\n')
    v = load_variant(tmp_path, _write(tmp_path, "kernels/t", text, {"csrc/sw.cpp": "", "csrc/include/a.h": ""}),
                     ProjectConfig())
    (ext,) = v.extensions
    assert (ext["sources"], ext["include_dirs"], ext["extra_cflags"]) == (["csrc/sw.cpp"], ["csrc/include"], ["-O3"])
    assert v.devices == ("cpu",) and set(v.extra_files) == {"csrc/sw.cpp", "csrc/include"}


def test_a_problem_file_is_read_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    op = parse_problem("p/mm.py", PROBLEM + f"\nopen({str(marker)!r}, 'w')\n", "mm", "2*M*N*M")
    assert not marker.exists()
    assert (op.inputs, op.dims, op.defaults) == (("A", "B"), ("N", "M"), {"N": 2048, "M": 512})  # not scale
    assert parse_problem("p/x.py", PROBLEM.replace("N = 1024 * 2\nM = N // 4\n", ""), "x").dims == ("problem",)
    with pytest.raises(OpDefinitionError, match="get_inputs: missing"):
        parse_problem("p/mm.py", PROBLEM.replace("def get_inputs", "def inputs"), "mm")


def test_two_problems_cannot_share_an_op(tmp_path):
    variant = ('name = "{name}"\nop = "mm"\nbackend = "python"\ndtypes = ["fp32"]\npeer = true\n'
               '[problem]\nfile = "../../{file}"\n[binding]\nkind = "python"\nentry = "../../{file}:Model"\n')
    _write(tmp_path, "kernels/a", variant.format(name="a", file="p1.py"), {"p1.py": PROBLEM, "p2.py": PROBLEM})
    _write(tmp_path, "kernels/b", variant.format(name="b", file="p2.py"))
    valid, invalid = discover(tmp_path, ProjectConfig())
    assert [v.name for v in valid] == ["a"]
    assert invalid[0].error.endswith("op: 'mm' is already the op of problem p1.py; name the problem of p2.py otherwise")


def test_entry_forms_and_paths():
    assert entry_parts("a/b.py:Model") == ("file", "a/b.py", "Model")
    assert entry_parts("liger_kernel.transformers.functional:liger_rms_norm") == \
        ("module", "liger_kernel.transformers.functional", "liger_rms_norm")
    assert entry_parts("torch.ops.mylib.rms_norm") == ("torch_op", "torch.ops.mylib.rms_norm", "")
    assert repo_path("flopwatch/x", "../../src/m.py") == "src/m.py"
    with pytest.raises(ValueError, match="outside the repository"):
        repo_path("x", "../../m.py")


def test_what_tritons_jit_compiled_becomes_resources():
    kernel = SimpleNamespace(metadata=SimpleNamespace(name="_rms_norm_forward_kernel", shared=0, num_warps=8,
                                                      num_stages=3, target=SimpleNamespace(arch=90)),
                             n_regs=40, n_spills=0)
    label, row = triton_jit.kernel_row(kernel, {"BLOCK_SIZE": 4096, "casting_mode": 0})
    assert label == "_rms_norm_forward_kernel[BLOCK_SIZE=4096,casting_mode=0]@sm_90"
    assert row == {"arch": "sm_90", "registers": 40, "spill_stores": 0, "smem_bytes": 0, "num_warps": 8,
                   "num_stages": 3, "jit": True}
    config = SimpleNamespace(kwargs={"BLOCK_N": 64, "BLOCK_M": 128}, num_warps=8, num_stages=3, num_ctas=1, maxnreg=None)
    assert triton_jit._config_text(config) == "BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3"
    merged = triton_jit.merge({"vendor": "triton", "kernels": {"aot@gfx942": {}}},
                              {"kernels": {label: row}, "autotune": {"k": "BLOCK_M=128"}})
    assert set(merged["kernels"]) == {"aot@gfx942", label} and merged["autotune"] == {"k": "BLOCK_M=128"}
    assert triton_jit.merge({"a": 1}, {"kernels": {}, "autotune": {}}) == {"a": 1}


def test_recording_restores_tritons_functions():
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    before = (JITFunction.run, Autotuner.run)
    with triton_jit.recording() as found:
        assert JITFunction.run is not before[0] and found == {"vendor": "triton", "kernels": {}, "autotune": {}}
    assert (JITFunction.run, Autotuner.run) == before
