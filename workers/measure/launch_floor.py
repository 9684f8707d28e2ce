"""The launch floor of a result: what its call path costs when the kernel has almost nothing to do.

The floor is the same entry, timed the same way (the job's timing loop, flush included), at its
smallest valid size: a Python entry that launches five kernels through an autograd Function
costs tens of µs there, a C entry a few. `workers.core.launch.launch_bound` then marks a
result whose median is within twice its floor.

*Smallest valid size* (`floor_dims`): each size shrunk to the largest power of two, at most
MAX_FLOOR_SIZE, that divides it at every shape the variant declares, so a kernel whose shapes
are all multiples of its tile keeps a multiple of it (a GEMM declared at 4096³ is floored at
256³, a norm at 4096×8192 at 256×256, Liger's test size 4×8 stays 4×8); sizes the op keeps whole
(`FLOOR_KEEP`: a head dimension) are the job's own. Where that is the job's own shape, the job's
median is its floor and nothing more is timed.

*Where the entry cannot shrink*, the floor is an empty launch on the slot (a one-element fill
through torch): C-ABI entries (`c`, `raw`, and `pybind11` modules of compiled back ends), whose
kernels may assume their tile and write out of bounds at a size they were never written for;
and ops of the repository (an `op.py`, a problem file, a `[reference]` table), whose sizes may
mean anything (a kernel size of 3 is not a size to halve).

*Cost*: measured once per variant, dtype and floor size in a job's process (a GPU slot runs a
variant's shapes in one process, `workers.job.batch`: once per variant and dtype per slot and
command, unless its shapes are spread over slots or a failed job restarts the rest), with a
short loop (FLOOR_TIMING: 0.15 s of samples at most after the warm-up, which the loop's own
probe and agreement rule end as for any kernel). The job's phases carry it as `launch_floor_s`.
"""

from __future__ import annotations

from collections.abc import Callable

# Sizes are shrunk to a power of two at most this large: at 256 a GEMM or a norm row is a few
# µs of work on any GPU of the last years, well under the launch of a Python entry.
MAX_FLOOR_SIZE = 256
# The floor loop: a short budget, the same rule otherwise (the floor is noisy only where the
# call path is, and a 2× rule needs no 1% CI).
FLOOR_TIMING = {"budget_s": 0.15, "min_sampling_s": 0.05, "target_rel_ci": 0.02}
# Bindings whose entry takes its sizes as the harness gives them, with nothing between the call
# and the kernel to refuse a size it cannot run (`workers.bindings`).
_NO_SHRINK_BINDINGS = ("c", "raw")
_COMPILED_BACKENDS = ("cpp", "cuda", "hip")

SMALLEST_SIZE = "smallest size"
EMPTY_LAUNCH = "empty launch"


def _pow2_part(n: int) -> int:
    return n & -n if n > 0 else 1


def floor_dims(dims: dict, declared: list[dict], keep: tuple[str, ...] = ()) -> dict:
    """The floor's sizes for a job at `dims` of a variant that declares the shapes `declared`
    (module docstring). Pure."""
    out = {}
    for name, value in dims.items():
        if name in keep:
            out[name] = value
            continue
        part = _pow2_part(int(value))
        for shape in declared:
            if name in shape:
                part = min(part, _pow2_part(int(shape[name])))
        out[name] = min(part, MAX_FLOOR_SIZE, int(value))
    return out


def can_shrink(variant, op) -> bool:
    """Whether the floor of `variant` may be its entry at a smaller size (else an empty launch)."""
    if variant.repo_op or not hasattr(op, "make_inputs") or getattr(op, "NO_FLOOR_SHRINK", False):
        return False
    kind = variant.binding.kind
    if kind in _NO_SHRINK_BINDINGS:
        return False
    return not (kind == "pybind11" and variant.backend in _COMPILED_BACKENDS)


def plan(variant, op, dims: dict) -> tuple[str, dict]:
    """(how, sizes) of the floor of a job at `dims`: SMALLEST_SIZE with the floor's sizes, or
    EMPTY_LAUNCH with none."""
    if not can_shrink(variant, op):
        return EMPTY_LAUNCH, {}
    declared = [s.dims for s in variant.shapes]
    return SMALLEST_SIZE, floor_dims(dims, declared, tuple(getattr(op, "FLOOR_KEEP", ())))


def empty_launch(kind: str) -> Callable[[], None]:
    """The call of an empty launch on this device: a one-element fill through torch's dispatcher
    (nothing at all on a CPU)."""
    if kind == "cpu":
        return lambda: None
    import torch

    one = torch.empty(1, dtype=torch.int32, device="cuda")
    return lambda: one.fill_(0)


class Floors:
    """The floors this process measured, by `key_of` (variant, dtype, how, sizes): a variant's
    shapes share one, as do its jobs after a restart in the same process."""

    def __init__(self):
        self.known: dict[tuple, dict] = {}

    def get(self, key: tuple, measure: Callable[[], dict]) -> tuple[dict, bool]:
        """(the floor, whether it was measured now) of `key`; `measure()` times it the first time."""
        fresh = key not in self.known
        if fresh:
            self.known[key] = measure()
        return self.known[key], fresh


def key_of(variant_name: str, dtype: str, how: str, dims: dict) -> tuple:
    return (variant_name, dtype, how, tuple(sorted(dims.items())))
