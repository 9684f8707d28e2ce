"""`flopwatch export` and `results_frame`: one row per result with its commit, run, device,
counters and resources; CSV and Parquet carry the same table."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pipeline import cli
from pipeline.history.frame import results_frame
from pipeline.store import Store
from workers.core.records import Result

GEMM_FLOPS = 2.0 * 256 * 256 * 128
COPY_BYTES = 2.0 * 4 * (1 << 20)


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "results.db"
    with Store(path) as s:
        s.record_commit("c1", "Tile the K loop", "Ada <ada@x>", "2026-02-03T04:05:06+00:00", ["c0"])
        run = s.start_run("c1", False, "nightly", "/repo", "gpu-node-7", "nightly")
        s.record_result(run, "c1", False, Result(
            variant="gemm_tiled", op="gemm", backend="hip", shape="M=256,N=256,K=128", dtype="bf16",
            device="rocm:MI300X", status="ok", median_s=2e-5, ci_low_s=1.9e-5, ci_high_s=2.1e-5,
            samples_s=(2e-5, 2.1e-5, 1.9e-5), flops=GEMM_FLOPS, build_hash="b1",
            counters={"l1_hit_pct": 51.5, "kernel_names": ["gemm_kernel"]},
            resources={"vendor": "amd", "kernels": {"main": {"vgprs": 128, "lds_bytes": 65536},
                                                    "epilogue": {"vgprs": 160, "lds_bytes": 0}}},
            device_info={"name": "AMD Instinct MI300X", "sclk_mhz": 2100, "uuid": "GPU-9"}))
        s.record_result(run, "c1", False, Result(
            variant="copy_vec4", op="copy", backend="hip", shape="n=1048576", dtype="fp32", device="rocm:MI300X",
            status="ok", median_s=4e-6, samples_s=(4e-6,), bytes_moved=COPY_BYTES, build_hash="b2"))
        s.record_result(run, "c1", False, Result(
            variant="gemm_broken", op="gemm", backend="hip", shape="M=256,N=256,K=128", dtype="bf16",
            device="rocm:MI300X", status="crashed", diagnostic="Memory access fault", flops=GEMM_FLOPS,
            build_hash="b3"))
        s.finish_run(run)
    return path


def test_frame_has_one_row_per_result_with_commit_run_device_counters_resources(store):
    df = results_frame(store).set_index("variant")
    assert list(df.index) == ["gemm_tiled", "copy_vec4", "gemm_broken"]
    tiled = df.loc["gemm_tiled"]
    assert tiled["throughput"] == pytest.approx(GEMM_FLOPS / 2e-5) and tiled["throughput_unit"] == "FLOP/s"
    assert (tiled["commit_subject"], tiled["commit_author"], tiled["run_host"], tiled["run_kind"]) == \
        ("Tile the K loop", "Ada <ada@x>", "gpu-node-7", "nightly")
    assert tiled["commit_date"] == pd.Timestamp("2026-02-03T04:05:06Z")
    assert (tiled["shape.M"], tiled["shape.N"], tiled["shape.K"], tiled["n_samples"]) == (256, 256, 128, 3)
    assert tiled["counter.l1_hit_pct"] == 51.5
    # two kernels: one column per figure, holding the larger (the kernel that limits occupancy)
    assert (tiled["kernel"], tiled["resource.vgprs"], tiled["resource.lds_bytes"]) == ("epilogue;main", 160, 65536)
    assert (tiled["device.name"], tiled["device.uuid"], tiled["device.sclk_mhz"]) == \
        ("AMD Instinct MI300X", "GPU-9", 2100)
    copy = df.loc["copy_vec4"]
    assert copy["throughput"] == pytest.approx(COPY_BYTES / 4e-6) and copy["throughput_unit"] == "B/s"
    assert copy["shape.n"] == 1 << 20 and pd.isna(copy["shape.M"])
    broken = df.loc["gemm_broken"]
    assert broken["status"] == "crashed" and pd.isna(broken["throughput"])
    assert broken["diagnostic"] == "Memory access fault"


def test_csv_and_parquet_carry_the_same_table(store, tmp_path, capsys):
    assert cli.main(["export", str(tmp_path / "h.csv"), "--db", str(store), "--samples"]) == 0
    assert cli.main(["export", str(tmp_path / "h.parquet"), "--db", str(store), "--samples"]) == 0
    assert "wrote 3 results" in capsys.readouterr().out
    csv = pd.read_csv(tmp_path / "h.csv")
    parquet = pd.read_parquet(tmp_path / "h.parquet")
    assert list(csv.columns) == list(parquet.columns) == list(results_frame(store, samples=True).columns)
    assert list(parquet["samples"].iloc[0]) == [2e-5, 2.1e-5, 1.9e-5]
    assert json.loads(csv["samples"].iloc[0]) == [2e-5, 2.1e-5, 1.9e-5]
    for column in ("variant", "throughput", "resource.vgprs", "counter.l1_hit_pct", "commit_sha"):
        assert csv[column].fillna(-1).tolist() == parquet[column].fillna(-1).tolist(), column


def test_export_keeps_only_the_variants_asked_for_and_writes_csv_to_stdout(store, capsys):
    assert cli.main(["export", "-", "--db", str(store), "--variant", "copy_vec4"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[1].split(",")[2] == "copy_vec4"


def test_export_refuses_a_name_it_cannot_read_a_format_from(store, tmp_path, capsys):
    assert cli.main(["export", str(tmp_path / "h.txt"), "--db", str(store)]) == 2
    assert "end it in .csv or .parquet" in capsys.readouterr().err
    assert not (tmp_path / "h.txt").exists()


def test_empty_store_exports_the_header_only(tmp_path):
    df = results_frame(tmp_path / "empty.db")
    assert df.empty and "commit_sha" in df.columns and "throughput" in df.columns


def _second_device(store):
    with Store(store) as s:
        run = s.start_run("c1", False, "run", "/repo", "laptop", "run")
        s.record_result(run, "c1", False, Result(
            variant="copy_vec4", op="copy", backend="cpp", shape="n=1048576", dtype="fp32",
            device="cpu:Intel(R) Xeon(R) Processor", status="ok", median_s=4e-5, samples_s=(4e-5,),
            bytes_moved=COPY_BYTES, build_hash="b4"))
        s.finish_run(run)


def test_a_device_no_result_has_is_refused_naming_the_devices_stored(store, tmp_path, capsys):
    """Docs review (2026-12-06): `export - --device cpu:x86_64` wrote a CSV header and exit 0;
    devices are stored by model name, and nothing said the filter matched nothing."""
    _second_device(store)
    out = tmp_path / "h.csv"
    assert cli.main(["export", str(out), "--db", str(store), "--device", "cpu:x86_64"]) == 2
    err = capsys.readouterr().err
    assert ("no stored result has device 'cpu:x86_64'; devices stored: cpu:Intel(R) Xeon(R) Processor, rocm:MI300X"
            in err), err
    assert not out.exists()
    assert cli.main(["export", "-", "--db", str(store), "--device", "rocm:MI300"]) == 2
    assert "no stored result has device 'rocm:MI300'; did you mean 'rocm:MI300X'?" in capsys.readouterr().err
    # a kind alone (docs review, 973e79f: `cpu` got "did you mean 'cuda'?"): the devices of that kind
    assert cli.main(["export", "-", "--db", str(store), "--device", "cpu"]) == 2
    assert "no stored result has device 'cpu'; did you mean 'cpu:Intel(R) Xeon(R) Processor'?" \
        in capsys.readouterr().err
    assert cli.main(["export", "-", "--db", str(store), "--device", "cpu:Intel(R) Xeon(R) Processor"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 2


def test_a_variant_no_result_has_and_a_combination_none_has_are_refused(store, capsys):
    _second_device(store)
    assert cli.main(["export", "-", "--db", str(store), "--variant", "copy_vec4", "--variant", "gemm_tiledd"]) == 2
    err = capsys.readouterr().err
    assert "no stored result has variant 'gemm_tiledd'; did you mean 'gemm_tiled'?; variants stored:" in err, err
    assert cli.main(["export", "-", "--db", str(store), "--variant", "gemm_tiled", "--device",
                     "cpu:Intel(R) Xeon(R) Processor"]) == 2
    assert ("no stored result has variant 'gemm_tiled' on device 'cpu:Intel(R) Xeon(R) Processor', though each is "
            "stored on its own") in capsys.readouterr().err
    with pytest.raises(ValueError, match="the store holds no results"):
        results_frame(store.parent / "empty.db", devices=["cpu:x"])
