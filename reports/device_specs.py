"""Peak throughput and memory bandwidth of the devices flopwatch knows, from their vendors' data
sheets: the "spec" ceilings of the roofline (`reports.roofline`).

Data, not code: a device is matched by a substring of flopwatch's device key (`rocm:AMD Instinct
MI300X`, `cuda:NVIDIA H100 80GB HBM3`), the first match wins, so more specific names come first.
Peaks are dense (no structured sparsity) matrix-unit figures for the low-precision types and the
vector-unit figure for fp32 (an fp32 GEMM does not use tensor cores unless TF32 is allowed).
A device or dtype that is not listed gets no spec ceiling; the measured ones still show.
"""

from __future__ import annotations

from dataclasses import dataclass

T = 1e12


@dataclass(frozen=True)
class DeviceSpec:
    """What a vendor's data sheet promises: peak FLOP/s per dtype and memory bandwidth in B/s."""

    name: str
    peak_flops: dict[str, float]
    bandwidth: float
    source: str


# (substring of the device key, spec)
SPECS: tuple[tuple[str, DeviceSpec], ...] = (
    ("MI325X", DeviceSpec("AMD Instinct MI325X", {"bf16": 1307.4 * T, "fp16": 1307.4 * T, "fp32": 163.4 * T},
                          6.0 * T, "AMD Instinct MI325X data sheet: dense BF16/FP16 matrix, FP32 vector; HBM3E")),
    ("MI300X", DeviceSpec("AMD Instinct MI300X", {"bf16": 1307.4 * T, "fp16": 1307.4 * T, "fp32": 163.4 * T},
                          5.3 * T, "AMD Instinct MI300X data sheet: dense BF16/FP16 matrix, FP32 vector; HBM3")),
    ("H100 PCIe", DeviceSpec("NVIDIA H100 PCIe", {"bf16": 756.5 * T, "fp16": 756.5 * T, "fp32": 51.2 * T},
                             2.0 * T, "NVIDIA H100 data sheet (PCIe): dense BF16/FP16 tensor, FP32; HBM2e")),
    ("H100", DeviceSpec("NVIDIA H100 SXM5", {"bf16": 989.4 * T, "fp16": 989.4 * T, "fp32": 66.9 * T},
                        3.35 * T, "NVIDIA H100 data sheet (SXM5): dense BF16/FP16 tensor, FP32; HBM3")),
    ("H200", DeviceSpec("NVIDIA H200 SXM", {"bf16": 989.4 * T, "fp16": 989.4 * T, "fp32": 66.9 * T},
                        4.8 * T, "NVIDIA H200 data sheet (SXM): dense BF16/FP16 tensor, FP32; HBM3e")),
)


def spec_of(device: str) -> DeviceSpec | None:
    """The data-sheet figures of a device key, or None when flopwatch does not know the device."""
    return next((spec for pattern, spec in SPECS if pattern in (device or "")), None)
