"""Regressions grouped by cause: one entry per culprit commit or unresolved range, its series
worst first; one bisection per range in `nightly`."""

from __future__ import annotations

from pipeline.history import causes, dashboard
from pipeline.history.regressions import Regression

SHAS = [f"{i:040x}" for i in range(20)]
COMMITS = {sha: {"sha": sha, "subject": f"commit {i}", "author": "A <a@x>", "authored_at": "2025-01-01"}
           for i, sha in enumerate(SHAS)}


def _reg(i, variant, good, bad, change, culprit=None, bisect=None, shape="M=1"):
    return Regression(variant, shape, "bf16", "rocm:MI300X", SHAS[good], SHAS[bad], change, 2.0, 2.0 * (1 + change),
                      0.005, id=i, culprit_sha=SHAS[culprit] if culprit is not None else None, bisect=bisect)


def _open(regressions):
    # No series: none has recovered, so every stored regression is open.
    return dashboard.open_regressions([], regressions, COMMITS, SHAS)


def test_series_of_one_culprit_make_one_entry_worst_first():
    regs = [_reg(1, "a", 4, 5, -0.05), _reg(2, "b", 4, 5, -0.09), _reg(3, "c", 4, 5, -0.07, shape="M=2")]
    [cause] = causes.group(_open(regs), COMMITS)
    assert cause.how == causes.ONLY_COMMIT and cause.culprit["subject"] == "commit 5"
    assert [o.regression.variant for o in cause.slowed] == ["b", "c", "a"] and cause.worst_change == -0.09


def test_a_bisected_culprit_gathers_series_from_different_ranges():
    bisect = {"message": "found", "evaluations": 4}
    regs = [_reg(1, "a", 2, 9, -0.06, culprit=6, bisect=bisect), _reg(2, "b", 5, 7, -0.04, culprit=6, bisect=bisect),
            _reg(3, "c", 2, 9, -0.20)]  # same range as a, but not bisected: it may have another cause
    first, second = causes.group(_open(regs), COMMITS)
    assert first.how == causes.UNRESOLVED and first.culprit is None and [o.regression.variant for o in first.slowed] \
        == ["c"] and first.between == 7
    assert second.how == causes.BISECTED and second.culprit["sha"] == SHAS[6]
    assert [o.regression.variant for o in second.slowed] == ["a", "b"] and second.bisected_on.variant == "a"


def test_unresolved_ranges_group_only_when_equal():
    regs = [_reg(1, "a", 2, 6, -0.06), _reg(2, "b", 2, 6, -0.08), _reg(3, "c", 3, 6, -0.07)]
    grouped = causes.group(_open(regs), COMMITS)
    assert [(c.good["sha"], c.bad["sha"], len(c.slowed)) for c in grouped] == [(SHAS[2], SHAS[6], 2),
                                                                              (SHAS[3], SHAS[6], 1)]
    assert all(c.how == causes.UNRESOLVED for c in grouped)


def test_range_of_one_commit_is_its_culprit_without_a_bisection():
    sha, how = causes.culprit_of(_reg(1, "a", 7, 8, -0.1), between=1)
    assert (sha, how) == (SHAS[8], causes.ONLY_COMMIT)
    assert causes.culprit_of(_reg(1, "a", 7, 9, -0.1), between=2) == (None, causes.UNRESOLVED)
    assert causes.culprit_of(_reg(1, "a", 7, 9, -0.1), between=None) == (None, causes.UNRESOLVED)


def test_nightly_plans_one_bisection_per_range_on_its_worst_series():
    regs = [_reg(1, "a", 2, 9, -0.06), _reg(2, "b", 2, 9, -0.12), _reg(3, "c", 4, 5, -0.05),
            _reg(4, "d", 2, 9, -0.03), _reg(5, "e", 1, 3, -0.2, culprit=2)]  # e is resolved already
    plan = causes.bisection_plan(regs)
    assert [(p.good_sha, p.bad_sha, p.variant, p.ids) for p in plan] == [(SHAS[2], SHAS[9], "b", (1, 2, 4)),
                                                                        (SHAS[4], SHAS[5], "c", (3,))]


