"""A CUDA torch extension gets gfx942 rows without a ROCm build of torch: torch's own hipify,
then the gfx942 toolchain on the device code (workers/torch_ext/gfx942.py). The extensions are
written here, in the shape flash-attention-minimal and pytorch/extension-cpp use: a kernel and a
`torch::Tensor` launcher in a .cu file, the binding in main.cpp."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.project.config import ProjectConfig
from pipeline.project.manifest import load_variant
from workers.backends import torch_ext
from workers.rocm.toolchain import HipToolchain, ToolchainMissing, find_hip_toolchain
from workers.torch_ext import gfx942

pytest.importorskip("torch")
TOOLCHAIN = find_hip_toolchain()
needs_toolchain = pytest.mark.skipif(isinstance(TOOLCHAIN, ToolchainMissing),
                                     reason=getattr(TOOLCHAIN, "reason", ""))

VARIANT = '''name = "scale_ext"
op = "copy"
backend = "torch"
dtypes = ["fp32"]
shapes = [[4096]]
{arches}
[binding]
kind = "pybind11"
module = "scale_ext"
entry = "scale"
returns = true

[[extensions]]
name = "scale_ext"
sources = ["../../csrc/main.cpp", "../../csrc/scale.cu"]
extra_cuda_cflags = ["-O3", "--use_fast_math", "-DTILE_ROWS=256"]
'''
MAIN = '''#include <torch/extension.h>
torch::Tensor scale(torch::Tensor x, double s);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale, "y = s * x"); }
'''
SCALE = r'''#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

__global__ void scale_kernel(const float* x, float* y, int n, float s) {
    __shared__ float tile[TILE_ROWS];  // 1 KiB of shared memory: the kernel's LDS on gfx942
    int i = blockIdx.x * TILE_ROWS + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    int j = blockIdx.x * TILE_ROWS + (TILE_ROWS - 1 - threadIdx.x);
    if (j < n) y[j] = tile[threadIdx.x] * s;
}

torch::Tensor scale(torch::Tensor x, double s) {
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto y = torch::empty_like(x);
    const int n = x.numel();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    scale_kernel<<<(n + TILE_ROWS - 1) / TILE_ROWS, TILE_ROWS, 0, stream>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n, static_cast<float>(s));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
'''
# Hopper-only inline PTX: hipify leaves it, and no AMD compiler can assemble it.
PTX = SCALE.replace("__syncthreads();", 'asm volatile("wgmma.fence.sync.aligned;" ::: "memory");')


def _variant(tmp_path: Path, scale: str = SCALE, arches: str = ""):
    root = tmp_path / "repo"
    for rel, text in {"csrc/main.cpp": MAIN, "csrc/scale.cu": scale}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    path = root / "kernels" / "scale_ext" / "variant.toml"
    path.parent.mkdir(parents=True)
    path.write_text(VARIANT.format(arches=arches))
    return load_variant(root, path, ProjectConfig())


def _build(tmp_path: Path, variant, monkeypatch=None):
    """The back end's build as build_variant runs it: sources under `repo/`, the artifact beside."""
    out = tmp_path / "build" / "out"
    out.mkdir(parents=True)
    if monkeypatch is not None:
        _nvcc_build_succeeds(monkeypatch)
    return torch_ext.build(variant, tmp_path / "repo" / variant.folder, out, torch_ext.toolchain(), [])


def _nvcc_build_succeeds(monkeypatch):
    """Stand in for the torch build child on this CPU node, as if a CUDA torch built the module:
    what is checked here is what the gfx942 analysis adds to a successful build."""
    def child(argv, timeout_s, work, env):
        for name in ("stdout.txt", "stderr.txt"):
            (work / name).write_text("")
        built = {"scale_ext": {"path": "ext/scale_ext.so", "module": "scale_ext", "is_python_module": True,
                               "cuda": True}}
        (work / "result.json").write_text(json.dumps({"built": built, "failed": {}}))
        return SimpleNamespace(timed_out=False, returncode=0, signal_name="")

    monkeypatch.setattr(torch_ext, "skip_reason", lambda specs, tc: "")
    monkeypatch.setattr(torch_ext, "run_child", child)


