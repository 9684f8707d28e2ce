"""The CPU-runnable parts of benchmarks/verify_sizes_gpu.py: where a draft's sizes came from,
read from its label, and the script's Liger-to-torch ratio at the size flopwatch's row has."""

from __future__ import annotations

import tomllib

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


def test_a_run_stopped_before_its_json_is_read_from_the_exported_store(tmp_path, monkeypatch):
    """The rows `flopwatch export` wrote of a run the call's deadline stopped: % of peer from the
    peer's row at the same op, shape and dtype, the launch-bound mark as stored."""
    monkeypatch.setattr(vs, "OUT", tmp_path)
    (tmp_path / "sizes-liger-stored.csv").write_text(
        "variant,op,shape,dtype,status,peer,median_s,launch_bound\n"
        "liger_softmax,softmax,\"M=4096,N=8192\",bf16,ok,False,0.002,False\n"
        "peer.softmax,softmax,\"M=4096,N=8192\",bf16,ok,True,0.003,False\n"
        "peer.softmax,softmax,\"M=4096,N=8192\",fp32,ok,True,0.009,False\n"
        "liger_tvd,tvd,\"M=8,V=32\",fp32,ok,False,0.00001,True\n"
        "liger_jsd,jsd,\"M=8,V=32\",fp32,timeout,False,,\n")
    rows = {r["variant"]: r for r in vs.stored_rows()}
    assert rows["liger_softmax"]["pct_of_peer"] == 150.0 and rows["liger_softmax"]["launch_bound"] is False
    assert "pct_of_peer" not in rows["liger_tvd"] and rows["liger_tvd"]["launch_bound"] is True
    assert rows["liger_jsd"]["median_s"] is None and "launch_bound" not in rows["liger_jsd"]
    assert rows["peer.softmax"]["peer"] is True


def test_a_compared_draft_is_copied_at_its_scripts_largest_point():
    """Where the draft's sizes are not the script's, the ratio is read from a copy of the draft
    at the script's largest point with both providers, in the script's dtype; the draft's check
    point (the test's size) is left out of the copy."""
    cfg = {"hidden_size": 4096, "dtype": "torch.bfloat16", "H": 512, "channels_per_group": 64}
    rows = [{"x": 1024, "provider": "liger", "ms": 1.0, "cfg": cfg}, {"x": 1024, "provider": "torch", "ms": 2.0, "cfg": cfg},
            {"x": 8192, "provider": "liger", "ms": 4.0, "cfg": cfg}, {"x": 8192, "provider": "torch", "ms": 10.0,
                                                                     "cfg": cfg},
            {"x": 16384, "provider": "liger", "error": "OutOfMemoryError"}]
    assert vs.script_point(rows) == (8192, cfg, 2.5)
    sizes_of, dtype_of = vs.AT_SCRIPT_POINT["liger_group_norm"]
    assert sizes_of(8192, cfg) == [16, 4096, 512, 64] and dtype_of(cfg) == "bf16"
    draft = ('name = "liger_group_norm"\nop = "group_norm"\nbackend = "triton"\ndtypes = ["fp32"]\n'
             'shapes = [[16, 48, 8192, 12]]\n\n[binding]\nkind = "python"\n\n[[check]]\n'
             'shapes = [[2, 6, 32, 3]]  # the test\'s own size\n')
    copy = tomllib.loads(vs.at_point_copy(draft, "ratio_liger_group_norm", [16, 4096, 512, 64], "bf16"))
    assert (copy["name"], copy["shapes"], copy["dtypes"], copy["modes"]) == (
        "ratio_liger_group_norm", [[16, 4096, 512, 64]], ["bf16"], ["forward"])
    assert "check" not in copy and copy["binding"] == {"kind": "python"} and copy["op"] == "group_norm"
