"""Parameter axes: points from `[params]` / `[sweep]`, their names and selectors, what a point
changes in the variant record, and the manifest errors of a sweep."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.project.config import ProjectConfig, load_config
from pipeline.project.discovery import discover
from pipeline.project.manifest import ManifestError, load_variant
from pipeline.project.sweep import SweepError, expand, points_of, template_axes
from workers.core.params import define_flags, point_name, selects, split_point, template_entry
from workers.triton_aot.spec import compile_jobs

KERNEL = """#ifndef BS
#define BS 16
#endif
extern "C" void gemm_sw(const float* A, const float* B, float* C, int M, int N, int K) {
  for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) {
    float acc = 0; for (int k = 0; k < K; ++k) acc += A[i*K+k] * B[j*K+k] * (MODE + 1) / (MODE + 1);
    C[i*N+j] = acc; }
}
"""

MANIFEST = """name = "sw"
op = "gemm"
backend = "cpp"
sources = ["k.cpp"]
dtypes = ["fp32"]
shapes = [[64, 64, 64]]
[binding]
kind = "c"
entry = "gemm_sw"
"""


def _repo(tmp_path: Path, extra: str, kernel: str = KERNEL, manifest: str = MANIFEST) -> Path:
    folder = tmp_path / "kernels" / "gemm" / "sw"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.cpp").write_text(kernel)
    (folder / "variant.toml").write_text(manifest + extra)
    return folder / "variant.toml"


def test_points_are_the_product_in_axis_order_plus_extra_less_excluded():
    points = points_of({"BM": [64, 128], "STAGES": [2, 3]}, [{"STAGES": 4, "BM": 256}], [{"BM": 128, "STAGES": 3}])
    assert [point_name("g", p) for p in points] == [
        "g[BM=64,STAGES=2]", "g[BM=64,STAGES=3]", "g[BM=128,STAGES=2]", "g[BM=256,STAGES=4]"]
    assert points_of({}, [], []) == []


@pytest.mark.parametrize("axes, extra, exclude, key, words", [
    ({"BM": [64, 64]}, [], [], "params.BM", "twice"),
    ({"2BM": [1]}, [], [], "params.2BM", "not an axis name"),
    ({"T": ["float x"]}, [], [], "params.T", "single token"),
    ({"T": [float("nan")]}, [], [], "params.T", "nan"),
    ({"BM": [64]}, [{"BN": 1}], [], "sweep.points[0]", "every axis"),
    ({"BM": [64]}, [], [{"BN": 1}], "sweep.exclude[0]", "not an axis"),
    ({"BM": [64]}, [], [{}], "sweep.exclude[0]", "every point"),
    ({"BM": [64, 128]}, [], [{"BM": 64}, {"BM": 128}], "sweep.exclude", "every point"),
    ({"A": list(range(20)), "B": list(range(20))}, [], [], "params", "at most"),
    ({}, [], [{"BM": 1}], "sweep.exclude", "no [params]"),
    ({"A": [1, True]}, [], [], "params.A", "same point twice"),        # both -DA=1
    ({"A": [1, 1.0]}, [], [], "params.A", "same point twice"),
    ({"A": [float("inf")]}, [], [], "params.A", "not a value"),
    ({"BM": [64, 128]}, [], [{"BM": 265}], "sweep.exclude[0]", "matches no point"),
    ({"A": list(range(100)) for _ in range(1)} | {f"X{i}": list(range(20)) for i in range(8)}, [], [], "params",
     "at most 256"),                                                     # refused before the product is built
    ({"A_VERY_LONG_AXIS_NAME_" * 2 + str(i): ["a_long_value_of_an_axis_x"] for i in range(5)}, [], [], "params",
     "more than 160 characters"),
])
def test_sweep_mistakes_name_their_key(axes, extra, exclude, key, words):
    with pytest.raises(SweepError) as err:
        points_of(axes, extra, exclude)
    assert err.value.key == key and words in str(err.value)


@pytest.mark.parametrize("extra, exclude, message", [
    ([], [{"BLK": 64}], "'BLK' is not an axis; did you mean 'BK'? (axes: TILE, BK)"),
    ([], [{"TILEE": 64, "BKK": 8}], "'BKK', 'TILEE' are not axes; did you mean 'BK', 'TILE'? (axes: TILE, BK)"),
    ([], [{"TILE": 65, "BK": 8}], "{TILE = 65, BK = 8} matches no point (a value misspelt?)"),
    ([{"TILE": 64}], [], "sets TILE; a point sets every axis (TILE, BK)"),
])
def test_sweep_mistakes_say_what_was_meant_in_the_manifests_words_not_pythons(extra, exclude, message):
    with pytest.raises(SweepError) as err:
        points_of({"TILE": [64, 128], "BK": [8, 16]}, extra, exclude)
    assert str(err.value) == message
    assert "[" not in str(err.value)  # no Python list (or dict) reprs


def test_names_round_trip_and_selectors_pick_points():
    params = {"BLOCK_M": 128, "USE_TMA": True, "ACC": "float", "SCALE": 0.5}
    name = point_name("k", params)
    assert name == "k[BLOCK_M=128,USE_TMA=true,ACC=float,SCALE=0.5]"
    assert split_point(name) == ("k", params)
    assert split_point("plain") == ("plain", {})
    assert selects("k", name) and selects("k[BLOCK_M=128]", name) and selects("k[SCALE=0.5,ACC=float]", name)
    assert not selects("k[BLOCK_M=64]", name) and not selects("kk", name) and not selects("k[NOPE=1]", name)
    assert define_flags(params) == ["-DBLOCK_M=128", "-DUSE_TMA=1", "-DACC=float", "-DSCALE=0.5"]
    assert template_entry("gemm<BM,BK, true>", {"BM": 64, "BK": 8}) == "gemm<64, 8, true>"
    assert template_axes("gemm<BM, BK>") == {"BM", "BK"}


def test_points_become_variants_with_defines(tmp_path):
    _repo(tmp_path, '[build]\nflags = ["-O2"]\n[params]\nBS = [8, 32]\nMODE = [0, 1]\n[sweep]\nexclude = [{BS = 32, MODE = 1}]\n')
    valid, invalid = discover(tmp_path, ProjectConfig())
    assert not invalid
    by_name = {v.name: v for v in valid}
    assert sorted(by_name) == ["sw[BS=32,MODE=0]", "sw[BS=8,MODE=0]", "sw[BS=8,MODE=1]"]
    point = by_name["sw[BS=8,MODE=1]"]
    assert point.flags == ("-O2", "-DBS=8", "-DMODE=1") and point.params == {"BS": 8, "MODE": 1}
    assert point.family == "sw" and point.points == ()


def test_run_variant_selects_a_family_a_subset_or_one_point(tmp_path):
    _repo(tmp_path, "[params]\nBS = [8, 32]\nMODE = [0, 1]\n")
    names = lambda only: sorted(v.name for v in discover(tmp_path, ProjectConfig(), only=only)[0])  # noqa: E731
    assert len(names(("sw",))) == 4
    assert names(("sw[MODE=1]",)) == ["sw[BS=32,MODE=1]", "sw[BS=8,MODE=1]"]
    assert names(("sw[MODE=1,BS=32]",)) == ["sw[BS=32,MODE=1]"]
    assert names(("sw[MODE=7]",)) == []


def test_broken_swept_manifest_is_reported_when_its_family_is_selected(tmp_path):
    _repo(tmp_path, "[params]\nBS = []\n")
    _, invalid = discover(tmp_path, ProjectConfig(), only=("sw[BS=8]",))
    assert len(invalid) == 1 and "params.BS: expected a non-empty list" in invalid[0].error


@pytest.mark.parametrize("extra, key, words", [
    ("[params]\nBS = [8]\nMODE = [0]\nBLOK = [1, 2]\n", "params.BLOK", "no source of the variant reads 'BLOK'"),
    ("[params]\nBS = [[8, 16]]\n", "params.BS[0]", "a number, a boolean or a string"),
    ("[params]\nBS = 8\n", "params.BS", "expected a list"),
    ("[params]\nBS = [{x = 1}]\n", "params.BS[0]", "a number, a boolean or a string"),
    ("[params]\nBS = [8]\nMODE = [0]\n[sweep]\nexclude = [{BS = 8}]\n", "sweep.exclude", "every point"),
])
def test_bad_axes_are_invalid_with_the_key(tmp_path, extra, key, words):
    manifest = _repo(tmp_path, extra)
    with pytest.raises(ManifestError) as err:
        load_variant(tmp_path, manifest, ProjectConfig())
    assert err.value.key == key and words in str(err.value), str(err.value)


def test_an_axis_is_not_also_a_keyword_argument(tmp_path):
    manifest = _repo(tmp_path, '[params]\nBLOCK = [64]\n', kernel="def f(A, B, C, BLOCK=64): pass\n",
                     manifest=MANIFEST.replace('"cpp"', '"python"').replace('"k.cpp"', '"k.py"')
                     .replace('kind = "c"\nentry = "gemm_sw"', 'kind = "python"\nentry = "k.py:f"\nkwargs = { BLOCK = 1 }'))
    (manifest.parent / "k.cpp").rename(manifest.parent / "k.py")
    with pytest.raises(ManifestError, match="params.BLOCK: is also a binding.kwargs key"):
        load_variant(tmp_path, manifest, ProjectConfig())


def test_python_and_triton_points_are_keyword_arguments_and_constexprs():
    root = Path(__file__).resolve().parent.parent
    v = load_variant(root, root / "kernels" / "gemm" / "triton_tiled" / "variant.toml", load_config(root))
    import dataclasses

    swept = dataclasses.replace(v, points=({"BLOCK_M": 64, "num_warps": 4},))
    (point,) = expand(swept)
    assert point.name == "triton_tiled[BLOCK_M=64,num_warps=4]"
    assert point.binding.kwargs == {"BLOCK_M": 64, "num_warps": 4} and point.flags == v.flags
    table = point.triton
    args = ["a_ptr", "b_ptr", "c_ptr", "BLOCK_M", "BLOCK_N"]
    jobs = compile_jobs({**table, "divisible_by_16": []}, "k", args, {"BLOCK_M", "BLOCK_N"}, None, ["sm_90a"], ["bf16"])
    assert jobs[0].constexprs["BLOCK_M"] == 64 and jobs[0].constexprs["BLOCK_N"] == 128
    assert jobs[0].options["num_warps"] == 4 and jobs[0].options["num_stages"] == 3


def test_raw_template_axes_are_template_arguments_not_defines(tmp_path):
    folder = tmp_path / "kernels" / "gemm" / "rawt"
    folder.mkdir(parents=True)
    (folder / "k.cu").write_text("template <int BM, int BK> __global__ void g(const float* A, const float* B, "
                                 "float* C, int M, int N, int K) { (void)ROWS; }\n")
    (folder / "variant.toml").write_text(
        'name = "rawt"\nop = "gemm"\nbackend = "cuda"\nsources = ["k.cu"]\ndtypes = ["fp32"]\nshapes = [[64, 64, 64]]\n'
        '[binding]\nkind = "raw"\nentry = "g<BM, BK>"\ngrid = ["ceil(N/16)", "ceil(M/16)"]\nblock = [16, 16]\n'
        '[params]\nBM = [16]\nBK = [8]\nROWS = [2]\n')
    (point,), invalid = discover(tmp_path, ProjectConfig())
    assert not invalid
    assert point.binding.entry == "g<16, 8>" and point.flags == ("-DROWS=2",)


def test_a_peer_has_no_axes(tmp_path):
    manifest = _repo(tmp_path, "peer = true\n[params]\nBS = [8]\n".replace("peer = true\n", ""),
                     manifest=MANIFEST.replace('name = "sw"', 'name = "sw"\npeer = true'))
    with pytest.raises(ManifestError, match="a peer is the one reference"):
        load_variant(tmp_path, manifest, ProjectConfig())


def test_a_point_has_its_own_build_hash(tmp_path):
    from pipeline.run.plan import build_plan

    _repo(tmp_path, "[params]\nBS = [8, 16]\n", kernel=KERNEL.replace("(MODE + 1) / (MODE + 1)", "1"))
    a, b = discover(tmp_path, ProjectConfig())[0]
    assert build_plan(tmp_path, a, (), "gcc").build_hash != build_plan(tmp_path, b, (), "gcc").build_hash
    plain = tmp_path / "plain"
    shutil.copytree(tmp_path / "kernels", plain / "kernels")
    (plain / "kernels" / "gemm" / "sw" / "variant.toml").write_text(MANIFEST)
    (v,), _ = discover(plain, ProjectConfig())
    assert v.params == {}
    assert build_plan(plain, v, (), "gcc").build_hash not in {build_plan(tmp_path, p, (), "gcc").build_hash for p in (a, b)}


def test_best_point_is_nearest_the_fastest_at_every_series():
    from pipeline.project.sweep import best_points

    def row(variant, shape, t, status="ok"):
        return {"variant": variant, "shape": shape, "dtype": "bf16", "device": "cuda:H200", "status": status,
                "median_s": t}

    rows = [row("k[B=1]", "s1", 1.0), row("k[B=1]", "s2", 4.0),
            row("k[B=2]", "s1", 0.5), row("k[B=2]", "s2", 9.0, "incorrect"),  # fastest once, wrong once
            row("k[B=3]", "s1", 0.6), row("k[B=3]", "s2", 3.0),
            row("plain", "s1", 0.1), row("other[X=1]", "s1", 1.0, "crashed")]
    assert best_points(rows) == {"k": "k[B=3]"}


def test_ls_lists_every_point_with_its_family_and_values(tmp_path, capsys):
    from suite_repo import init_repo

    from pipeline import cli

    init_repo(tmp_path)
    _repo(tmp_path, "[params]\nBS = [8, 32]\nMODE = [0]\n")
    assert cli.main(["ls", "--repo", str(tmp_path), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["sw[BS=32,MODE=0]"]["family"] == "sw" and rows["sw[BS=32,MODE=0]"]["params"] == {"BS": 32, "MODE": 0}
    assert "sw[BS=8,MODE=0]" in rows and "params" not in rows["peer.gemm"]


def test_a_name_that_only_looks_like_a_point_is_a_plain_name():
    assert split_point("x[y]") == ("x[y]", {}) and split_point("k[A=1,,]") == ("k", {"A": 1})
    assert not selects("x[y]", "x[A=1]") and selects("x[y]", "x[y]")


def test_template_instances_resolve_against_the_demanglers_spelling():
    from workers.toolkit.raw_symbols import resolve

    kernels = {"_Z1kILj64ELb1EEvPf": "void k<64u, (bool)1>(float*)", "_Z1kILj32ELb0EEvPf": "void k<32u, false>(float*)",
               "_Z2k2ILi8EEvPf": "void k2<(int)8>(float*)", "_Z2k3ILm4EEvPf": "void ns::k3<4ul>(float*)"}
    assert resolve("k<64, true>", kernels) == ("_Z1kILj64ELb1EEvPf", "")
    assert resolve("k<32, false>", kernels) == ("_Z1kILj32ELb0EEvPf", "")
    assert resolve("k2<8>", kernels) == ("_Z2k2ILi8EEvPf", "")
    assert resolve("ns::k3<4>", kernels) == ("_Z2k3ILm4EEvPf", "")
    assert resolve("k<16, true>", kernels)[0] is None
