"""Theoretical occupancy on CDNA3 (gfx942: MI300X/MI325X).

Why recompute what the compiler already prints: the compiler's ``Occupancy [waves/SIMD]``
remark knows neither the launch's block size (it assumes the kernel's max flat work-group
size) nor dynamically requested LDS (HipKittens kernels ask for 64 KiB at launch), and both
can be the binding limit.

Rules used (all per CU = 4 SIMDs, wave64):
- Unified register file of 512 VGPRs per lane per SIMD shared by arch VGPRs and AGPRs. The
  AGPRs start after the arch VGPRs rounded up to 4 (LLVM ``AMDGPU::getTotalNumVGPRs``:
  ``alignTo(NumVGPR, 4) + NumAGPR`` when ``hasGFX90AInsts``, https://reviews.llvm.org/D119912;
  the code object's ``.vgpr_count`` holds that sum), and the total is allocated in granules of
  8 (``getVGPRAllocGranule`` = 8 on gfx90a/gfx942). Waves/SIMD = 512 // rounded, at most 8.
- SGPRs: on GFX8/GFX9, at most 100 SGPRs (incl. VCC/flat-scratch/XNACK, as the remark and
  ``.sgpr_count`` count them) keep 8 waves, more allow 7 (LLVM
  ``AMDGPU::IsaInfo::getOccupancyWithNumSGPRs``).
- LDS: 64 KiB per CU, allocated per work-group in granules of 128 dwords = 512 bytes (LLVM
  AMDGPUUsage, COMPUTE_PGM_RSRC2.LDS_SIZE, GFX7-GFX11 granularity), static + dynamic.
- Work-groups of more than one wave each need one of 16 barrier slots per CU (LLVM
  ``getMaxWorkGroupsPerCU``), and a work-group's waves are resident together on one CU.
- Waves/SIMD is rounded up from waves/CU as LLVM does (``divideCeil(waves, EUsPerCU)``), so
  the result is comparable with the compiler remark.
"""
from __future__ import annotations

from dataclasses import dataclass

WAVE_SIZE = 64
SIMDS_PER_CU = 4
MAX_WAVES_PER_SIMD = 8
VGPRS_PER_SIMD_LANE = 512
VGPR_GRANULE = 8
AGPR_ALIGN = 4
LDS_BYTES_PER_CU = 64 * 1024
LDS_GRANULE = 512
MAX_BARRIER_GROUPS_PER_CU = 16
SGPR_LIMIT_FOR_8_WAVES = 100


@dataclass(frozen=True)
class Occupancy:
    """Resident waves for one kernel launch configuration, and which limit binds."""

    waves_per_simd: int
    waves_per_cu: int
    blocks_per_cu: int
    limit: str  # "waves" | "vgprs" | "sgprs" | "lds" | "barriers"
    unified_vgprs: int
    lds_alloc_bytes: int
    per_limit_blocks: dict[str, int]


def unified_vgprs(arch_vgprs: int, agprs: int) -> int:
    """Registers one lane occupies in the unified file, before granule rounding."""
    if agprs <= 0:
        return arch_vgprs
    return _round_up(arch_vgprs, AGPR_ALIGN) + agprs


def _round_up(value: int, granule: int) -> int:
    return -(-value // granule) * granule


def _waves_per_simd_by_vgprs(total_vgprs: int) -> int:
    if total_vgprs <= 0:
        return MAX_WAVES_PER_SIMD
    return max(1, min(MAX_WAVES_PER_SIMD,
                      VGPRS_PER_SIMD_LANE // _round_up(total_vgprs, VGPR_GRANULE)))


def _waves_per_simd_by_sgprs(sgprs: int) -> int:
    return MAX_WAVES_PER_SIMD if sgprs <= SGPR_LIMIT_FOR_8_WAVES else 7


def occupancy_gfx942(arch_vgprs: int, agprs: int, sgprs: int, block_threads: int,
                     static_lds_bytes: int = 0, dynamic_lds_bytes: int = 0,
                     unified_vgpr_count: int | None = None) -> Occupancy:
    """Theoretical occupancy of one kernel on gfx942 (pure).

    ``unified_vgpr_count`` (the code object's ``.vgpr_count``) overrides the sum computed from
    ``arch_vgprs`` and ``agprs`` when given.
    """
    if block_threads <= 0:
        raise ValueError("block_threads must be positive")
    waves_per_block = -(-block_threads // WAVE_SIZE)
    total_vgprs = (unified_vgpr_count if unified_vgpr_count is not None
                   else unified_vgprs(arch_vgprs, agprs))
    lds = static_lds_bytes + dynamic_lds_bytes
    lds_alloc = _round_up(lds, LDS_GRANULE)
    if lds_alloc > LDS_BYTES_PER_CU:
        raise ValueError(f"{lds} bytes of LDS per block exceed the {LDS_BYTES_PER_CU} of a CU")

    def blocks_from_simd_limit(per_simd: int) -> int:
        return (per_simd * SIMDS_PER_CU) // waves_per_block

    per_limit = {
        "waves": blocks_from_simd_limit(MAX_WAVES_PER_SIMD),
        "vgprs": blocks_from_simd_limit(_waves_per_simd_by_vgprs(total_vgprs)),
        "sgprs": blocks_from_simd_limit(_waves_per_simd_by_sgprs(sgprs)),
        "lds": LDS_BYTES_PER_CU // lds_alloc if lds_alloc else 10**9,
        "barriers": MAX_BARRIER_GROUPS_PER_CU if waves_per_block > 1 else 10**9,
    }
    # The first limit in this order wins ties, so "waves" is reported when nothing else binds.
    limit = min(per_limit, key=lambda k: per_limit[k])
    blocks = per_limit[limit]
    waves_cu = blocks * waves_per_block
    waves_simd = min(MAX_WAVES_PER_SIMD, -(-waves_cu // SIMDS_PER_CU))
    shown = {k: v for k, v in per_limit.items() if v < 10**9}
    return Occupancy(waves_per_simd=waves_simd, waves_per_cu=waves_cu, blocks_per_cu=blocks,
                     limit=limit, unified_vgprs=total_vgprs, lds_alloc_bytes=lds_alloc,
                     per_limit_blocks=shown)
