"""A series measured at neither commit (skipped: no device or toolchain of its kind here; lost
with its node) is `not run`, not `same` ("measured, no change"): in the table, the markdown,
the JSON, the compare page and the summary count; never a regression."""

from __future__ import annotations

import json

import numpy as np

from pipeline.history import compare as cmp
from reports.history_pages import write_compare_page

SHAPE = "M=256,N=256,K=256"
NO_ROCM = "no rocm device in the cluster to run it (the build and its static analysis are stored)"


def _side(status="ok", seconds=1e-3, seed=0, diagnostic="", resources=None) -> cmp.Side:
    rng = np.random.default_rng(seed)
    samples = tuple(seconds * (1 + 0.002 * rng.standard_normal(30))) if status == "ok" else ()
    return cmp.Side(status, samples, flops=2 * 256**3, resources=resources or {}, diagnostic=diagnostic)


def _key(variant, device="cpu:test"):
    return variant, SHAPE, "fp32", device


def _report(base: dict, head: dict, extra_rows=()) -> cmp.Report:
    rows = cmp.merge_rows(cmp.compare_sides(base, head, 0.03), list(extra_rows))
    return cmp.Report("a" * 40, "base", "b" * 40, "docs only", 0.03, 1, tuple(rows))


def _skipped(seed=0) -> cmp.Side:
    return _side("skipped", diagnostic=NO_ROCM, seed=seed)


def _stored(variant, status, diagnostic="", device="rocm:?") -> dict:
    """A stored result row, as `unchanged_rows` receives it for a series not re-timed."""
    return {"variant": variant, "shape": SHAPE, "dtype": "fp32", "device": device, "status": status,
            "samples": [1e-3] * 10 if status == "ok" else [], "flops": 1.0, "diagnostic": diagnostic}


def _docs_only_on_a_gpu_machine() -> cmp.Report:
    """Two HIP series nothing here can run, one CPU series measured with no change, one slower."""
    hip_a, hip_b = _key("hip_naive", "rocm:?"), _key("hip_tiled", "rocm:?")
    base = {hip_a: _skipped(), hip_b: _skipped(), _key("cpp_naive"): _side(seed=1),
            _key("cpp_blocked"): _side(seed=3)}
    head = {hip_a: _skipped(), hip_b: _skipped(), _key("cpp_naive"): _side(seed=2),
            _key("cpp_blocked"): _side(seconds=1.3e-3, seed=4)}
    return _report(base, head)


def test_skipped_at_both_commits_is_not_run_with_the_reason_and_sorts_last():
    report = _docs_only_on_a_gpu_machine()
    kinds = [(r.variant, r.kind) for r in report.rows]
    assert kinds == [("cpp_blocked", "slower"), ("cpp_naive", "same"), ("hip_naive", "not run"),
                     ("hip_tiled", "not run")]
    hip = report.rows[2]
    assert hip.comparison is None and hip.reason == f"not run here: {NO_ROCM}"
    assert report.rows[1].reason == ""  # a measured row carries no such reason
    assert [r.variant for r in report.not_run] == ["hip_naive", "hip_tiled"]


def test_not_run_sorts_after_every_measured_kind():
    base = {_key("gone"): _side(seed=1), _key("hip"): _skipped(), _key("same"): _side(seed=2)}
    head = {_key("new"): _side(seed=3), _key("hip"): _skipped(), _key("same"): _side(seed=4)}
    untimed = cmp.unchanged_rows({_key("kept"): _stored("kept", "ok", device="cpu:test")},
                                 {_key("kept"): "same build: stored result of 1234567890"}, 0.03)
    kinds = [r.kind for r in _report(base, head, untimed).rows]
    assert kinds == ["same", "unchanged", "new", "gone", "not run"]


def test_markdown_names_it_and_counts_it_apart_in_the_summary_line():
    md = cmp.render_markdown(_docs_only_on_a_gpu_machine())
    assert "1 slower, 0 newly failing, 4 series (2 not run here)." in md
    lines = [line for line in md.splitlines() if line.startswith("| ")]
    hip = [line for line in lines if "hip_naive" in line]
    cells = "| not run | hip_naive | 256×256×256 | fp32 | rocm | skipped | skipped |  |  |"
    assert hip == [f"{cells} not run here: {NO_ROCM} |"]
    assert not any(line.startswith("| same | hip_") for line in lines)
    assert lines[-1].startswith("| not run | hip_tiled |")  # after every measured row
    calm = cmp.render_markdown(_report({_key("k"): _side(seed=1)}, {_key("k"): _side(seed=2)}))
    assert "1 series." in calm and "not run" not in calm


