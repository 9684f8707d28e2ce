"""The bundled GPU variants on a machine without a GPU: every hip variant (the pybind11
`tk_kernel` one included) builds for gfx942 and
every cuda variant for sm_90a, and the commit page of that run shows their static analysis
(VGPRs, AGPRs, LDS, spills, occupancy, MFMA count; registers, shared memory, tensor
instructions) per variant, before any GPU has run them."""

from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest

from pipeline.commands.publish import write_site
from pipeline.fleet import cluster
from pipeline.run.progress import Progress
from pipeline.run.runflow import RunOptions, Session, run_commit
from pipeline.store import Store
from reports.site import commit_page_name
from workers.backends.build import toolchains

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
TOOLS = toolchains()


def _suite_copy(path: Path) -> git.Repo:
    shutil.copytree(ROOT / "kernels", path / "kernels")
    shutil.copy2(ROOT / "flopwatch.toml", path / "flopwatch.toml")
    files = [str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()]
    repo = git.Repo.init(path, initial_branch="main")
    repo.index.add(files)
    repo.index.commit("bundled suite", author=git.Actor("Dev", "dev@example.com"))
    return repo


@pytest.fixture(scope="module")
def static_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("static")
    repo = _suite_copy(base / "repo")
    session = Session(Store(base / "results.db"), base, cluster.connect(None), Progress(enabled=False))
    try:
        # The swept variants' points have a test of their own (tests/test_sweep_bundled.py).
        names = [p.name for p in (ROOT / "kernels" / "gemm").iterdir() if p.name.startswith(("hip_", "cuda_", "triton_"))
                 and "[params]" not in (p / "variant.toml").read_text()]
        outcome = run_commit(session, repo, "HEAD", RunOptions(only=tuple(names), shapes=("4096×4096×4096",)))
    finally:
        cluster.shutdown(session.cluster_info)
    write_site(session.store, base / "site")
    page = (base / "site" / commit_page_name(outcome.commit.sha)).read_text()
    return outcome, page


@pytest.mark.skipif(not TOOLS["hip"].get("ident"), reason="no HIP toolchain (run tools/install-hip-cross.sh)")
def test_hip_variants_show_resources_and_mfma_counts(static_run):
    outcome, page = static_run
    rows = {r.variant: r for r in outcome.results if r.backend == "hip"}
    assert set(rows) == {"hip_naive", "hip_lds_tiled", "hip_mfma", "hip_mfma_dbuf", "hip_raw_tutorial",
                         "hip_pybind_mfma"}
    for name, r in rows.items():
        # built, analysed, not run: no device here, or (pybind11) no ROCm node to link the module
        assert r.status == "skipped", (name, r.status, r.diagnostic)
        assert ("no rocm device" in r.diagnostic if name != "hip_pybind_mfma" else
                "host module" in r.diagnostic), (name, r.diagnostic)
        (k,) = r.resources["kernels"].values()
        assert k["arch"] == "gfx942" and k["vgprs"] > 0 and 1 <= k["waves_per_simd"] <= 8
        assert k["vgpr_spill"] == 0 and k["lds_bytes"] >= 0 and k["agprs"] >= 0
        expected_mfma = name.startswith(("hip_mfma", "hip_pybind_mfma"))
        assert (k["mfma_insts"] > 0) == expected_mfma, (name, k["mfma_insts"])
        for label in (">VGPR</abbr>", ">AGPR</abbr>", ">LDS</abbr>", ">VGPR spill</abbr>", ">waves/CU</abbr>",
                      ">MFMA</abbr>"):
            assert label in page, label
        assert "resources.kernels.&lt;kernel&gt;.vgprs" in page  # the legend names flopwatch's metric
    dbuf = rows["hip_mfma_dbuf"].resources["kernels"]
    single = rows["hip_mfma"].resources["kernels"]
    # the users' binding (tk_kernel.dispatch_micro) with its dynamic LDS on the commit page
    tk = rows["hip_pybind_mfma"].resources["kernels"]["tk_gemm_mfma"]
    assert tk["lds_bytes"] == 10240 and tk["occupancy_limit"] == "lds"
    assert "hip_pybind_mfma" in page and "tk_gemm_mfma" in page
    # double buffering doubles the LDS tile, which is what a reviewer checks before timing
    assert next(iter(dbuf.values()))["lds_bytes"] == 2 * next(iter(single.values()))["lds_bytes"]


@pytest.mark.skipif(not TOOLS["cuda"].get("ident"), reason="no nvcc")
def test_cuda_variants_show_registers_and_tensor_instructions(static_run):
    outcome, page = static_run
    rows = {r.variant: r for r in outcome.results if r.backend == "cuda"}
    built = {n: r for n, r in rows.items() if r.resources.get("kernels")}
    assert {"cuda_naive", "cuda_smem_tiled", "cuda_register_blocked", "cuda_wmma", "cuda_raw_naive"} <= set(built)
    for name, r in built.items():
        (k,) = r.resources["kernels"].values()
        assert k["arch"] == "sm_90a" and k["registers"] > 0 and k["spill_stores"] == 0
        if "tensor_insts" in k:  # present where cuobjdump is installed
            assert (k["tensor_insts"] > 0) == (name == "cuda_wmma"), name
    assert ">registers</abbr>" in page and ">smem</abbr>" in page


@pytest.mark.skipif(not TOOLS.get("triton", {}).get("ident"), reason="triton not installed (scripts/setup.sh)")
def test_triton_variants_built_and_analysed_for_both_vendors(static_run):
    outcome, page = static_run
    results = [r for r in outcome.results if r.backend == "triton"]
    rows = {r.variant: r for r in results}
    assert set(rows) == {"triton_tiled", "triton_autotuned"}
    assert {r.device for r in results} == {"cuda", "rocm"}  # one row per GPU vendor, neither here
    for r in results:
        assert r.status == "skipped" and f"no {r.device} device" in r.diagnostic  # built, analysed, not run
        kernels = r.resources["kernels"]
        nv = [k for k in kernels.values() if k["arch"] == "sm_90a"]
        amd = [k for k in kernels.values() if k["arch"] == "gfx942" and "vgprs" in k]
        # Triton's shared memory is dynamic: none static, the tiles in the allocation
        assert nv and all(k["registers"] > 0 and k["smem_dynamic_bytes"] > 0
                          and k["smem_alloc_bytes"] >= k["smem_dynamic_bytes"] + 1024 for k in nv)
        assert amd and all(k["mfma_insts"] > 0 for k in amd)
    assert "gemm_tiled_kernel[bf16]@gfx942" in page
