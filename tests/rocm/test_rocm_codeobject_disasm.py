from pathlib import Path

from workers.rocm.codeobject import parse_notes
from workers.rocm.disasm import parse_disassembly

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "rocm"


def test_notes_of_mfma_dbuf_code_object():
    target, (k,) = parse_notes((FIX / "gfx942_mfma_dbuf_notes.txt").read_text())
    assert target == "amdgcn-amd-amdhsa--gfx942"
    assert k.name == "_Z19gemm_bf16_mfma_dbufPKtS0_Pfiii"
    assert k.symbol == "_Z19gemm_bf16_mfma_dbufPKtS0_Pfiii.kd"
    # unified count: alignTo(50 arch VGPRs, 4) + 16 AGPRs (the remarks say 50 and 16)
    assert (k.vgpr_count, k.agpr_count, k.sgpr_count) == (68, 16, 40)
    assert (k.group_segment_fixed_size, k.private_segment_fixed_size) == (20480, 0)
    assert (k.wavefront_size, k.max_flat_workgroup_size) == (64, 256)
    assert (k.sgpr_spill_count, k.vgpr_spill_count, k.uses_dynamic_stack) == (0, 0, False)


def test_notes_kernel_args_do_not_leak_into_kernel_fields():
    _, kernels = parse_notes((FIX / "gfx942_mfma_dbuf_notes.txt").read_text())
    assert len(kernels) == 1  # the six ".args" entries are nested, not kernels


def test_mfma_kernel_histogram():
    (h,) = parse_disassembly((FIX / "gfx942_mfma_objdump.txt").read_text())
    assert h.name == "_Z14gemm_bf16_mfmaPKtS0_Pfiii"
    assert h.mfma == {"v_mfma_f32_32x32x8_bf16": 4}  # BK=32 / K=8 per instruction, unrolled
    assert h.mfma_total == 4
    assert h.global_loads == {"global_load_dwordx4": 2, "global_load_ushort": 16}
    assert h.global_stores == {"global_store_dword": 16}
    assert h.lds_reads == {"ds_read2_b64": 4}
    assert h.lds_writes == {"ds_write_b128": 2}
    assert h.waitcnt == 10
    assert h.total == 691


def test_naive_kernel_has_no_mfma():
    (h,) = parse_disassembly((FIX / "gfx942_naive_objdump.txt").read_text())
    assert h.mfma_total == 0
    assert h.global_loads == {"global_load_ushort": 2}
    assert h.lds_reads == {} and h.lds_writes == {}
    assert h.total == 300


def test_newer_lds_and_buffer_naming_is_classified():
    text = ("0000000000001000 <k>:\n"
            "\tds_load_b128 v[0:3], v4                  // 000000001000: 00\n"
            "\tds_store_b64 v4, v[0:1]                  // 000000001008: 00\n"
            "\tbuffer_load_dwordx4 v[0:3], v5, s[0:3], 0 offen // 000000001010: 00\n"
            "\ts_waitcnt_vscnt null, 0x0                 // 000000001018: 00\n"
            "\tv_mfma_f32_16x16x32_bf16 a[0:3], v[0:3], v[4:7], 0 // 000000001020: 00\n")
    (h,) = parse_disassembly(text)
    assert h.lds_reads == {"ds_load_b128": 1} and h.lds_writes == {"ds_store_b64": 1}
    assert h.global_loads == {"buffer_load_dwordx4": 1}
    assert (h.waitcnt, h.mfma_total, h.total) == (1, 1, 5)
