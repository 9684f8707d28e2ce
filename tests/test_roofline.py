"""The commit page's roofline: points from the op's FLOPs and bytes, ceilings from the data sheet
(spec) and from the best peer and copy of the same run (measured), labelled which is which."""

from __future__ import annotations

import pytest
from site_text import figure_problems

from reports import roofline
from reports.device_specs import spec_of

MI300X = "rocm:AMD Instinct MI300X"


def _gemm(variant, n, seconds, peer=False, run=7, device=MI300X, dtype="bf16"):
    flops = 2.0 * n ** 3
    moved = 2.0 * 2 * n * n + 4.0 * n * n
    return {"variant": variant, "op": "gemm", "shape": f"M={n},N={n},K={n}", "dtype": dtype, "device": device,
            "status": "ok", "median_s": seconds, "flops": flops, "bytes_moved": moved, "peer": peer, "run_id": run}


def _copy(variant, n, seconds, peer=False, run=7, device=MI300X):
    return {"variant": variant, "op": "copy", "shape": f"n={n}", "dtype": "fp32", "device": device, "status": "ok",
            "median_s": seconds, "flops": 0.0, "bytes_moved": 8.0 * n, "peer": peer, "run_id": run}


def test_points_and_both_kinds_of_ceiling_per_op_dtype_and_device():
    rows = [_gemm("torch_ref", 4096, 2.0e-4, peer=True), _gemm("torch_ref", 1024, 1.0e-5, peer=True),
            _gemm("hip_tiled", 4096, 1.0e-3), _gemm("hip_tiled", 1024, 4.0e-5),
            _gemm("hip_broken", 4096, None) | {"status": "build_failed"},
            _copy("torch_copy", 1 << 26, 1.6e-4, peer=True), _copy("hip_copy", 1 << 26, 2.0e-4),
            _copy("torch_copy", 1 << 26, 1.0e-4, peer=True, run=6)]  # faster, but another run: not this roof
    [roof] = roofline.rooflines(rows)
    assert (roof.op, roof.dtype, roof.device, roof.run_id) == ("gemm", "bf16", MI300X, 7)
    assert len(roof.points) == 4  # the failed one has no point; copies have no FLOPs
    tiled = next(p for p in roof.points if p.variant == "hip_tiled" and p.shape.startswith("M=4096"))
    assert tiled.intensity == pytest.approx(2 * 4096 ** 3 / (8 * 4096 ** 2))  # n/4 FLOP per byte at bf16 in, fp32 out
    assert tiled.flops_per_s == pytest.approx(2 * 4096 ** 3 / 1e-3)
    by = {(c.source, c.kind): c for c in roof.ceilings}
    assert by["spec", "compute"].value == spec_of(MI300X).peak_flops["bf16"] == pytest.approx(1307.4e12)
    assert by["spec", "bandwidth"].value == pytest.approx(5.3e12)
    assert by["measured", "compute"].value == pytest.approx(2 * 4096 ** 3 / 2.0e-4)  # the best peer, not 1024³
    assert by["measured", "bandwidth"].value == pytest.approx(8.0 * (1 << 26) / 1.6e-4)  # best copy of run 7
    assert "best peer: torch_ref 4096×4096×4096" in by["measured", "compute"].label
    assert "best copy: torch_copy" in by["measured", "bandwidth"].label
    assert by["spec", "bandwidth"].label.startswith("spec bandwidth: 5.3 TB/s")
    assert "data sheet" in by["spec", "compute"].what


def test_an_unknown_device_has_only_measured_ceilings_and_none_without_peer():
    rows = [_gemm("cpp_blocked", 256, 2e-3, device="cpu:x", dtype="fp32"),
            _gemm("torch_ref", 256, 2e-4, peer=True, device="cpu:x", dtype="fp32")]
    [roof] = roofline.rooflines(rows)
    assert {c.source for c in roof.ceilings} == {roofline.MEASURED}
    assert [c.kind for c in roof.ceilings] == ["compute"]  # no copy measured in this run
    [alone] = roofline.rooflines(rows[:1])
    assert alone.ceilings == ()


def test_the_roof_is_the_lower_of_compute_and_bandwidth():
    assert roofline.attainable(100.0, 10.0, 2.0) == 20.0  # memory bound left of the ridge (I = 10)
    assert roofline.attainable(100.0, 10.0, 50.0) == 100.0
    assert roofline.attainable(None, 10.0, 3.0) == 30.0 and roofline.attainable(None, None, 3.0) is None


def test_the_figure_draws_both_roofs_and_every_point_within_four_digits():
    rows = [_gemm("torch_ref", 4096, 2.0e-4, peer=True), _gemm("hip_tiled", 4096, 1.0e-3),
            _copy("torch_copy", 1 << 26, 1.6e-4, peer=True)]
    [roof] = roofline.rooflines(rows)
    fig = roofline.figure(roof)
    names = [t["name"] for t in fig["data"]]
    assert names == ["spec roof", "measured roof", "peer", "variants"]
    assert fig["layout"]["xaxis"]["type"] == fig["layout"]["yaxis"]["type"] == "log"
    spec_line = fig["data"][0]
    assert max(spec_line["y"]) == pytest.approx(1307.4, rel=1e-3)  # TFLOP/s: flat at the compute peak right of the ridge
    ridge = 1307.4e12 / 5.3e12
    assert any(x == pytest.approx(ridge, rel=1e-3) for x in spec_line["x"])
    assert fig["data"][2]["marker"]["symbol"] == "diamond"
    hover = fig["data"][3]["customdata"][0][2]
    assert "% of the spec roof" in hover and "% of the measured roof" in hover
    assert figure_problems(fig) == []
