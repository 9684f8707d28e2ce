"""Whether a size would be launch-bound, asked before anything runs: for a draft (`flopwatch new`
can warn that the sizes it found in a repository's tests measure the call, not the kernel) or a
manifest's shape.

A measured result knows its own floor (`workers.measure.launch_floor`); a size not yet measured
is estimated: the op's work at that size over the device's data-sheet roofs (the larger of its
FLOPs over the peak of its dtype and its bytes over the memory bandwidth, `reports.device_specs`)
against the typical floor of the entry's call path. A size whose kernel would take less than
`LAUNCH_BOUND_FACTOR` times that floor would sit on it. The estimate is a lower bound of the
kernel's time (no kernel reaches its roofs at small sizes), so it errs towards warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from reports.device_specs import spec_of
from workers.core.launch import LAUNCH_BOUND_FACTOR
from workers.ops import dtype_bytes, get_op

# The floor of a call path where nothing is measured yet: the fastest medians of the recorded
# H100 run of Liger-Kernel's entries and torch's peers at their test sizes, all on their floors
# (docs/gpu-runs/onboarding_h100_2026-11-27b/2_liger_builtin.txt): torch's own ops 4-8 µs
# (peer.softmax 4 µs at 2×8), Liger's autograd Functions from 16 µs (fused_add_rms_norm at 4×8)
# to 0.36 ms (fused_linear_cross_entropy at 4×8×8). The smallest of each: an estimate that warns
# too rarely is worth less than one that warns a little early.
TYPICAL_FLOOR_S = {
    "launch": 4e-6,     # one kernel launched from C or a torch op
    "autograd": 16e-6,  # a Python entry through an autograd Function (Liger, Unsloth), Triton launchers
}


@dataclass(frozen=True)
class LaunchEstimate:
    """bound: the size would sit within LAUNCH_BOUND_FACTOR of its floor (None when the device's
    roofs are not known); kernel_s the roofline time of the work, floor_s the floor held
    against it; why says so in words."""

    bound: bool | None
    kernel_s: float | None
    floor_s: float
    why: str


def would_be_launch_bound(flops: float, bytes_moved: float, dtype: str, device: str, call_path: str = "autograd",
                          floor_s: float | None = None) -> LaunchEstimate:
    """Whether work of `flops` and `bytes_moved` in `dtype` on `device` (a device key such as
    `cuda:NVIDIA H100 80GB HBM3`) would be launch-bound through `call_path` (a key of
    TYPICAL_FLOOR_S), or against `floor_s` when one was measured."""
    if floor_s is None:
        if call_path not in TYPICAL_FLOOR_S:
            raise ValueError(f"call path {call_path!r}: one of {sorted(TYPICAL_FLOOR_S)}")
        floor_s = TYPICAL_FLOOR_S[call_path]
    spec = spec_of(device)
    if spec is None:
        return LaunchEstimate(None, None, floor_s, f"no data-sheet roofs for {device!r}: cannot estimate")
    compute = flops / spec.peak_flops[dtype] if flops and dtype in spec.peak_flops else 0.0
    kernel_s = max(compute, bytes_moved / spec.bandwidth)
    bound = kernel_s < LAUNCH_BOUND_FACTOR * floor_s
    why = (f"the work takes at least {kernel_s * 1e6:.3g} µs on {spec.name} (its roofs), "
           f"{'under' if bound else 'over'} {LAUNCH_BOUND_FACTOR:g}x the {floor_s * 1e6:.3g} µs floor of the call path")
    return LaunchEstimate(bound, kernel_s, floor_s, why)


def for_op(op: str, dims: dict, dtype: str, device: str, call_path: str = "autograd") -> LaunchEstimate:
    """`would_be_launch_bound` of a built-in op at `dims` (its FLOPs and bytes, `workers.ops`)."""
    module = get_op(op)
    return would_be_launch_bound(float(module.flops(dims)), float(module.bytes_moved(dims, dtype_bytes(dtype))),
                                 dtype, device, call_path)
