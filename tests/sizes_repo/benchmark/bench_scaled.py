"""Times the scaled ops at the token counts a model's hidden size and a memory budget allow:
a probe call measures the bytes per token, the sweep is every power of two that fits. Forward
then backward, each size timed in a loop."""

import math
import time
from importlib.metadata import version

import torch

from toy_sizes.functional import scaled_norm, scaled_silu

MODELS = {"tiny": {"hidden": 32}}
BUDGET_BYTES = 1 << 20  # what one call may take
REPS = 200


def token_counts(hidden: int) -> list[int]:
    probe = scaled_silu(torch.randn(1, 16, hidden))  # the kernel itself, as the probe
    per_token = probe.element_size() * hidden * 2  # its input and output
    largest = BUDGET_BYTES // per_token
    return [2**i for i in range(6, int(math.log2(largest)) + 1)]


def time_loop(fn, *args) -> float:
    start = time.perf_counter()
    for _ in range(REPS):
        y = fn(*args)
    return (time.perf_counter() - start) / REPS, y


if __name__ == "__main__":
    hidden = MODELS["tiny"]["hidden"]
    sizes = token_counts(hidden)
    for mode in ("forward", "backward"):
        for tokens in sizes:
            x = torch.randn(1, tokens, hidden, requires_grad=True)
            w = torch.ones(hidden)
            for fn, args in ((scaled_silu, (x,)), (scaled_norm, (x, w))):
                ms, y = time_loop(fn, *args)
                if mode == "backward":
                    y.backward(torch.ones_like(y))
                print(f"toy-sizes {version('toy-sizes')} {fn.__name__} {mode} {tokens}: {ms * 1e3:.3f} ms")
