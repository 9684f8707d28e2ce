from pathlib import Path

from workers.rocm.remarks import parse_remarks

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rocm"


def test_hipcc_mi325x_remarks_without_function_name():
    (k,) = parse_remarks((FIX / "hipcc_mi325x_tk_gemm_remarks.txt").read_text())
    assert k.location == "256_128_64_32.cpp:41:1"
    assert k.mangled is None and k.name is None
    assert (k.sgprs, k.vgprs, k.agprs) == (34, 207, 0)
    assert k.occupancy_waves_per_simd == 2
    assert (k.scratch_bytes, k.sgpr_spill, k.vgpr_spill, k.lds_bytes) == (0, 0, 0, 0)
    assert k.dynamic_stack is False


def test_clang19_remarks_two_kernels_with_source_excerpts():
    ks = parse_remarks((FIX / "clang19_gfx942_mfma_remarks.txt").read_text())
    assert [k.mangled for k in ks] == ["_Z14gemm_bf16_mfmaPKtS0_Pfiii",
                                      "_Z15gemm_f16_mfma16PKDF16_S0_Pfiii"]
    assert [(k.vgprs, k.agprs, k.sgprs, k.lds_bytes, k.occupancy_waves_per_simd) for k in ks] == [
        (24, 16, 20, 10240, 6), (12, 4, 20, 0, 8)]


def test_demangler_is_applied_and_mangled_name_kept():
    ks = parse_remarks((FIX / "clang19_gfx942_mfma_remarks.txt").read_text(),
                       demangle=lambda names: [n.upper() for n in names])
    assert ks[0].name == "_Z14GEMM_BF16_MFMAPKTS0_PFIII"
    assert ks[0].mangled == "_Z14gemm_bf16_mfmaPKtS0_Pfiii"


def test_real_demangler_when_available():
    from workers.rocm.remarks import demangle_names, find_demangler
    if find_demangler() is None:
        import pytest
        pytest.skip("no c++filt / llvm-cxxfilt on this machine")
    assert demangle_names(["_Z14gemm_bf16_mfmaPKtS0_Pfiii"]) == [
        "gemm_bf16_mfma(unsigned short const*, unsigned short const*, float*, int, int, int)"]
