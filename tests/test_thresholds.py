"""Default thresholds per device kind: compare, detect and bisect judge each series with the
default of its device kind unless --threshold is given."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.commands import common
from pipeline.history import compare as cmp
from pipeline.history import series as history
from pipeline.project import config

SHAPE = "M=4096,N=4096,K=4096"


def _paired(seconds: float, change: float, seed: int) -> tuple[cmp.Side, cmp.Side]:
    """A paired series: head = base × (1 + change), with 0.05% call-to-call noise."""
    rng = np.random.default_rng(seed)
    base = seconds * (1 + 0.0005 * rng.standard_normal(200))
    head = base * (1 + change) * (1 + 0.0005 * rng.standard_normal(200))
    return cmp.Side("ok", tuple(base), paired=True), cmp.Side("ok", tuple(head), paired=True)


def test_table_names_every_kind_and_both_uses():
    for kind in ("cpu", "cuda", "rocm"):
        for use in ("compare", "history"):
            assert 0.0 < config.default_threshold(kind, use) < 1.0
    assert config.default_threshold("cuda:NVIDIA H100 80GB HBM3", "compare") == \
        config.DEFAULT_THRESHOLDS["cuda"]["compare"]
    assert config.default_threshold("tpu:v5", "compare") == config.DEFAULT_THRESHOLDS["cpu"]["compare"]
    with pytest.raises(ValueError):
        config.default_threshold("cuda", "nightly")


def test_compare_judges_each_series_with_its_kind_default():
    cpu_t = config.default_threshold("cpu", "compare")
    cuda_t = config.default_threshold("cuda", "compare")
    assert cuda_t < cpu_t, "the GPU default is the finer one"
    change = (cuda_t + cpu_t) / 2  # beyond the GPU default, within the CPU one
    base, head = {}, {}
    for i, device in enumerate(("cpu:x", "cuda:NVIDIA H100")):
        key = ("k", SHAPE, "bf16", device)
        base[key], head[key] = _paired(1e-3, change, seed=i)
    rows = {r.device.split(":")[0]: r for r in cmp.compare_sides(base, head, None)}
    assert rows["cuda"].kind == "slower" and rows["cuda"].threshold == cuda_t
    assert rows["cpu"].kind != "slower" and rows["cpu"].threshold == cpu_t
    report = cmp.Report("a" * 40, "b", "c" * 40, "d", None, 1, tuple(rows.values()))
    text = cmp.render_markdown(report)
    assert f"±{cuda_t:.1%} (cuda)" in text and f"±{cpu_t:.1%} (cpu)" in text
    # --threshold applies to every series alike
    given = {r.device.split(":")[0]: r for r in cmp.compare_sides(base, head, cpu_t * 2)}
    assert given["cuda"].kind != "slower" and given["cuda"].threshold == cpu_t * 2
    assert "±" + f"{cpu_t * 2:.1%}" in cmp.render_markdown(cmp.Report("a" * 40, "b", "c" * 40, "d", cpu_t * 2, 1,
                                                                      tuple(given.values())))


def _commit(i):
    return {"sha": f"{i:040x}", "subject": f"c{i}", "author": "A <a@x>", "authored_at": f"2025-01-{i + 1:02d}"}


def test_detect_uses_the_history_default_of_each_series_kind():
    cpu_t = config.default_threshold("cpu", "history")
    cuda_t = config.default_threshold("cuda", "history")
    step = (cpu_t + cuda_t) / 2
    rows = []
    for device in ("cpu:x", "cuda:NVIDIA H100"):
        for i in range(12):
            rng = np.random.default_rng(i)
            seconds = 1e-3 * (1 + step if i >= 6 else 1.0)
            rows.append({"commit_sha": f"{i:040x}", "variant": "k", "shape": SHAPE, "dtype": "bf16",
                         "device": device, "status": "ok", "flops": 1e9, "dirty": 0,
                         "samples": list(seconds * (1 + 0.0005 * rng.standard_normal(25))),
                         "resources": {}, "counters": {}})
    series = history.build_series(rows, [_commit(i) for i in range(12)])
    found = history.find_regressions(series, threshold=None)
    assert [r.device for r in found] == ["cuda:NVIDIA H100"]
    assert {r.device for r in history.find_regressions(series, threshold=cuda_t / 2)} == {"cpu:x", "cuda:NVIDIA H100"}


def test_threshold_option_is_none_when_not_given():
    assert common.threshold(None) is None
    assert common.threshold("2%") == pytest.approx(0.02)
    with pytest.raises(common.UsageError):
        common.threshold("lots")
