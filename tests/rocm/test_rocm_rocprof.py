from pathlib import Path

import pytest

from workers.rocm.rocprof import (
    kernel_kind,
    kernels_of_interest,
    merge_passes,
    parse_counter_collection,
    parse_kernel_trace,
    read_pass_directories,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rocm" / "rocprofv3"


def test_sdk_docs_counter_collection():
    ds = parse_counter_collection((FIX / "sdk_docs" / "counter_collection.csv").read_text())
    assert [d.dispatch_id for d in ds] == [1, 2, 3, 4]
    first = ds[0]
    assert first.kernel_name.startswith("void addition_kernel<float>")
    assert first.agent_id == 1  # "Agent 1"
    assert first.counters == {"SQ_WAVES": 16384.0}
    assert (first.grid_size, first.workgroup_size, first.vgprs, first.sgprs) == (1048576, 64, 8, 16)
    assert first.duration_ns == 3200098838483232 - 3200098838431081


def test_sdk_docs_kernel_trace_sorted_and_sizes_multiplied():
    ds = parse_kernel_trace((FIX / "sdk_docs" / "kernel_trace.csv").read_text())
    # rows are out of order in the file; ids jump from 6 to 11
    assert [d.dispatch_id for d in ds] == [1, 2, 3, 4, 5, 6, 11, 12, 13]
    div = ds[3]
    assert div.kernel_name.startswith("divide_kernel")
    assert (div.agent_id, div.grid_size, div.workgroup_size) == (4, 1024 * 1024, 64)
    assert (div.vgprs, div.accum_vgprs, div.lds_bytes, div.scratch_bytes) == (12, 4, 0, 0)
    assert div.duration_ns == 1550151853075237 - 1550151853064037
    assert div.counters == {}


def test_old_header_variant_is_read_by_name():
    # Header of an older kernel trace: Private/Group_Segment_Size, integer agent id, extra
    # Guid/Pid columns, no Accum_VGPR_Count; columns in another order and case.
    text = ("guid,KIND,Agent_Id,pid,Dispatch_Id,Kernel_Name,Private_Segment_Size,"
            "Group_Segment_Size,VGPR_Count,SGPR_Count,Workgroup_Size_X,Workgroup_Size_Y,"
            "Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z,Start_Timestamp,End_Timestamp\n"
            "7,KERNEL_DISPATCH,2,99,5,k,16,65536,128,48,256,1,1,4096,2,1,100,350\n")
    (d,) = parse_kernel_trace(text)
    assert (d.agent_id, d.dispatch_id, d.scratch_bytes, d.lds_bytes) == (2, 5, 16, 65536)
    assert (d.accum_vgprs, d.grid_size, d.workgroup_size, d.duration_ns) == (None, 8192, 256, 250)


def test_hipkittens_lds_conflict_kernels_of_interest():
    ds = parse_counter_collection(
        (FIX / "hipkittens_mi350x" / "lds_conflict_counter_collection.csv").read_text())
    assert len(ds) == 362
    kinds = {kernel_kind(d.kernel_name) for d in ds}
    assert kinds == {"runtime", "torch-helper", "other"}
    micro = kernels_of_interest(ds, name_regex=r"^micro_tk")
    assert micro and all(d.kernel_name == "micro_tk(micro_globals)" for d in micro)
    assert micro[0].dispatch_id == 7
    assert micro[0].counters == {"SQ_INSTS_LDS": 4.0, "SQ_LDS_BANK_CONFLICT": 0.0}
    # the hipBLASLt (Tensile "Cijk_") GEMM is a kernel of interest, not a helper
    cijk = [d for d in kernels_of_interest(ds) if d.kernel_name.startswith("Cijk_")]
    assert cijk[0].counters == {"SQ_INSTS_LDS": 224.0, "SQ_LDS_BANK_CONFLICT": 512.0}
    assert cijk[0].lds_bytes == 26112


def test_hipkittens_hit_rate_dispatch_range():
    ds = parse_counter_collection(
        (FIX / "hipkittens_mi350x" / "hit_rate_counter_collection.csv").read_text())
    assert len(ds) == 241
    timed = kernels_of_interest(ds, dispatch_range=(45, 60))
    assert [d.dispatch_id for d in timed] == list(range(45, 61))
    assert {d.kernel_name for d in timed} == {"void attend_ker<128>(attn_globals<128>)"}
    assert timed[0].counters["TCP_TOTAL_CACHE_ACCESSES_sum"] == 5771362304.0
    assert timed[0].lds_bytes == 0 and timed[0].workgroup_size == 512


def _split_by_counter(path: Path, shift: int):
    """Two 'passes' made from one real file: each keeps one counter, the second with
    dispatch ids shifted as a separate run would number them."""
    ds = parse_counter_collection(path.read_text())
    from dataclasses import replace
    a = [replace(d, counters={"SQ_INSTS_LDS": d.counters["SQ_INSTS_LDS"]}) for d in ds]
    b = [replace(d, dispatch_id=d.dispatch_id + shift,
                 counters={"SQ_LDS_BANK_CONFLICT": d.counters["SQ_LDS_BANK_CONFLICT"]})
         for d in ds]
    return ds, a, b


def test_merge_passes_by_kernel_and_ordinal():
    path = FIX / "hipkittens_mi350x" / "lds_conflict_counter_collection.csv"
    original, a, b = _split_by_counter(path, shift=3)
    merged = merge_passes([a, b])
    assert [d.dispatch_id for d in merged] == [d.dispatch_id for d in original]
    assert [d.counters for d in merged] == [d.counters for d in original]


def test_merge_passes_rejects_diverged_runs():
    path = FIX / "hipkittens_mi350x" / "lds_conflict_counter_collection.csv"
    _, a, b = _split_by_counter(path, shift=0)
    with pytest.raises(ValueError):
        merge_passes([a, b[:-1]])


def test_read_pass_directories(tmp_path: Path):
    src = (FIX / "sdk_docs" / "counter_collection.csv").read_text()
    for n in (2, 1, 10):
        folder = tmp_path / f"pmc_{n}" / "host"
        folder.mkdir(parents=True)
        (folder / "run_counter_collection.csv").write_text(src)
    passes = read_pass_directories(tmp_path)
    assert len(passes) == 3 and all(len(p) == 4 for p in passes)
