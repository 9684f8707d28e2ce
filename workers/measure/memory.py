"""Peak device memory of one timed call, from torch's allocator counters (CUDA and ROCm alike).

What is recorded is the call's peak allocation *above* what was allocated when it started (its
inputs, and whatever else the job holds): `reset_peak_memory_stats()`, the call once,
`max_memory_allocated()` minus `memory_allocated()` before it. Liger-Kernel's benchmarks read
the same counters (`benchmark/scripts/utils.py`, `_test_memory`), though as the whole peak with
the inputs in it; `inputs_bytes` is recorded beside, so the two can be set side by side.

The caching allocator hands a request a cached block as large as it has (a 1.5 MB tensor may get
a 2 MB block, and the counter says 2 MB), so what a call "allocates" depends on what earlier
calls left in the cache. The cache is emptied first: every block of the call is then cut from a
fresh segment the same way at every commit, and the figure is deterministic up to the
allocator's rounding (512 bytes per block). That is why a change of it is decided by a threshold
(`pipeline.history.memory`), not by a test on samples. Measured in the job's own process: a block
another process freed is never this one's.
"""

from __future__ import annotations

import gc
from collections.abc import Callable


def inputs_bytes(inputs: dict) -> int:
    """Bytes of the input tensors (their storages, each once)."""
    import torch

    seen: dict[int, int] = {}
    for value in inputs.values():
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def peak_above(call: Callable[[], object], before: Callable[[], None] | None = None, counters=None) -> dict:
    """Run `call()` once and return {"peak_bytes": its peak allocation above the start,
    "baseline_bytes": what was allocated at the start}. `before()` runs first, outside the
    measurement (a backward pass's gradients reset, as between timed samples). `counters`: the
    allocator's interface (default `torch.cuda`; `torch.cuda.memory` is the same on ROCm), given
    by tests that count by hand."""
    if counters is None:
        import torch

        counters = torch.cuda
    if before is not None:
        before()
    gc.collect()  # a cycle holding a tensor of an earlier call would be freed at a random moment
    counters.synchronize()
    counters.empty_cache()  # see the module docstring: no cached block of another size is handed out
    base = counters.memory_allocated()
    counters.reset_peak_memory_stats()
    result = call()
    counters.synchronize()
    peak = counters.max_memory_allocated()
    del result  # the call's output counts while it lives: in its peak, not in the next baseline
    return {"peak_bytes": max(int(peak - base), 0), "baseline_bytes": int(base)}
