"""Every point of a swept variant builds with the real compilers, or fails alone with the
compiler's reason; the static resources are recorded per point; a run stores a point past the
device's limit as `does_not_fit` with that reason and still passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite_repo import init_repo

from pipeline import cli
from pipeline.project.config import ProjectConfig
from pipeline.project.discovery import discover
from pipeline.run.plan import build_plan
from workers.backends import cuda, hip
from pipeline.store import Store
from workers.backends.build import build_variant
from workers.core import status

TEMPLATE_KERNEL = """template <int BM, int BK>
__global__ void tile_sum(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float tile[BM * BK];
  int i = blockIdx.y * 16 + threadIdx.y, j = blockIdx.x * 16 + threadIdx.x;
  tile[(threadIdx.y * 16 + threadIdx.x) % (BM * BK)] = 0.f;
  __syncthreads();
  if (i < M && j < N) { float acc = tile[0]; for (int k = 0; k < K; ++k) acc += A[i*K+k] * B[j*K+k]; C[i*N+j] = acc; }
}
"""


def _raw_repo(tmp_path: Path, backend: str, arch: str, suffix: str, bk: list[int]) -> list:
    folder = tmp_path / "kernels" / "gemm" / "tiles"
    folder.mkdir(parents=True)
    (folder / f"k{suffix}").write_text(TEMPLATE_KERNEL)
    (folder / "variant.toml").write_text(
        f'name = "tiles"\nop = "gemm"\nbackend = "{backend}"\nsources = ["k{suffix}"]\ndtypes = ["fp32"]\n'
        f'shapes = [[64, 64, 64]]\narches = ["{arch}"]\n'
        '[binding]\nkind = "raw"\nentry = "tile_sum<BM, BK>"\ngrid = ["ceil(N/16)", "ceil(M/16)"]\nblock = [16, 16]\n'
        f'[params]\nBM = [16, 64]\nBK = {bk}\n')
    valid, invalid = discover(tmp_path, ProjectConfig())
    assert not invalid
    return valid


def _build(root: Path, v):
    plan = build_plan(root, v, (), "test")
    record, files = build_variant(v, plan.bundle, plan.build_hash)
    return record, files


@pytest.mark.skipif(cuda.toolchain() is None, reason="nvcc is not installed")
def test_cuda_template_points_build_alone_and_fail_past_the_shared_memory_limit(tmp_path):
    # 16·8192·4 B = 512 KiB of static shared memory: past sm_90a's 227 KiB, ptxas refuses it.
    records = {v.name: _build(tmp_path, v)[0] for v in _raw_repo(tmp_path, "cuda", "sm_90a", ".cu", [8, 8192])}
    assert sorted(n for n, r in records.items() if not r.ok) == ["tiles[BM=16,BK=8192]", "tiles[BM=64,BK=8192]"]
    assert all("uses too much shared data" in records[n].first_errors for n in records if not records[n].ok)
    small, large = records["tiles[BM=16,BK=8]"], records["tiles[BM=64,BK=8]"]
    assert small.ok and large.ok
    kernel = lambda r: next(iter(r.analysis["kernels"].values()))  # noqa: E731
    assert kernel(small)["smem_bytes"] == 16 * 8 * 4 and kernel(large)["smem_bytes"] == 64 * 8 * 4


@pytest.mark.skipif(hip.toolchain() is None, reason="no HIP toolchain (clang with the AMDGPU target)")
def test_hip_template_points_fail_past_the_lds_limit_with_the_compilers_reason(tmp_path):
    # 64·1024·4 B = 256 KiB of LDS: past gfx942's 64 KiB.
    records = {v.name: _build(tmp_path, v)[0] for v in _raw_repo(tmp_path, "hip", "gfx942", ".hip", [8, 1024])}
    failed = sorted(n for n, r in records.items() if not r.ok)
    assert failed == ["tiles[BM=64,BK=1024]"], {n: r.first_errors for n, r in records.items()}
    assert "local memory (262144) exceeds limit (65536)" in records[failed[0]].first_errors
    lds = {n: next(iter(r.analysis["kernels"].values()))["lds_bytes"] for n, r in records.items() if r.ok}
    assert lds == {"tiles[BM=16,BK=8]": 512, "tiles[BM=64,BK=8]": 2048, "tiles[BM=16,BK=1024]": 65536}


@pytest.mark.skipif(hip.toolchain() is None, reason="no HIP toolchain (clang with the AMDGPU target)")
def test_a_run_stores_the_point_past_the_lds_limit_as_does_not_fit_and_exits_0(tmp_path, ray_cluster):
    _raw_repo(tmp_path, "hip", "gfx942", ".hip", [8, 1024])
    repo = init_repo(tmp_path)
    (tmp_path / ".gitignore").write_text(".flopwatch/\n")
    repo.git.add("-A")
    repo.index.commit("swept template kernel")
    db = tmp_path / "r.db"
    code = cli.main(["run", "--repo", str(tmp_path), "--db", str(db), "--site", str(tmp_path / "site")])
    with Store(db) as store:
        rows = {r["variant"]: r for r in store.results(columns=("variant", "status", "diagnostic"))}
    unfit = rows["tiles[BM=64,BK=1024]"]
    assert unfit["status"] == status.DOES_NOT_FIT, unfit
    assert "local memory (262144) exceeds limit (65536)" in unfit["diagnostic"]
    # The other points built; no AMD GPU here to time them. Nothing failed, so the run passes.
    assert {n: r["status"] for n, r in rows.items() if n.startswith("tiles") and n != unfit["variant"]} == \
        dict.fromkeys(("tiles[BM=16,BK=8]", "tiles[BM=64,BK=8]", "tiles[BM=16,BK=1024]"), status.SKIPPED)
    assert code == 0


def test_cpp_points_each_compile_their_own_defines(tmp_path):
    folder = tmp_path / "kernels" / "gemm" / "sw"
    folder.mkdir(parents=True)
    (folder / "k.cpp").write_text('#if UNROLL > 8\n#error "UNROLL too large for this loop"\n#endif\n'
                                  'extern "C" void f(const float* A, const float* B, float* C, int M, int N, int K)'
                                  ' { for (int i = 0; i < M * N; i += UNROLL) C[i] = 0; }\n')
    (folder / "variant.toml").write_text('name = "sw"\nop = "gemm"\nbackend = "cpp"\nsources = ["k.cpp"]\n'
                                         'dtypes = ["fp32"]\nshapes = [[8, 8, 8]]\n[binding]\nkind = "c"\n'
                                         'entry = "f"\n[params]\nUNROLL = [1, 4, 16]\n')
    records = {v.name: _build(tmp_path, v) for v in discover(tmp_path, ProjectConfig())[0]}
    assert [n for n, (r, _) in records.items() if r.ok] == ["sw[UNROLL=1]", "sw[UNROLL=4]"]
    assert "UNROLL too large for this loop" in records["sw[UNROLL=16]"][0].first_errors
    assert records["sw[UNROLL=1]"][1] != records["sw[UNROLL=4]"][1]  # two binaries
