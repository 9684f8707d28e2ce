from pathlib import Path

import pytest

from workers.rocm.occupancy import occupancy_gfx942, unified_vgprs
from workers.rocm.remarks import parse_remarks

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rocm"


def test_hipcc_tk_gemm_agrees_with_compiler():
    (k,) = parse_remarks((FIX / "hipcc_mi325x_tk_gemm_remarks.txt").read_text())
    occ = occupancy_gfx942(k.vgprs, k.agprs, k.sgprs, block_threads=512,
                           static_lds_bytes=k.lds_bytes)
    # 207 VGPRs -> 208 after the granule of 8 -> 512 // 208 = 2 waves per SIMD
    assert occ.waves_per_simd == k.occupancy_waves_per_simd == 2
    assert (occ.limit, occ.waves_per_cu, occ.blocks_per_cu) == ("vgprs", 8, 1)


@pytest.mark.parametrize("fixture", ["clang19_gfx942_mfma_remarks.txt",
                                     "clang19_gfx942_mfma_dbuf_remarks.txt"])
def test_clang19_kernels_agree_with_compiler(fixture):
    # These kernels are launched with 256 threads (__launch_bounds__(256) in the dbuf source);
    # the compiler assumes that bound when it reports occupancy.
    kernels = parse_remarks((FIX / fixture).read_text())
    assert kernels
    for k in kernels:
        occ = occupancy_gfx942(k.vgprs, k.agprs, k.sgprs, block_threads=256,
                               static_lds_bytes=k.lds_bytes)
        assert occ.waves_per_simd == k.occupancy_waves_per_simd, k


def test_lds_binds_for_static_10k():
    occ = occupancy_gfx942(24, 16, 20, block_threads=256, static_lds_bytes=10240)
    assert (occ.limit, occ.blocks_per_cu, occ.waves_per_simd) == ("lds", 6, 6)
    assert occ.unified_vgprs == 40


def test_hipkittens_like_dynamic_lds():
    # 64 KiB requested at launch, 512 threads = 8 waves: one block per CU -> 2 waves per SIMD,
    # although the compiler (which never sees dynamic LDS) would report more.
    occ = occupancy_gfx942(128, 0, 60, block_threads=512, static_lds_bytes=0,
                           dynamic_lds_bytes=64 * 1024)
    assert (occ.blocks_per_cu, occ.waves_per_cu, occ.waves_per_simd) == (1, 8, 2)
    assert occ.limit == "lds"
    assert occ.per_limit_blocks["vgprs"] == 2


def test_agprs_start_at_vgprs_rounded_to_four():
    assert unified_vgprs(50, 16) == 68  # matches .vgpr_count of the dbuf code object
    assert unified_vgprs(207, 0) == 207
    # 257 unified registers cross 256: one wave per SIMD
    assert occupancy_gfx942(253, 4, 30, 64).waves_per_simd == 1


def test_sgprs_above_100_cap_at_seven():
    occ = occupancy_gfx942(16, 0, 102, block_threads=64)
    assert (occ.waves_per_simd, occ.limit) == (7, "sgprs")


def test_lds_granule_and_overflow():
    assert occupancy_gfx942(16, 0, 20, 256, static_lds_bytes=100).lds_alloc_bytes == 512
    with pytest.raises(ValueError):
        occupancy_gfx942(16, 0, 20, 256, static_lds_bytes=65536, dynamic_lds_bytes=1)
