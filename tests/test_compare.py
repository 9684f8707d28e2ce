"""The comparison table: pooling, ordering, what else moved, markdown, exit status."""

from __future__ import annotations

import numpy as np

from pipeline import cli
from pipeline.history import compare as cmp

FLOPS = 2 * 256**3
KEY = ("M=256,N=256,K=256", "fp32", "cpu:test")


def _row(variant, seconds, status="ok", resources=None, counters=None, shape="M=256,N=256,K=256", seed=0,
         diagnostic=""):
    rng = np.random.default_rng(seed)
    samples = list(seconds * (1 + 0.01 * rng.standard_normal(30))) if status == "ok" else []
    return {"variant": variant, "shape": shape, "dtype": "fp32", "device": "cpu:test", "status": status,
            "samples": samples, "flops": FLOPS, "resources": resources or {}, "counters": counters or {},
            "diagnostic": diagnostic}


def _report(base_rows, head_rows, threshold=0.03):
    rows = cmp.compare_sides(cmp.pool(base_rows), cmp.pool(head_rows), threshold)
    return cmp.Report("a" * 40, "base subject", "b" * 40, "head subject", threshold, 3, tuple(rows))


def test_interleave_alternates_and_reverses_every_other_round():
    calls = []
    base, head = cmp.interleave(lambda rev: calls.append(rev) or [{"rev": rev}], "A", "B", 4)
    assert calls == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert len(base) == len(head) == 4 and all(r["rev"] == "A" for r in base)


def test_pool_joins_rounds_and_keeps_ok_over_a_failed_round():
    rows = [_row("k", 1e-3, seed=1), _row("k", 1e-3, status="crashed"), _row("k", 1e-3, seed=2)]
    side = cmp.pool(rows)[("k", "M=256,N=256,K=256", "fp32", "cpu:test")]
    assert side.status == "ok" and len(side.samples) == 60
    assert abs(side.rate / (FLOPS / 1e-3) - 1) < 0.01


def test_table_orders_regressions_first_and_sets_exit_status():
    base = [_row("same", 1e-3, seed=1), _row("slow", 1e-3, seed=2), _row("fast", 1e-3, seed=3),
            _row("breaks", 1e-3, seed=4), _row("fixed", 1e-3, status="build_failed"), _row("slower_still", 1e-3)]
    head = [_row("same", 1e-3, seed=5), _row("slow", 1.2e-3, seed=6), _row("fast", 0.8e-3, seed=7),
            _row("breaks", 1e-3, status="build_failed", diagnostic="error: expected ';'"),
            _row("fixed", 1e-3, seed=8), _row("slower_still", 1.5e-3, seed=9)]
    report = _report(base, head)
    kinds = [(r.variant, r.kind) for r in report.rows]
    assert kinds == [("breaks", "newly failing"), ("slower_still", "slower"), ("slow", "slower"),
                     ("fast", "faster"), ("fixed", "newly fixed"), ("same", "same")]
    slow = report.rows[2].comparison
    assert -0.2 < slow.change < -0.14 and slow.change_lo < slow.change < slow.change_hi
    assert cmp.exit_status(report) == 1
    calm = _report([_row("same", 1e-3, seed=1), _row("fast", 1e-3, seed=3)],
                   [_row("same", 1e-3, seed=5), _row("fast", 0.8e-3, seed=7)])
    assert cmp.exit_status(calm) == 0


def test_newly_failing_alone_fails_the_comparison():
    report = _report([_row("k", 1e-3)], [_row("k", 1e-3, status="incorrect")])
    assert [r.kind for r in report.rows] == ["newly failing"] and cmp.exit_status(report) == 1


