"""Every draft `flopwatch new` / `init` writes is a manifest that loads: each bundled kernel source,
drafted into a copy of its repository, and kernels whose op, dtype or launch cannot be told
(those are guesses, marked on their line, never placeholders that fail validation)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from pipeline.onboarding.conventions.torch_extension import built_sources
from pipeline.onboarding.onboard import kernel_drafts
from pipeline.onboarding.source.repo import RepoFiles
from pipeline.onboarding.write import project
from pipeline.project.config import load_config
from pipeline.project.discovery import find_ops
from pipeline.project.manifest import load_variant

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent

# Bundled sources → how many drafts `init` makes of them.
BUNDLED = {
    "kernels": 22,
    "tests/new_kernels": 8,
    "tests/rocm/hiprtc_gemm": 1,
    "tests/broken_kernels": 0,  # CPU kernels: no __global__, nothing to draft
    "tests/broken_kernels_cuda": 3,
}


def draft_repository(repo: Path) -> dict[str, tuple[dict, object]]:
    """Draft every kernel source of `repo` as `init` does; name → (manifest, loaded variant)."""
    files = RepoFiles.at(repo, "flopwatch")
    drafts, _ = kernel_drafts(files, files.host, "flopwatch", skip=set(built_sources(files)))
    done = project.write(repo, drafts, force=True)
    assert all(x.written for x in done)
    project.update_config(repo, "flopwatch", [d for x in drafts for d in x.include_dirs])
    config = load_config(repo)
    ops, _ = find_ops(repo, config.kernel_dirs)
    loaded = {}
    for d in drafts:
        manifest = repo / d.folder / "variant.toml"
        loaded[d.name] = (tomllib.loads(manifest.read_text()), load_variant(repo, manifest, config, ops))
    return loaded


@pytest.mark.parametrize("folder", sorted(BUNDLED))
def test_every_bundled_kernel_source_drafts_to_a_manifest_that_loads(tmp_path, folder):
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / folder, repo / Path(folder).name, ignore=shutil.ignore_patterns("__pycache__"))
    loaded = draft_repository(repo)  # load_variant raises on an invalid manifest
    assert len(loaded) == BUNDLED[folder]
    for manifest, variant in loaded.values():
        assert variant.op == manifest["op"] and "?" not in str(manifest)


def test_a_kernel_no_op_fits_is_a_valid_guess_that_says_why(tmp_path):
    """The raw kernel of a torch extension, drafted where no module exports its wrapper: the op
    whose arguments match best, its pointers' dtype, and only the parameters the op has."""
    repo = tmp_path / "repo"
    shutil.copytree(HERE / "new_kernels" / "torch_ext_attention", repo / "attn")
    (repo / "attn" / "csrc" / "main.cpp").unlink()
    ((manifest, variant),) = draft_repository(repo).values()
    assert (variant.op, variant.dtypes, variant.binding.args) == ("attention", ("fp32",),
                                                                  ("Q", "K", "V", "S", "D", "scale", "O"))
    assert (manifest["binding"]["grid"], manifest["binding"]["block"]) == (["B", "H"], [32])  # B = Q.size(0)
    text = (repo / "flopwatch" / "forward_kernel" / "variant.toml").read_text()
    assert 'op = "attention"  # TODO (guess): the signature fits no op; attention\'s arguments match best' in text
    assert "# TODO (guess): Tc, Tr, Bc, Br, l, m are no attention argument: flopwatch cannot launch forward_kernel" \
        in text


UNKNOWABLE = '''
struct Params { int n; };
__global__ void histogram(const unsigned* values, unsigned* bins, int n, int nbins, int stride) { }
__global__ void spin(volatile int* flag) { while (*flag == 0) { } }
__global__ void no_pointers(int n) { }
__global__ void with_struct(Params p, double* out) { }
template <int TILE> __global__ void tiled_only(const float* x, float* y, int n) { }
__global__ void fp64_gemm(const double* A, const double* B, double* C, int M, int N, int K) { }
'''


def test_kernels_nothing_can_be_told_of_still_draft_valid_manifests(tmp_path):
    (tmp_path / "repo" / "src").mkdir(parents=True)
    (tmp_path / "repo" / "src" / "odd.cu").write_text(UNKNOWABLE)
    loaded = draft_repository(tmp_path / "repo")
    ops = {name: (m["op"], m["dtypes"], m["binding"]["args"]) for name, (m, _) in loaded.items()}
    assert ops == {
        "histogram": ("copy", ["fp32"], ["src", "dst", "n"]),
        "spin": ("copy", ["fp32"], ["dst"]),
        "no_pointers": ("copy", ["fp32"], ["n"]),
        "with_struct": ("copy", ["fp32"], ["dst"]),
        "tiled_only": ("copy", ["fp32"], ["src", "dst", "n"]),
        "fp64_gemm": ("gemm", ["fp32"], ["A", "B", "C", "M", "N", "K"]),
    }


DYNAMIC_SHARED = {
    "hip/rows.hip": ('#include <hip/hip_runtime.h>\n'
                     '__global__ void row_sum(const float* x, float* y, int rows, int cols) {\n'
                     '    extern __shared__ float red[]; y[0] = x[0] + red[0]; }\n'
                     'void run(const float* x, float* y, int rows, int cols) {\n'
                     '    hipLaunchKernelGGL(row_sum, dim3(rows), dim3(256), 256 * sizeof(float) * 4, 0, x, y, rows, cols);\n'
                     '}\n'),
    "cuda/rows.cu": ('__global__ void row_softmax(const float* x, float* y, int rows, int cols) {\n'
                     '    extern __shared__ float red[]; y[0] = x[0] + red[0]; }\n'
                     'void run(const float* x, float* y, int rows, int cols) {\n'
                     '    row_softmax<<<rows, 128, 2048>>>(x, y, rows, cols);\n'
                     '}\n'),
}


def test_dynamic_shared_memory_has_one_name_per_back_end_and_loads(tmp_path):
    for rel, text in DYNAMIC_SHARED.items():
        (tmp_path / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / rel).write_text(text)
    loaded = draft_repository(tmp_path / "repo")
    assert loaded["row_sum"][0]["launch"] == {"dynamic_lds_bytes": 4096, "block_threads": 256}
    assert loaded["row_softmax"][0]["launch"] == {"dynamic_smem_bytes": 2048, "block_threads": 128}
    assert (loaded["row_sum"][1].backend, loaded["row_softmax"][1].backend) == ("hip", "cuda")
    assert loaded["row_sum"][1].launch["dynamic_lds_bytes"] == 4096
    assert loaded["row_softmax"][1].launch["dynamic_smem_bytes"] == 2048