def test_not_run_never_fails_the_comparison():
    only_hip = _report({_key("hip"): _skipped()}, {_key("hip"): _skipped()})
    assert [r.kind for r in only_hip.rows] == ["not run"]
    assert only_hip.regressions == [] and cmp.exit_status(only_hip) == 0
    assert "no regressions" in cmp.render_markdown(only_hip).splitlines()[0]
    assert cmp.exit_status(_docs_only_on_a_gpu_machine()) == 1  # the slower CPU series still counts


def test_json_carries_the_kind_the_reason_and_the_count():
    out = json.loads(json.dumps(cmp.as_json(_docs_only_on_a_gpu_machine()), default=str))
    rows = {r["variant"]: r for r in out["rows"]}
    assert rows["hip_naive"]["kind"] == "not run"
    assert rows["hip_naive"]["reason"] == f"not run here: {NO_ROCM}"
    assert rows["hip_naive"]["comparison"] is None
    assert rows["cpp_naive"]["kind"] == "same" and rows["cpp_naive"]["reason"] == ""
    assert out["not_run"] == 2 and out["not_retimed"] == 0


def test_a_stored_skipped_result_of_the_same_build_is_not_run_not_unchanged():
    results = (("hip_skipped", "skipped", NO_ROCM), ("hip_ok", "ok", ""),
               ("hip_broken", "build_failed", "error"))
    rows = {_key(v, "rocm:?"): _stored(v, s, d) for v, s, d in results}
    notes = {k: "same build: stored result of 1234567890" for k in rows}
    report = cmp.Report("a" * 40, "b", "b" * 40, "h", 0.03, 1, tuple(cmp.unchanged_rows(rows, notes, 0.03)))
    kinds = {r.variant: r.kind for r in report.rows}
    assert kinds == {"hip_skipped": "not run", "hip_ok": "unchanged", "hip_broken": "failing"}
    skipped = next(r for r in report.rows if r.variant == "hip_skipped")
    assert skipped.reason == f"not run here: {NO_ROCM}" and skipped.note.startswith("same build")
    md = cmp.render_markdown(report)
    assert "3 series (1 not run here)." in md
    cells = "| not run | hip_skipped | 256×256×256 | fp32 | rocm | skipped | skipped |  |  |"
    assert f"{cells} same build: stored result of 1234567890; not run here: {NO_ROCM} |" in md
    assert cmp.as_json(report)["not_run"] == 1 and cmp.exit_status(report) == 0


def test_lost_at_both_commits_is_not_run_with_its_own_diagnostic():
    lost = _side("lost", diagnostic="not measured: its Ray node was lost")
    [row] = _report({_key("k"): lost}, {_key("k"): lost}).rows
    assert row.kind == "not run" and row.reason == "not measured: its Ray node was lost"


def test_measured_at_one_commit_only_says_which_and_is_not_counted_as_not_run():
    report = _report({_key("starts"): _skipped(), _key("stops"): _side(seed=1)},
                     {_key("starts"): _side(seed=2), _key("stops"): _skipped()})
    kinds = {r.variant: r.kind for r in report.rows}
    assert kinds == {"starts": "not run at base", "stops": "not run at head"}
    assert all(r.reason == f"not run here: {NO_ROCM}" for r in report.rows)
    assert report.not_run == [] and cmp.exit_status(report) == 0
    assert "2 series." in cmp.render_markdown(report)


def test_skipped_at_one_side_and_failing_or_missing_at_the_other_keeps_its_word():
    broken = _side("build_failed", diagnostic="error: expected ';'")
    report = _report({_key("breaks"): _skipped(), _key("fixed"): broken, _key("gone"): _skipped()},
                     {_key("breaks"): broken, _key("fixed"): _skipped(), _key("new"): _skipped()})
    kinds = {r.variant: r.kind for r in report.rows}
    # failing at base and skipped at head: nothing measured says it was fixed
    assert kinds == {"breaks": "newly failing", "fixed": "not run at head", "gone": "gone", "new": "new"}
    assert {r.variant: r.reason for r in report.rows if r.reason} == {"fixed": f"not run here: {NO_ROCM}"}
    assert cmp.exit_status(report) == 1  # "breaks" is newly failing


def test_compare_page_shows_the_word_and_the_reason(tmp_path):
    page = write_compare_page(tmp_path, _docs_only_on_a_gpu_machine()).read_text()
    assert '<td class="muted">not run</td>' in page and f"not run here: {NO_ROCM}" in page
    assert "2 of 4 series not run here at either commit" in page
    assert ">same</td>" in page  # the measured CPU series keeps its verdict