def test_moved_resources_and_counters_are_formatted():
    res_b = {"kernels": {"gemm": {"vgprs": 92, "lds_bytes": 32768, "waves_per_cu": 6, "spills": False}}}
    res_h = {"kernels": {"gemm": {"vgprs": 128, "lds_bytes": 65536, "waves_per_cu": 3, "spills": True}}}
    cnt_b = {"l1_hit_pct": 66.0, "coalescing_pct": 75.0, "l2_hit_pct": 80.0}
    cnt_h = {"l1_hit_pct": 0.0, "coalescing_pct": 25.0, "l2_hit_pct": 81.0}  # l2 within tolerance
    report = _report([_row("k", 1e-3, resources=res_b, counters=cnt_b)],
                     [_row("k", 1.5e-3, resources=res_h, counters=cnt_h)])
    moved = {m.name: (m.before, m.after) for m in report.rows[0].moved}
    assert moved == {"kernels.gemm.vgprs": ("92", "128"), "kernels.gemm.lds_bytes": ("32 KiB", "64 KiB"),
                     "kernels.gemm.waves_per_cu": ("6.0", "3.0"), "l1_hit_pct": ("66%", "0%"),
                     "coalescing_pct": ("75%", "25%")}
    md = cmp.render_markdown(report)
    assert "gemm: LDS allocated 32 KiB → 64 KiB" in md and "L1 hit 66% → 0%" in md


def test_flatten_numeric_walks_dicts_and_lists_and_drops_bools():
    assert cmp.flatten_numeric({"a": {"b": 1, "c": [2, {"d": 3.5}]}, "e": True, "f": "x"}) == \
        {"a.b": 1.0, "a.c.0": 2.0, "a.c.1.d": 3.5}


