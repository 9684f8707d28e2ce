"""ptxas --resource-usage parsing, on output recorded from this repo's kernels and on
hand-written lines of the older format."""

import shutil
from pathlib import Path

from workers.cuda import resource_usage as ru

BUILD = Path(__file__).resolve().parents[1] / "fixtures" / "cuda_build"


def test_register_blocked_recorded_output():
    [k] = ru.parse_resource_usage((BUILD / "cuda_register_blocked_sm90a_resource_usage.txt").read_text())
    assert k.mangled == "_Z28gemm_register_blocked_kernelPK13__nv_bfloat16S1_Pfiii"
    assert (k.arch, k.registers, k.barriers, k.smem_bytes) == ("sm_90a", 44, 1, 8192)
    assert (k.stack_bytes, k.spill_stores, k.spill_loads) == (0, 0, 0)


def test_strided_copy_smem_and_two_arch_fatbin():
    [k] = ru.parse_resource_usage((BUILD / "cuda_strided_sm90a_resource_usage.txt").read_text())
    assert k.smem_bytes == 8 * 32 * 33 * 4  # tile[WARPS][32][33] floats
    raw = ru.parse_resource_usage((BUILD / "cuda_raw_naive_sm90a_sm80_resource_usage.txt").read_text())
    assert [(k.name, k.arch, k.registers, k.cmem0_bytes) for k in raw] == [
        ("gemm_raw", "sm_90a", 32, 0), ("gemm_raw", "sm_80", 31, 388)]


def test_spills_and_old_field_order_by_hand():
    text = (
        "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_80'\n"
        "ptxas info    : Function properties for _Z3fooPf\n"
        "    48 bytes stack frame, 20 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 255 registers, 4096 bytes smem, 360 bytes cmem[0], used 2 barriers\n"
        "ptxas info    : Function properties for _Z6helperv\n"
        "    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    )
    [k] = ru.parse_resource_usage(text, {"_Z3fooPf": "foo(float*)"})
    assert k.name == "foo(float*)"
    assert (k.registers, k.barriers, k.smem_bytes, k.cmem0_bytes) == (255, 2, 4096, 360)
    assert (k.stack_bytes, k.spill_stores, k.spill_loads) == (48, 20, 12)


def test_demangle_with_cxxfilt():
    tool = shutil.which("c++filt")
    text = (BUILD / "cuda_wmma_sm90a_resource_usage.txt").read_text()
    names = ru.mangled_names(text)
    assert names == ["_Z16gemm_wmma_kernelPK13__nv_bfloat16S1_Pfiii"]
    assert ru.demangle(names, None) == {}
    if tool:
        assert ru.demangle(names, tool)[names[0]] == "gemm_wmma_kernel(__nv_bfloat16 const*, __nv_bfloat16 const*, float*, int, int, int)"
