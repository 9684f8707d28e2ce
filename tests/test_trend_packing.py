"""Trend figures of long histories: shared x values as runs, y values packed as integer
differences; what the browser unpacks must be the rounded values, never a longer float."""

from __future__ import annotations

import json

import numpy as np
import pytest
from site_text import long_floats, significant_digits

from reports.figures import _columns, packed, runs, trend_figure, unpack


def test_runs_of_consecutive_positions():
    assert runs([0, 1, 2, 3]) == [[0, 4]]
    assert runs([3, 4, 7, 8, 9, 12]) == [[3, 2], [7, 3], [12, 1]]
    assert runs([]) == []


@pytest.mark.parametrize("digits", [3, 4])
def test_packed_values_unpack_to_at_most_the_digits_and_within_half_a_unit(digits):
    rng = np.random.default_rng(4)
    values = list(164.6 * (1 + 0.01 * rng.standard_normal(1095)))
    values[10] = None
    out = unpack(packed(values, digits))
    assert out[10] is None and len(out) == len(values)
    unit = 10.0 ** (np.floor(np.log10(max(v for v in values if v))) - (digits - 1))
    for v, u in zip(values, out):
        if v is not None:
            assert abs(u - v) <= unit / 2 + 1e-9
            assert significant_digits(repr(u)) <= digits, u
    # Smaller than the rounded numbers themselves (at 1% noise: differences of a few tens of units).
    compact = {"separators": (",", ":")}
    plain = [float(f"{v:.{digits}g}") for v in values if v]
    assert len(json.dumps(packed(values, digits), **compact)) < 0.75 * len(json.dumps(plain, **compact))


def test_large_and_tiny_scales_round_trip():
    for values in ([2.95e12, 3.1e12, 2.7e12], [1.2e-7, 1.5e-7, None, 0.9e-7], [0.0, 0.0]):
        out = unpack(packed(values))
        for v, u in zip(values, out):
            assert (u is None) == (v is None)
            if v is not None:
                assert u == pytest.approx(v, rel=1e-3, abs=1e-12)
        assert not long_floats(" ".join(repr(u) for u in out if u is not None))


class P:
    def __init__(self, sha, rate, counters, resources):
        self.sha, self.rate, self.rate_lo, self.rate_hi = sha, rate, rate * 0.99, rate * 1.01
        self.counters, self.resources = counters, resources


def test_columns_follow_runs_of_shared_resources_and_resources_win_on_names():
    shared, bigger = {"kernels.k.vgprs": 128.0}, {"kernels.k.vgprs": 160.0}
    points = [P("a", 1.0, {"l2_hit_pct": 60.0}, shared), P("b", 1.0, {"l2_hit_pct": 61.0}, shared),
              P("c", 1.0, {}, bigger), P("d", 1.0, {"kernels.k.vgprs": 1.0}, bigger)]
    cols = _columns(points)
    assert cols["kernels.k.vgprs"] == [128.0, 128.0, 160.0, 160.0]
    assert cols["l2_hit_pct"] == [60.0, 61.0, None, None]


def test_a_trend_figure_shares_its_x_and_packs_its_y():
    points = [P(f"s{i}", 1e12 * (1 + 0.001 * i), {"l2_hit_pct": 60.0 + i % 3}, {"kernels.k.vgprs": 128.0})
              for i in range(50)]
    fig, panels = trend_figure(points, {f"s{i}": i + 5 for i in range(50)}, "FLOP/s", "amd")
    assert fig["layout"]["fwX"] == [[5, 50]]
    assert all(t["x"] == "fwX" for t in fig["data"][:3])
    rates = unpack(fig["data"][2]["y"])
    assert rates[0] == pytest.approx(1.0, rel=1e-3) and rates[-1] == pytest.approx(1.049, rel=1e-3)  # TFLOP/s
    assert [p.label for p in panels] == ["L2 hit"]  # the constant VGPR count is no panel