def test_markdown_table_regressions_first_and_escaped():
    base = [_row("ok_kernel", 1e-3, seed=1), _row("evil|<script>x</script>", 1e-3, seed=2)]
    head = [_row("ok_kernel", 1e-3, seed=3), _row("evil|<script>x</script>", 1.3e-3, seed=4)]
    md = cmp.render_markdown(_report(base, head))
    lines = [line for line in md.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| verdict |")
    assert lines[1].startswith("| **slower** | evil\\|&lt;script&gt;x&lt;/script&gt; |")
    assert "<script>" not in md
    assert "| same | ok_kernel |" in lines[2]
    assert "regressions found" in md.splitlines()[0]
    # Every table line has the same number of cells, so GitHub renders one table.
    assert len({line.replace("\\|", "").count("|") for line in lines}) == 1


def test_usage_errors_exit_2(capsys, monkeypatch):
    # Each refusal names its own argument: exit 2 alone would also come from a missing revision.
    assert cli.main(["compare", "HEAD~1", "HEAD", "--threshold", "lots"]) == 2
    assert "--threshold" in capsys.readouterr().err
    assert cli.main(["compare", "HEAD~1", "HEAD", "--rounds", "0"]) == 2
    assert "--rounds must be at least 1" in capsys.readouterr().err
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert cli.main(["compare", "HEAD~1", "HEAD", "--pr", "3", "--repo-slug", "o/r"]) == 2
    assert "--pr needs GITHUB_TOKEN" in capsys.readouterr().err


def test_rounds_that_disagree_turn_a_pooled_verdict_into_unsure():
    # Two rounds of head ran during a disturbance (+10%), the third shows no change: pooled,
    # the samples look slower; per round they are not, so the verdict must not claim a regression.
    base = [_row("k", 1e-3, seed=1), _row("k", 1e-3, seed=2), _row("k", 1e-3, seed=5)]
    disturbed = [_row("k", 1.1e-3, seed=3), _row("k", 1.1e-3, seed=4), _row("k", 1.0e-3, seed=6)]
    plain = cmp.pool([dict(r, samples=r["samples"]) for r in disturbed])
    pooled_only = cmp.verdicts.compare_samples(cmp.pool(base)[("k", *KEY)].samples, plain[("k", *KEY)].samples)
    assert pooled_only.verdict == "slower"  # what the pooled samples alone would claim
    [row] = _report(base, disturbed).rows
    assert row.kind == "unsure" and "rounds disagree" in row.comparison.reason
    consistent = [_row("k", 1.2e-3, seed=3), _row("k", 1.15e-3, seed=4), _row("k", 1.1e-3, seed=6)]
    [row] = _report(base, consistent).rows
    assert row.kind == "slower"


def test_paired_samples_replace_run_samples_and_drop_the_round_check():
    from pipeline.history.compare import Side, with_pairs

    key = ("v", "M=1,N=1,K=1", "fp32", "cpu:x")
    base = {key: Side("ok", (1.0, 1.0), round_medians=(1.0, 1.0)), ("other",): Side("ok", (2.0,))}
    head = {key: Side("ok", (9.0, 9.0), round_medians=(9.0, 9.0)), ("other",): Side("ok", (2.0,))}
    b, h = with_pairs(base, head, {key: ((1.0, 1.1, 1.2), (1.3, 1.4, 1.5))})
    assert b[key].samples == (1.0, 1.1, 1.2) and h[key].samples == (1.3, 1.4, 1.5)
    assert b[key].round_medians == () and h[key].round_medians == ()
    assert b[("other",)] is base[("other",)]  # unpaired series keep their run samples


def test_paired_verdict_stands_only_when_both_load_orders_agree():
    """A kernel whose speed is set when it is loaded (one binary paired against itself on an
    H100: each copy steady, the copies apart by a different amount in each process): the child
    with base loaded first says +30%, the one with head loaded first about nothing; pooled, the
    pairs lean to slower, but no change is reported. A change of the build moves both alike."""
    from pipeline.history.compare import Side, compare_rounds

    rng = np.random.default_rng(3)
    base = tuple(1.0 + 0.001 * rng.standard_normal(40))
    split = tuple(b * (1.30 if i < 30 else 1.001) for i, b in enumerate(base))  # orders disagree
    both = tuple(b * 1.30 for b in base)                                          # orders agree
    c = compare_rounds(Side("ok", base, paired=True, order_ratios=(1.30, 1.001)),
                       Side("ok", split, paired=True, order_ratios=(1.30, 1.001)), 0.005)
    assert c.verdict == "unsure" and "load orders disagree" in c.reason, c
    agreeing = Side("ok", base, paired=True, order_ratios=(1.30, 1.30))
    assert compare_rounds(agreeing, Side("ok", both, paired=True, order_ratios=(1.30, 1.30)), 0.005).verdict == "slower"
    # without the orders (a series one of whose children failed) the pooled verdict stands
    assert compare_rounds(Side("ok", base, paired=True), Side("ok", split, paired=True), 0.005).verdict == "slower"


def test_a_change_no_larger_than_two_copies_of_one_build_differ_is_unsure():
    from pipeline.history.compare import Row, Side, compare_rounds, with_copy_check

    rng = np.random.default_rng(5)
    base = tuple(1.0 + 0.001 * rng.standard_normal(40))
    def row(factor, variant):
        b = Side("ok", base, paired=True, order_ratios=(factor, factor))
        h = Side("ok", tuple(x * factor for x in base), paired=True, order_ratios=(factor, factor))
        c = compare_rounds(b, h, 0.005)
        return Row(variant, "M=1", "bf16", "cuda:H100", c.verdict, b, h, c, threshold=0.005)
    rows = [row(1.06, "spilling"), row(2.0, "planted"), row(1.06, "stable"), row(1.0, "same")]
    assert [r.kind for r in rows] == ["slower", "slower", "slower", "same"]
    offsets = {("spilling", "M=1", "bf16", "cuda:H100"): 1 / 1.04,   # its copies 4% apart
               ("planted", "M=1", "bf16", "cuda:H100"): 1 / 1.04,    # a 2x change stands beside that
               ("stable", "M=1", "bf16", "cuda:H100"): 1.0005}
    kinds = {r.variant: (r.kind, r.comparison.reason) for r in with_copy_check(rows, offsets)}
    assert kinds["spilling"][0] == "unsure" and "two copies of the base build differ by +4.0%" in kinds["spilling"][1]
    assert kinds["planted"][0] == "slower" and kinds["stable"][0] == "slower" and kinds["same"][0] == "same"
