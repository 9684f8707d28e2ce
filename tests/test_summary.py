"""End-of-run rows: % of the peer at the same shape/dtype/device, units, ordering, exit status."""

from __future__ import annotations

from pipeline.run.summary import exit_code, format_rate, shape_label, sort_rows, with_peer


def _row(variant, status="ok", median=None, peer=False, shape="M=2,N=2,K=2", device="cpu:x", flops=2e9):
    return {"variant": variant, "op": "gemm", "shape": shape, "dtype": "fp32", "device": device,
            "status": status, "median_s": median, "flops": flops, "peer": peer, "diagnostic": ""}


def test_percent_of_peer_is_per_shape_and_device():
    rows = with_peer([_row("torch", median=0.01, peer=True), _row("mine", median=0.04),
                      _row("elsewhere", median=0.01, device="cuda:h100")])
    pct = {r["variant"]: r["pct_of_peer"] for r in rows}
    assert pct == {"torch": 100.0, "mine": 25.0, "elsewhere": None}


def test_units_and_labels():
    assert format_rate(_row("a", median=0.01)) == "200 GFLOP/s"
    assert format_rate(_row("a", median=1e-3, flops=7e11)) == "700 TFLOP/s"
    assert format_rate({"median_s": 1e-3, "flops": 0, "bytes_moved": 3e9}) == "3 TB/s"
    assert format_rate(_row("a")) == "—"
    assert shape_label("M=512,N=256,K=64") == "512×256×64"


def test_failures_first_skipped_last_and_exit_status():
    rows = [_row("skip", "skipped"), _row("fast", median=0.01), _row("bad", "incorrect"), _row("slow", median=0.1)]
    assert [r["variant"] for r in sort_rows(with_peer(rows))] == ["bad", "fast", "slow", "skip"]
    assert exit_code(rows) == 1
    assert exit_code([_row("ok", median=1.0), _row("skip", "skipped")]) == 0
