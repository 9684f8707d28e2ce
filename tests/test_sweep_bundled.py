"""The bundled suite's swept variants on a machine without a GPU: every point of the CUDA and
HIP GEMMs is built (or is `does_not_fit` for the resource limit its manifest says it exceeds),
its static resources are stored per point, the run exits 0, and the commit page lays the points
out over their axes."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from suite_repo import ROOT, init_repo

from pipeline import cli
from pipeline.fleet import cluster
from pipeline.store import Store
from workers.backends import cuda, hip

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(cuda.toolchain() is None or hip.toolchain() is None,
                                 reason="needs nvcc and the HIP toolchain (scripts/setup.sh)")]

SWEPT = ("cuda_tiled_swept", "hip_tiled_swept")


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundled_swept")
    repo = init_repo(root)
    shutil.copy(ROOT / "flopwatch.toml", root / "flopwatch.toml")
    shutil.copytree(ROOT / "kernels" / "include", root / "kernels" / "include")
    for name in SWEPT:
        shutil.copytree(ROOT / "kernels" / "gemm" / name, root / "kernels" / "gemm" / name)
    (root / ".gitignore").write_text(".flopwatch/\n")
    repo.git.add("-A")
    repo.index.commit("swept variants")
    info = cluster.connect(None)
    try:
        db, site = root / "r.db", root / "site"
        args = ["run", "--repo", str(root), "--db", str(db), "--site", str(site)]
        for name in SWEPT:
            args += ["--variant", name]
        code = cli.main(args)
    finally:
        cluster.shutdown(info)
    with Store(db) as store:
        rows = store.results(columns=("variant", "shape", "status", "diagnostic", "resources"))
    assert code == 0  # the points that do not fit are no failure: the suite passes on a healthy machine
    return rows, site


def _per_point(rows, family):
    return {r["variant"]: r for r in rows if r["variant"].startswith(family + "[")}


def test_every_cuda_point_builds_but_the_one_past_the_shared_memory_limit(stored):
    rows, _ = stored
    points = _per_point(rows, "cuda_tiled_swept")
    assert len(points) == 12
    failed = {n for n, r in points.items() if r["status"] == "does_not_fit"}
    assert failed == {"cuda_tiled_swept[TILE=256,BK=64]"}
    assert "uses too much shared data" in points["cuda_tiled_swept[TILE=256,BK=64]"]["diagnostic"]
    for name, r in points.items():
        if name in failed:
            continue
        assert r["status"] == "skipped"  # built and analysed; no GPU here to run it
        tile, bk = (int(x) for x in re.findall(r"=(\d+)", name))
        kernels = r["resources"]["kernels"]
        assert len(kernels) == 2, kernels  # the vectorised and the checked instantiation, each its own row
        # 2 buffers × 2 operands × TILE × (BK + 4) floats of static shared memory, per point
        assert {k["smem_bytes"] for k in kernels.values()} == {16 * tile * (bk + 4)}, (name, kernels)


def test_every_hip_point_builds_but_those_past_the_lds_limit(stored):
    rows, _ = stored
    points = _per_point(rows, "hip_tiled_swept")
    assert len(points) == 12
    failed = {n: r["diagnostic"] for n, r in points.items() if r["status"] == "does_not_fit"}
    assert set(failed) == {"hip_tiled_swept[TILE=64,BK=64]", "hip_tiled_swept[TILE=128,BK=32]"}
    assert all("exceeds limit (65536)" in d for d in failed.values())
    lds = {n: max(k["lds_bytes"] for k in r["resources"]["kernels"].values())
           for n, r in points.items() if n not in failed}
    assert all(0 < v <= 65536 for v in lds.values()) and len(set(lds.values())) > 3, lds


def test_the_commit_page_lays_out_each_family_over_its_axes(stored):
    _, site = stored
    page = next(p for p in site.glob("commit-*.html"))
    html = page.read_text()
    assert 'data-family="cuda_tiled_swept"' in html and 'data-family="hip_tiled_swept"' in html
    cuda_table = html[html.index('data-family="cuda_tiled_swept"'):]
    cuda_table = cuda_table[:cuda_table.index("</table>")]
    assert cuda_table.count('class="axes-cell') == 12 + 0  # 4 TILE rows × 3 BK columns
    assert "does not fit" in cuda_table and "build_failed" not in cuda_table and "smem 144 KiB" in cuda_table
    assert json.dumps("TILE=256,BK=64")[1:-1] in cuda_table
