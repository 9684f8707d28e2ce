"""Peak memory over commits, from stored GPU results (the allocator's counters exist on CUDA and
ROCm only: the planted figures stand for what a GPU job stores): a +20% allocation in one
variant is a memory regression in `compare` and a step the nightly detector records, an
unchanged history raises no memory alarm, and a bisection names the commit of a memory step."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.commands.detect import detect
from pipeline.history import bisect as bis
from pipeline.history import causes, dashboard, series
from pipeline.history import compare as cmp
from pipeline.history.memory import steps, threshold
from pipeline.history.regressions import MEMORY, Regression, RegressionStore
from pipeline.store import Store
from workers.core.records import Result

DEVICE = "cuda:NVIDIA H100 80GB HBM3"
SHAPE = "M=4096,V=32000"
MIB = 1 << 20
BASE = {"liger_cross_entropy": 48 * MIB, "peer.cross_entropy": 96 * MIB, "liger_rms_norm": 64 * MIB}
PLANTED_AT = 7  # the commit whose liger_cross_entropy allocates 20% more
N_COMMITS = 12


def _sha(i: int) -> str:
    return f"{i:040x}"


def peak(variant: str, i: int, planted: bool) -> int:
    """The variant's peak memory at commit i, with the jitter of the allocator's rounding (a few
    512-byte blocks more or less from one build to the next)."""
    grown = planted and variant == "liger_cross_entropy" and i >= PLANTED_AT
    return (int(BASE[variant] * 1.2) if grown else BASE[variant]) + 512 * ((i * 7) % 5)


def result(variant: str, i: int, planted: bool, seed: int = 0) -> Result:
    rng = np.random.default_rng(seed + 1000 * i + len(variant))
    samples = tuple(2e-4 * (1 + 0.002 * rng.standard_normal(30)))
    # the planted variant's build changes at the plant; the others' builds never do
    identity = f"{variant}-{'b' if planted and variant == 'liger_cross_entropy' and i >= PLANTED_AT else 'a'}"
    return Result(variant=variant, op="cross_entropy", backend="triton", shape=SHAPE, dtype="bf16", device=DEVICE,
                  status="ok", median_s=float(np.median(samples)), ci_low_s=min(samples), ci_high_s=max(samples),
                  samples_s=samples, bytes_moved=2.6e8, peer=variant.startswith("peer."), identity=identity,
                  launch_floor_s=3e-5, peak_mem_bytes=peak(variant, i, planted))


def history_store(path, planted: bool) -> Store:
    store = Store(path)
    for i in range(N_COMMITS):
        store.record_commit(_sha(i), f"commit {i}", "A <a@x>", f"2026-01-{i + 1:02d}", [_sha(i - 1)] if i else [])
        run = store.start_run(_sha(i), False, "nightly", "", "", "nightly")
        for variant in BASE:
            store.record_result(run, _sha(i), False, result(variant, i, planted))
    return store


ORDER = [_sha(i) for i in range(N_COMMITS)]


# -- the threshold ----------------------------------------------------------------------------------

def test_a_memory_threshold_is_a_share_and_a_size():
    assert threshold.parse("5%,1MiB") == threshold.MemoryThreshold(0.05, MIB)
    assert threshold.parse("2MiB, 10%") == threshold.MemoryThreshold(0.10, 2 * MIB)
    assert threshold.parse("1%") == threshold.MemoryThreshold(0.01, threshold.DEFAULT.bytes)
    assert threshold.parse("512KiB").bytes == 512 << 10 and threshold.parse("3MB").bytes == 3_000_000
    for bad, said in (("5", "has no unit"), ("five%", "neither a share"), ("1%,2%,3%", "a share, a size or both")):
        with pytest.raises(ValueError, match=said):
            threshold.parse(bad)


def test_a_growth_counts_only_beyond_both_the_share_and_the_bytes():
    t = threshold.DEFAULT
    assert threshold.grew(48 * MIB, int(48 * MIB * 1.2), t)
    assert not threshold.grew(4096, 8192, t)  # doubled, but a few KiB: the allocator's rounding
    assert not threshold.grew(40 << 30, (40 << 30) + 2 * MIB, t)  # 2 MiB of 40 GiB
    assert not threshold.grew(48 * MIB, 40 * MIB, t) and not threshold.grew(None, MIB, t)


def test_the_steps_of_a_series_are_its_level_changes_upwards():
    points = [(_sha(i), 100 * MIB) for i in range(5)] + [(_sha(i), 130 * MIB) for i in range(5, 8)] + \
        [(_sha(8), 90 * MIB), (_sha(9), 91 * MIB)]
    (step,) = steps.find(points)
    assert (step.good_sha, step.bad_sha, step.before, step.after) == (_sha(4), _sha(5), 100 * MIB, 130 * MIB)
    assert step.change == pytest.approx(0.3)
    assert steps.find([(_sha(i), 100 * MIB + 4096 * (i % 3)) for i in range(10)]) == []  # rounding is no step


# -- compare ----------------------------------------------------------------------------------------

def _sides(store: Store, i: int) -> dict:
    return cmp.pool(store.latest_results(_sha(i)))


def test_compare_reports_a_planted_allocation_as_a_memory_regression(tmp_path):
    with history_store(tmp_path / "r.db", planted=True) as store:
        rows = cmp.compare_sides(_sides(store, PLANTED_AT - 1), _sides(store, PLANTED_AT), None)
    report = cmp.Report(_sha(PLANTED_AT - 1), "base", _sha(PLANTED_AT), "head", None, 1, tuple(rows))
    (grown,) = report.memory_regressions
    assert grown.variant == "liger_cross_entropy" and grown.memory == cmp.MEMORY_GREW
    assert grown.kind != "slower"  # its time did not move: memory alone makes it a regression
    assert cmp.exit_status(report) == 1
    md = cmp.render_markdown(report)
    assert "### flopwatch: regressions found" in md and "1 memory regression(s)" in md
    assert "peak memory 48 MiB → 57.6 MiB (+20.0%), memory regression" in md
    assert rows[0] is grown  # listed with the regressions, first
    assert cmp.as_json(report)["memory_regressions"] == 1


def test_an_unchanged_run_gives_no_memory_alarm(tmp_path):
    with history_store(tmp_path / "r.db", planted=False) as store:
        for i in range(1, N_COMMITS):
            rows = cmp.compare_sides(_sides(store, i - 1), _sides(store, i), None)
            report = cmp.Report(_sha(i - 1), "", _sha(i), "", None, 1, tuple(rows))
            assert report.memory_regressions == [] and cmp.exit_status(report) == 0
            assert "memory regression," not in cmp.render_markdown(report)


def test_a_memory_growth_below_the_threshold_given_is_no_alarm(tmp_path):
    with history_store(tmp_path / "r.db", planted=True) as store:
        rows = cmp.compare_sides(_sides(store, PLANTED_AT - 1), _sides(store, PLANTED_AT), None,
                                 threshold.parse("25%"))
    assert not [r for r in rows if r.memory]
    assert any("peak memory 48 MiB → 57.6 MiB (+20.0%)" == r.memory_text for r in rows)  # still shown


def test_launch_bound_sides_are_marked_in_compare(tmp_path):
    with history_store(tmp_path / "r.db", planted=False) as store:
        rows = cmp.compare_sides(_sides(store, 0), _sides(store, 1), None)
    # a median of 0.2 ms over a floor of 30 µs is no launch-bound row; a floor of 0.15 ms is
    assert not any(r.head.launch_bound for r in rows)
    bound = cmp.Side("ok", (2e-4,) * 10, bytes_moved=1e6, launch_floor_s=1.5e-4)
    assert bound.launch_bound and cmp.format_rate(bound).endswith("(launch-bound)")


# -- the nightly detector ---------------------------------------------------------------------------

def test_the_detector_finds_the_planted_memory_step_and_only_it(tmp_path):
    with history_store(tmp_path / "r.db", planted=True) as store:
        found = detect(store, ORDER, None)
        memory = [r for r, _ in found.recorded if r.metric == MEMORY]
        assert [(r.variant, r.good_sha, r.bad_sha) for r in memory] == \
            [("liger_cross_entropy", _sha(PLANTED_AT - 1), _sha(PLANTED_AT))]
        (step,) = memory
        assert step.change == pytest.approx(0.2, abs=1e-3) and step.rate_before == pytest.approx(48 * MIB, abs=4096)
        assert step.label == "+20.0% peak memory"
        assert not [r for r, _ in found.recorded if r.metric != MEMORY]  # no slowdown was planted
        (cause,) = found.causes
        assert cause.culprit["sha"] == _sha(PLANTED_AT)  # adjacent commits: the bad end is the culprit
        again = detect(store, ORDER, None)  # detecting again updates, never doubles
        assert len(RegressionStore(store).all()) == 1 and not any(new for _, new in again.recorded)


def test_an_unchanged_history_gives_no_memory_step(tmp_path):
    with history_store(tmp_path / "r.db", planted=False) as store:
        found = detect(store, ORDER, None)
    assert [r for r, _ in found.recorded if r.metric == MEMORY] == []


def test_a_memory_step_is_open_until_the_memory_comes_back():
    line = [{"sha": _sha(i)} for i in range(N_COMMITS)]
    rows = [{"commit_sha": _sha(i), "variant": "v", "shape": SHAPE, "dtype": "bf16", "device": DEVICE,
             "status": "ok", "samples": [1e-4] * 5, "bytes_moved": 1e6, "dirty": 0,
             "peak_mem_bytes": 120 * MIB if 5 <= i < 9 else 100 * MIB} for i in range(N_COMMITS)]
    (s,) = series.build_series(rows, line)
    reg = Regression("v", SHAPE, "bf16", DEVICE, _sha(4), _sha(5), 0.2, 100 * MIB, 120 * MIB, 0.0, id=1, metric=MEMORY)
    assert dashboard.open_regressions([s], [reg], {}, ORDER) == ()  # back to 100 MiB at the newest commit
    (s_open,) = series.build_series([dict(r, peak_mem_bytes=120 * MIB) if r["commit_sha"] >= _sha(5) else r
                                     for r in rows], line)
    (still,) = dashboard.open_regressions([s_open], [reg], {}, ORDER)
    assert still.latest_change == pytest.approx(0.2)


def test_a_range_with_a_slowdown_and_a_memory_step_is_bisected_once_per_metric():
    slow = Regression("v", SHAPE, "bf16", DEVICE, _sha(1), _sha(5), -0.1, 1.0, 0.9, 0.01, id=1)
    grown = Regression("v", SHAPE, "bf16", DEVICE, _sha(1), _sha(5), 0.3, 1.0, 1.3, 0.0, id=2, metric=MEMORY)
    plan = causes.bisection_plan([slow, grown])
    assert sorted((p.metric, p.ids) for p in plan) == [("memory", (2,)), ("time", (1,))]


def test_the_feed_and_pages_name_a_memory_step(tmp_path):
    from pipeline.commands.publish import write_site

    with history_store(tmp_path / "r.db", planted=True) as store:
        detect(store, ORDER, None)
        write_site(store, tmp_path / "site", order=ORDER)
    site = tmp_path / "site"
    feed = json.loads((site / "regressions.json").read_text())
    assert [x["metric"] for x in feed["regressions"]] == ["memory"]
    assert "+20.0% peak memory" in (site / "regressions.html").read_text()
    index = (site / "index.html").read_text()
    assert "48 MiB → 57.6 MiB" in index and "+20.0% peak memory" in index
    trend = next(site.glob("trend-liger_cross_entropy-*.html")).read_text()
    assert "peak memory" in trend and "57.6 MiB" in trend and "+20.0% peak memory between" in trend


def test_the_exported_table_has_each_results_floor_mark_and_memory(tmp_path):
    from pipeline.history.frame import results_frame

    with history_store(tmp_path / "r.db", planted=True) as store:
        frame = results_frame(store)
    planted = frame[(frame.variant == "liger_cross_entropy") & (frame.commit_sha == _sha(PLANTED_AT))].iloc[0]
    assert planted.peak_mem_bytes == peak("liger_cross_entropy", PLANTED_AT, True)
    assert planted.launch_floor_s == pytest.approx(3e-5) and not planted.launch_bound


# -- bisect -----------------------------------------------------------------------------------------

def _evaluate(figures: dict, fail: set = frozenset()):
    calls = []

    def evaluate(sha: str) -> bis.Measurement:
        calls.append(sha)
        if sha in fail:
            return bis.Measurement(sha, False, reason="build_failed: planted")
        return bis.Measurement(sha, True, (float(figures[sha]),))

    return evaluate, calls


def test_bisect_finds_the_commit_of_a_planted_memory_step():
    figures = {_sha(i): peak("liger_cross_entropy", i, planted=True) for i in range(N_COMMITS)}
    evaluate, calls = _evaluate(figures, fail={_sha(PLANTED_AT - 2)})
    search = bis.MemoryBisection(ORDER, evaluate)
    outcome = search.run()
    assert outcome.reproduced and outcome.first_bad == _sha(PLANTED_AT)
    assert outcome.ends.verdict == bis.GREW and outcome.ends.change == pytest.approx(0.2, abs=1e-3)
    assert len(set(calls)) == len(calls)  # deterministic: every commit measured once
    assert outcome.evaluations <= bis.bound(N_COMMITS - 1) + 1  # + the skipped commit
    report = bis.Report("liger_cross_entropy", SHAPE, 0.05, tuple((s, "") for s in ORDER), outcome, metric="memory")
    text = bis.render_text(report)
    assert "(peak memory): first bad commit" in text and "48 MiB → 57.6 MiB" in text


def test_a_memory_bisection_of_an_unchanged_range_does_not_reproduce():
    figures = {_sha(i): peak("liger_cross_entropy", i, planted=False) for i in range(N_COMMITS)}
    outcome = bis.MemoryBisection(ORDER, _evaluate(figures)[0]).run()
    assert not outcome.reproduced and outcome.first_bad is None
    assert outcome.message.startswith("did not reproduce")
