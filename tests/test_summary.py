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


def test_a_device_kind_the_cluster_lacks_is_one_line_with_its_counts():
    """Issue 47, item 5: "skipped: no rocm device in the cluster" was a line per variant, which
    doubled every table on an NVIDIA node. One line per kind now, with the variants and jobs it
    covers; the rows (and `--json`) keep every result."""
    import io

    from rich.console import Console

    from pipeline.run.summary import print_table

    why = "no rocm device in the cluster to run it (the build and its static analysis are stored)"
    rows = [_row("gemm_ok", median=0.01)]
    rows += [dict(_row(v, "skipped", shape=f"M={n},N={n},K={n}", device="rocm"), diagnostic=why)
             for v in ("hip_mfma", "hip_tiled", "hip_naive") for n in (64, 128)]
    rows += [dict(_row("cuda_tiled", "skipped", device="cuda"), diagnostic=why.replace("rocm", "cuda"))]
    rows += [dict(_row("odd", "skipped", device="cpu:x"), diagnostic="not run here: needs AVX-512")]
    out = io.StringIO()
    print_table(rows, Console(file=out, width=400, color_system=None), "run")
    lines = [line for line in out.getvalue().splitlines() if "│" in line]
    rocm = [line for line in lines if "no rocm device" in line]
    assert len(rocm) == 1 and "3 variants" in rocm[0] and "6 jobs" in rocm[0], lines
    assert "hip_mfma, hip_tiled, hip_naive" in rocm[0]
    (cuda,) = [line for line in lines if "no cuda device" in line]
    assert "cuda_tiled" in cuda and "variants" not in cuda  # one variant: named as before
    assert sum("odd" in line for line in lines) == 1 and sum("gemm_ok" in line for line in lines) == 1
    assert len(rows) == 9  # the rows themselves are left as they were
