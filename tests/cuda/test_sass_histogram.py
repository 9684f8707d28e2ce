"""SASS histograms on cuobjdump output recorded from this repo's kernels."""

import re
from pathlib import Path

from workers.cuda import sass

BUILD = Path(__file__).resolve().parents[1] / "fixtures" / "cuda_build"


def _one(name):
    [h] = sass.parse_sass((BUILD / f"{name}_sm90a.sass").read_text())
    return h


def test_wmma_uses_tensor_cores():
    h = _one("cuda_wmma")
    assert h.kernel == "_Z16gemm_wmma_kernelPK13__nv_bfloat16S1_Pfiii" and h.arch == "sm_90a"
    # From kernels/gemm/cuda_wmma: per k-step a warp does 2x2 mma_sync on 16x16x16 bf16
    # fragments; sm_90's HMMA.16816 computes a 16x8 tile, so two of them per fragment.
    fragments, hmma_per_fragment = 2 * 2, 16 // 8
    assert h.tensor_core == h.opcodes["HMMA"] == fragments * hmma_per_fragment
    # It loads 2 A and 2 B fragments (16x16 bf16 = 512 bytes over 32 lanes = four 32-bit words
    # a lane), through generic addresses (load_matrix_sync), and stores 2x2 fp32 accumulators
    # (1 KiB over 32 lanes = four 64-bit words a lane).
    assert h.generic_loads == {32: (2 + 2) * (16 * 16 * 2 // 32 // 4)}
    assert h.global_stores == {64: fragments * (16 * 16 * 4 // 32 // 8)}
    # and the histogram counts every instruction of the listing once
    text = (BUILD / "cuda_wmma_sm90a.sass").read_text()
    assert h.total == len(re.findall(r"^\s+/\*[0-9a-f]{4}\*/", text, flags=re.M))
    assert h.opcodes["HMMA"] == len(re.findall(r"\bHMMA\.", text))


def test_naive_has_no_tensor_cores_and_16_bit_loads():
    h = _one("cuda_naive")
    assert h.tensor_core == 0
    assert set(h.global_loads) == {16} and h.global_loads[16] > 0  # bf16 scalar loads
    assert h.global_stores == {32: 1}
    assert h.shared_loads == h.shared_stores == 0


def test_strided_copy_goes_through_shared_memory():
    h = _one("cuda_strided")
    assert h.global_loads == {32: 32} and h.global_stores == {32: 32}  # unrolled 32-word rows
    assert h.shared_loads == 32 and h.shared_stores == 32


def test_hand_written_lines():
    text = (
        "\tcode for sm_90a\n\t\tFunction : k\n"
        "        /*0000*/  @!P0 LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;  /* 0x0 */\n"
        "        /*0010*/  HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;  /* 0x0 */\n"
        "        /*0020*/  LDSM.16.M88.4 R8, [R3] ;  /* 0x0 */\n"
        "        /*0030*/  @P1 STG.E.U16 desc[UR4][R2.64], R5 ;  /* 0x0 */\n"
        "        /*0040*/  UTMALDG.2D [UR8], [UR4] ;  /* 0x0 */\n"
        "        /*0050*/  LDGSTS.E.BYPASS.128 [R7], desc[UR4][R2.64] ;  /* 0x0 */\n"
    )
    [h] = sass.parse_sass("\tarch = sm_90a\n" + text)
    assert (h.total, h.tensor_core, h.ldsm, h.tma, h.async_copies) == (6, 1, 1, 1, 1)
    assert h.global_loads == {128: 1} and h.global_stores == {16: 1}
    assert sass.cuobjdump_command("cuobjdump", "x.so") == ["cuobjdump", "-sass", "x.so"]
