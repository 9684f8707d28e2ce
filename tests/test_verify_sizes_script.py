"""The CPU-runnable parts of benchmarks/verify_sizes_gpu.py: where a draft's sizes came from,
read from its label, and the script's Liger-to-torch ratio at the size flopwatch's row has."""

from __future__ import annotations

from benchmarks import verify_sizes_gpu as vs


def test_the_source_of_a_drafts_sizes_is_read_from_its_label():
    assert vs.source_of("benchmark/scripts/benchmark_rms_norm.py:31 (recorded: the script computes its sizes "
                        "as it runs)") == "bench"
    assert vs.source_of("benchmark/scripts/benchmark_tvd.py was not run: the scripts' recording budget of 240 s "
                        "was spent (`--record-budget SECONDS` for more); scaled from test/t.py:3: grew M") == "scaled"
    assert vs.source_of("a guess: no test calls it") == "guess"
    assert vs.source_of("") == "—"


def test_the_scripts_ratio_is_read_at_the_largest_size_flopwatchs_row_shares():
    rows = [{"x": 1024, "provider": "liger", "ms": 1.0}, {"x": 1024, "provider": "torch", "ms": 3.0},
            {"x": 4096, "provider": "liger", "ms": 2.0}, {"x": 4096, "provider": "huggingface", "ms": 5.0},
            {"x": 8192, "provider": "liger", "ms": 4.0}]  # no torch time at 8192
    assert vs.ratio_at(rows, "M=4096,V=32000") == (2.5, "x=4096")
    assert vs.ratio_at(rows, "M=1024,V=32000") == (3.0, "x=1024")
    assert vs.ratio_at(rows, "M=8192,V=32000") == (None, "")
