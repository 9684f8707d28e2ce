"""Passes from the manifest to the pages: `modes` in variant.toml (who may list them, what they
are named), one series per pass with the built-in peer's same pass beside it, the pass in the
measurement identity, and what the run table and the commit page show of launch floors and
peak memory."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.project.config import ProjectConfig
from pipeline.project.discovery import discover
from pipeline.project.manifest import ManifestError, load_variant
from pipeline.project.sweep import expand
from pipeline.run import identity, summary
from pipeline.run.peers import builtin_peers
from pipeline.run.plan import jobs_for

ENTRY = "import torch\n\n\ndef rms(x, w, eps):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w\n"
MANIFEST = """name = "auto_rms"
op = "rms_norm"
backend = "python"
dtypes = ["fp32"]
shapes = [[64, 128]]
{extra}
[binding]
kind = "python"
entry = "rms.py:rms"
returns = {returns}
{params}"""


def _manifest(tmp_path: Path, extra: str = 'modes = ["forward", "backward", "full"]', returns: str = "true",
              params: str = "") -> Path:
    folder = tmp_path / "kernels" / "auto_rms"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rms.py").write_text(ENTRY + "\nBLOCK = 1\n")
    path = folder / "variant.toml"
    path.write_text(MANIFEST.format(extra=extra, returns=returns, params=params))
    return path


def test_each_mode_is_a_series_named_by_its_pass(tmp_path):
    v = load_variant(tmp_path, _manifest(tmp_path), ProjectConfig())
    assert v.modes == ("forward", "backward", "full")
    points = expand(v)
    assert [(p.name, p.mode) for p in points] == [("auto_rms", "forward"), ("auto_rms[mode=backward]", "backward"),
                                                 ("auto_rms[mode=full]", "full")]
    assert all(p.binding == v.binding for p in points) and not any(p.params for p in points)  # one build serves all


def test_a_swept_variants_points_are_each_measured_in_every_pass(tmp_path):
    v = load_variant(tmp_path, _manifest(tmp_path, params="\n[params]\nBLOCK = [1, 2]\n"), ProjectConfig())
    names = [p.name for p in expand(v)]
    assert names == ["auto_rms[BLOCK=1]", "auto_rms[BLOCK=1,mode=backward]", "auto_rms[BLOCK=1,mode=full]",
                     "auto_rms[BLOCK=2]", "auto_rms[BLOCK=2,mode=backward]", "auto_rms[BLOCK=2,mode=full]"]
    assert all(p.binding.kwargs == {"BLOCK": p.params["BLOCK"]} for p in expand(v))  # the mode is no keyword


def test_without_modes_a_variant_is_its_forward_alone(tmp_path):
    v = load_variant(tmp_path, _manifest(tmp_path, extra=""), ProjectConfig())
    assert v.modes == () and [p.name for p in expand(v)] == ["auto_rms"]
    again = load_variant(tmp_path, _manifest(tmp_path, extra='modes = ["forward"]'), ProjectConfig())
    assert again.modes == () and expand(again) == [again]


@pytest.mark.parametrize("extra, returns, params, key, words", [
    ('modes = ["backward"]', "false", "", "modes", "needs an entry that returns its output"),
    ('modes = ["forward", "forward"]', "true", "", "modes", "'forward' is listed twice"),
    ('modes = ["sideways"]', "true", "", "modes", "sideways"),
    ("modes = []", "true", "", "modes", ""),
    ("", "true", "\n[params]\nmode = [1, 2]\n", "params.mode", "list them as modes"),
])
def test_a_wrong_modes_key_is_invalid_with_its_key(tmp_path, extra, returns, params, key, words):
    with pytest.raises(ManifestError) as err:
        load_variant(tmp_path, _manifest(tmp_path, extra, returns, params), ProjectConfig())
    assert err.value.key.startswith(key) and words in str(err.value)


def test_the_built_in_peer_runs_in_every_pass_its_ops_variants_use(tmp_path):
    _manifest(tmp_path)
    variants, invalid = discover(tmp_path, ProjectConfig())
    peers = builtin_peers(variants)
    assert not invalid and [(p.name, p.mode, p.binding.returns) for p in peers] == [
        ("peer.rms_norm", "forward", True), ("peer.rms_norm[mode=backward]", "backward", True),
        ("peer.rms_norm[mode=full]", "full", True)]
    jobs = jobs_for(variants + peers)
    assert sorted(j.variant for j in jobs) == sorted(["auto_rms", "auto_rms[mode=backward]", "auto_rms[mode=full]",
                                                       "peer.rms_norm", "peer.rms_norm[mode=backward]",
                                                       "peer.rms_norm[mode=full]"])


def test_an_op_whose_peer_writes_its_output_gets_a_returning_peer_for_a_pass():
    from workers.core.records import Binding, Shape, Variant

    v = Variant("s", "softmax", "python", "k", (), Binding("python", "k.py:s", returns=True), ("fp32",),
                (Shape({"M": 4, "N": 8}),), devices=("cuda",), mode="backward")
    forward = Variant("s2", "softmax", "python", "k", (), Binding("python", "k.py:s"), ("fp32",),
                      (Shape({"M": 4, "N": 8}),), devices=("cuda",))
    peers = {p.mode: p for p in builtin_peers([forward, v])}
    assert peers["forward"].binding.returns is False  # torch's out= kernel, as before
    assert peers["backward"].binding.returns is True and peers["backward"].name == "peer.softmax[mode=backward]"


def test_a_pass_is_part_of_the_measurement_identity_and_a_forwards_identity_is_unchanged():
    args = ("h", "rms_norm", "M=4,N=8", "fp32", "cpu:x")
    assert identity.measurement_identity(*args) == identity.measurement_identity(*args, mode="forward")
    assert identity.measurement_identity(*args, mode="backward") != identity.measurement_identity(*args)
    assert identity.measurement_identity(*args, mode="full") != identity.measurement_identity(*args, mode="backward")


def _result(variant: str, median: float, peer: bool = False, **extra) -> dict:
    return {"variant": variant, "op": "rms_norm", "shape": "M=4,N=8", "dtype": "bf16",
            "device": "cuda:NVIDIA H100 80GB HBM3", "status": "ok", "median_s": median, "bytes_moved": 1e6,
            "flops": 0.0, "peer": peer, "diagnostic": "", "correctness": {}, **extra}


def test_a_rows_peer_is_the_peers_same_pass():
    rows = summary.with_peer([_result("v", 2e-4), _result("v[mode=backward]", 6e-4),
                              _result("peer.rms_norm", 1e-4, True), _result("peer.rms_norm[mode=backward]", 6e-4, True)])
    pct = {r["variant"]: r["pct_of_peer"] for r in rows}
    assert pct["v"] == pytest.approx(50.0) and pct["v[mode=backward]"] == pytest.approx(100.0)


def test_the_run_table_shows_median_peak_memory_and_the_launch_bound_mark():
    rows = [_result("liger_cross_entropy", 2.96e-4, launch_floor_s=2.5e-4, peak_mem_bytes=3 << 20),
            _result("peer.rms_norm", 7.4e-6, True, launch_floor_s=7e-6, peak_mem_bytes=2048),
            _result("big", 1e-3, launch_floor_s=2e-5, peak_mem_bytes=64 << 20)]
    marked = {r["variant"]: r["launch_bound"] for r in summary.with_peer(rows)}
    assert marked == {"liger_cross_entropy": True, "peer.rms_norm": True, "big": False}
    out = io.StringIO()
    summary.print_table(rows, Console(file=out, width=250), "results")
    text = out.getvalue()
    assert "peak mem" in text and "median" in text and "3 MiB" in text and "296 µs" in text
    line = next(row for row in text.splitlines() if "liger_cross_entropy" in row)
    assert "launch-bound" in line and "floor 250 µs" in line
    assert "launch-bound" not in next(row for row in text.splitlines() if row.strip().startswith("│ big"))
    assert "2 result(s) launch-bound: the median is within 2x the launch floor" in text


def test_the_commit_page_shows_peak_memory_the_floor_and_the_mark(tmp_path):
    from reports.site import write_commit_page

    rows = summary.with_peer([_result("liger_cross_entropy", 2.96e-4, launch_floor_s=2.5e-4,
                                      peak_mem_bytes=3 << 20, ci_low_s=2.9e-4, ci_high_s=3e-4),
                              _result("big", 1e-3, launch_floor_s=2e-5, peak_mem_bytes=64 << 20,
                                      ci_low_s=0.99e-3, ci_high_s=1.01e-3)])
    page = write_commit_page(tmp_path, {"sha": "a" * 40, "subject": "s", "author": "a", "authored_at": "2026"},
                             rows).read_text()
    assert "peak memory" in page and "3 MiB" in page and "64 MiB" in page
    assert page.count('class="launch-bound"') == 1 and "floor 250 µs" in page


def test_a_roofline_holds_forward_rows_only():
    from reports.roofline import rooflines

    rows = [dict(_result(name, 1e-3), flops=1e9, run_id=1) for name in ("v", "v[mode=backward]", "v[mode=full]")]
    (roof,) = rooflines(rows)
    assert [p.variant for p in roof.points] == ["v"]


def test_a_jobs_floor_and_memory_call_count_as_device_work():
    from pipeline.run.accounting import busy_s

    assert busy_s({"load_s": 0.5, "timing_s": 1.0, "launch_floor_s": 0.2, "memory_s": 0.05, "queue_s": 9.0}) == \
        pytest.approx(1.75)