def test_markdown_links_trends_and_neutralises_repository_text():
    evil = dict(COMMITS)
    evil[SHAS[5]] = dict(COMMITS[SHAS[5]], subject="<img src=x> @everyone [x](http://e)")
    regs = [_reg(1, "a|b", 4, 5, -0.05), _reg(2, "b", 6, 9, -0.09)]
    opened = _open(regs)
    opened = tuple(dashboard.OpenRegression(o.regression, f"series-{o.regression.id}", o.good, o.bad, o.culprit,
                                            o.between, o.latest_change) for o in opened)
    text = causes.render_markdown(causes.group(opened, evil), lambda s: f"https://site/{s}.html")
    assert text.startswith("#### Open regressions on the branch: 2 cause(s), 2 series")
    assert "[trend](https://site/series-1.html)" in text and "[trend](https://site/series-2.html)" in text
    assert "<img" not in text and "@everyone" not in text and "](http://e)" not in text
    assert "a\\|b" in text  # a cell break in a name stays inside its cell
    assert text.index("not bisected yet, 3 commits") < text.index("commit 0000000000")
    assert causes.render_markdown((), lambda s: None) == ""


def test_the_pr_comment_section_links_trends_on_the_published_site(monkeypatch):
    from pipeline.commands.compare import open_regressions_section
    from pipeline.history.series import Series

    s = Series("a", "M=1", "bf16", "rocm:MI300X", "FLOP/s", ())
    [o] = _open([_reg(1, "a", 4, 5, -0.05)])
    grouped = causes.group([dashboard.OpenRegression(o.regression, s, o.good, o.bad, None, 1, None)], COMMITS)
    monkeypatch.setenv("FLOPWATCH_SITE_URL", "https://org.github.io/repo/")
    text = open_regressions_section(grouped)
    assert "[trend](https://org.github.io/repo/trend-a-M_1-bf16-rocm_MI300X.html)" in text
    monkeypatch.delenv("FLOPWATCH_SITE_URL")
    assert "[trend]" not in open_regressions_section(grouped) and "| -5.0% | a |" in open_regressions_section(grouped)
    assert open_regressions_section(()) == ""


def test_a_range_over_unmeasured_commits_is_not_taken_for_one_commit(tmp_path):
    import numpy as np

    from pipeline.commands.publish import site_input
    from pipeline.history.regressions import RegressionStore
    from pipeline.store import Store
    from workers.core.records import Result

    measured = [0, 1, 2, 3, 7, 8, 9]  # nights 4..6 were not measured
    with Store(tmp_path / "r.db") as store:
        for i in measured:
            store.record_commit(SHAS[i], f"commit {i}", "A <a@x>", "2025-01-01", [])
            run = store.start_run(SHAS[i], False, "nightly", "", "", "nightly")
            samples = tuple(1e-3 * (1.3 if i >= 7 else 1.0) * (1 + 0.001 * np.arange(10)))
            store.record_result(run, SHAS[i], False, Result(
                variant="a", op="gemm", backend="cpp", shape="M=1", dtype="bf16", device="rocm:MI300X", status="ok",
                median_s=float(np.median(samples)), ci_low_s=min(samples), ci_high_s=max(samples), samples_s=samples,
                flops=1e9))
        RegressionStore(store).record(Regression("a", "M=1", "bf16", "rocm:MI300X", SHAS[3], SHAS[7], -0.23,
                                                 1e12, 0.77e12, 0.005))
        board = site_input(store, SHAS[:10]).dashboard
    [cause] = board.causes
    assert cause.how == causes.UNRESOLVED and cause.between == 4 and cause.culprit is None
