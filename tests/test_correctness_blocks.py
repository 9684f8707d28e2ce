"""A large output is judged in blocks of whole tile rows (`workers.measure.correctness.BLOCK_ELEMENTS`),
so a check's fp64 temporaries stay bounded: the figures must be the same as judged at once."""

from __future__ import annotations

import pytest
import torch

from workers.measure import correctness


@pytest.mark.parametrize("shape", [(300, 200), (5, 7, 130), (10000,), (130, 70)])
def test_blocks_give_the_figures_of_one_pass(monkeypatch, shape):
    torch.manual_seed(0)
    ref = torch.randn(shape, dtype=torch.float64)
    g = correctness.guarded_output(shape, torch.float32, "cpu")
    g.out.copy_(ref.float() + 1e-3 * torch.randn(shape))
    g.out.view(-1)[17] = float("nan")
    g.out.view(-1).view(torch.int32)[4500 % g.out.numel()] = 0x7FA00BAD  # never written
    g.out.view(-1)[-5] += 3.0  # one wrong tile near the end
    whole = correctness.evaluate(g, ref, 1e-5, 1e-4)
    monkeypatch.setattr(correctness, "BLOCK_ELEMENTS", 64 * 64)
    blocks = correctness.evaluate(g, ref, 1e-5, 1e-4)
    assert whole["first_nonfinite"] == list(torch.unravel_index(torch.tensor(17), shape)) if len(shape) > 1 \
        else whole["first_nonfinite"] == [17]
    assert whole["unwritten"] == 1 and whole["nonfinite"] == 1 and whole["bad_tiles"]
    for key in ("unwritten", "first_unwritten", "nonfinite", "first_nonfinite", "tile_map", "bad_tiles",
                "max_abs_err", "ref_max_abs", "rel_fro_err", "passed"):
        assert blocks[key] == whole[key], key


def test_a_correct_output_in_blocks_passes_with_the_same_error(monkeypatch):
    ref = torch.randn((512, 300), dtype=torch.float64)
    g = correctness.guarded_output((512, 300), torch.float32, "cpu")
    g.out.copy_(ref.float())
    whole = correctness.evaluate(g, ref, 1e-6, 1e-5)
    monkeypatch.setattr(correctness, "BLOCK_ELEMENTS", 64 * 300)
    blocks = correctness.evaluate(g, ref, 1e-6, 1e-5)
    assert whole["passed"] and blocks["passed"]
    assert blocks["rel_fro_err"] == pytest.approx(whole["rel_fro_err"], rel=1e-12)


def test_a_shape_that_fits_the_device_waits_for_memory_another_job_holds(monkeypatch):
    """The job before it on the slot is still ending: its memory comes back within the wait."""
    from workers.measure import fit

    free = iter([1 << 30, 1 << 30, 64 << 30])
    monkeypatch.setattr(fit, "bytes_available", lambda kind: next(free))
    monkeypatch.setattr(fit, "bytes_total", lambda kind: 80 << 30)
    op = type("Op", (), {"bytes_moved": staticmethod(lambda dims, itemsize: 8 << 30)})
    assert fit.too_big(op, {}, 4, "cuda", wait_s=5.0) == ""
    monkeypatch.setattr(fit, "bytes_available", lambda kind: 1 << 30)
    said = fit.too_big(op, {}, 4, "cuda", wait_s=0.3)
    assert "not run" in said and "other processes held the rest for the 0.3 s this job waited" in said
    monkeypatch.setattr(fit, "bytes_total", lambda kind: 4 << 30)  # larger than the device: no wait
    assert "other processes" not in fit.too_big(op, {}, 4, "cuda", wait_s=30.0)


def test_a_huge_wrong_output_keeps_its_worst_tiles_and_a_coarser_map(monkeypatch):
    monkeypatch.setattr(correctness, "MAX_MAP_CELLS", 16)
    monkeypatch.setattr(correctness, "MAX_BAD_TILES", 3)
    ref = torch.zeros((64 * 10, 64 * 6), dtype=torch.float64)
    g = correctness.guarded_output(tuple(ref.shape), torch.float32, "cpu")
    g.out.copy_(ref.float() + 1.0)  # every tile wrong
    g.out[64 * 9 + 5, 64 * 5 + 7] = 9.0  # the worst, in the last tile
    ref[0, 0] = 1.0  # a scale for atol
    f = correctness.evaluate(g, ref, 1e-5, 1e-4)
    assert f["tile_count"] == 60 and f["bad_tile_count"] == 60 and not f["passed"]
    assert f["bad_tiles"][0] == {"row": 9, "col": 5, "max_abs_err": 9.0} and len(f["bad_tiles"]) == 3
    assert f["map_tile"] == 128 and (len(f["tile_map"]), len(f["tile_map"][0])) == (5, 3)  # pooled by 2
    assert max(max(row) for row in f["tile_map"]) == 9.0  # the worst still shows
    text = correctness.diagnose(f, tuple(ref.shape))
    assert text.startswith("60 of 60 tiles wrong: tile (9, 5) = C[576:640, 320:384] max abs err 9.0")