@needs_toolchain
def test_cuda_extension_gets_gfx942_rows_on_a_node_without_rocm_torch(tmp_path: Path):
    result = _build(tmp_path, _variant(tmp_path))
    rows = result.analysis["kernels"]
    row = rows["scale_kernel@gfx942"]
    assert row["arch"] == "gfx942" and row["vgprs"] > 0 and row["sgprs"] > 0
    assert row["lds_static_bytes"] == 256 * 4  # the shared array, from the extension's own -D
    assert row["waves_per_simd"] > 0 and row["vgpr_spill"] == 0 and row["mfma_insts"] == 0
    assert "notes" not in result.analysis
    if result.skip_reason:  # a CPU torch cannot build the module itself: the rows stay with the skip
        assert "CUDA or ROCm build of torch" in result.skip_reason and result.analysis["vendor"] == "amd"


@needs_toolchain
def test_what_hipify_cannot_make_compile_is_a_note_and_the_build_succeeds(tmp_path: Path, monkeypatch):
    result = _build(tmp_path, _variant(tmp_path, PTX), monkeypatch)
    assert result.ok and not result.first_errors and not result.skip_reason
    (note,) = result.analysis["notes"]
    assert note.startswith("gfx942 analysis: csrc/scale.hip:") and "error:" in note
    assert note in result.log
    assert not any(k.endswith("@gfx942") for k in result.analysis["kernels"])


@needs_toolchain
def test_arches_without_gfx942_skip_the_analysis(tmp_path: Path, monkeypatch):
    result = _build(tmp_path, _variant(tmp_path, arches='arches = ["sm_90a"]'), monkeypatch)
    assert result.ok and result.analysis == {}


def test_only_flags_clang_reads_alike_are_kept_and_arches_decide():
    spec = {"extra_cuda_cflags": ["-O3", "--use_fast_math", "-DN=4", "-UNDEBUG", "-gencode", "arch=compute_90a,code=sm_90a",
                                  "-Xptxas", "-v", "-D"]}
    assert gfx942.device_flags(spec) == ["-DN=4", "-UNDEBUG"]
    assert gfx942.wanted([]) and gfx942.wanted(["sm_90a", "gfx942"]) and not gfx942.wanted(["sm_90a"])


def test_the_note_shows_under_the_results_resources():
    from reports.templates_env import ENV

    resources = {"vendor": "nvidia", "kernels": {"scale_kernel": {"arch": "sm_90a", "registers": 16}},
                 "notes": ["gfx942 analysis: csrc/scale.hip:11:18: error: invalid instruction"]}
    html = ENV.get_template("_resources.html.j2").render(r={"resources": resources})
    assert "scale_kernel" in html and "gfx942 analysis: csrc/scale.hip:11:18: error: invalid instruction" in html


def test_load_inline_cuda_is_hipified_as_torch_writes_it(tmp_path: Path):
    """KernelBench's shape: the CUDA string becomes torch's cuda.cu (its implicit headers first),
    then hipify's hip.hip with HIP's launch; the repository's files are left as they were."""
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "solution.py").write_text("# the load_inline call\n")
    cuda = "__global__ void add_kernel(const float* a, float* b) { b[threadIdx.x] += a[threadIdx.x]; }\n" \
           "void add(const float* a, float* b) { add_kernel<<<1, 32>>>(a, b); cudaDeviceSynchronize(); }\n"
    spec = {"name": "add_ext", "kind": "load_inline", "cuda_sources": [cuda]}
    (unit,), includes = gfx942.hipify(spec, tmp_path / "repo", tmp_path / "work")
    text = unit.read_text()
    assert unit.suffix == ".hip" and unit.parent == (tmp_path / "work" / "tree").resolve() and includes == []
    assert "#include <torch/types.h>" in text and "hipLaunchKernelGGL(( add_kernel)" in text
    assert "hipDeviceSynchronize()" in text and "cuda_runtime.h" not in text
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == ["solution.py"]


def test_units_past_the_budget_are_left_out_with_a_note(tmp_path: Path):
    (tmp_path / "repo" / "csrc").mkdir(parents=True)
    for name in ("a.cu", "b.cu"):
        (tmp_path / "repo" / "csrc" / name).write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    spec = {"name": "two", "kind": "load", "sources": ["csrc/a.cu", "csrc/b.cu"]}
    unused = HipToolchain("clang-cross", "/nonexistent/clang++-19", "19", "/nonexistent", True, "/usr")
    rows, notes = gfx942.analyse([spec], tmp_path / "repo", tmp_path / "work", unused, [], budget_s=0)
    assert rows == {} and notes == ["gfx942 analysis: two: 2 of 2 translation unit(s) left out, past the "
                                    "analysis' 0 s budget"]
