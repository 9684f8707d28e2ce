"""What a Triton kernel's first call costs in a job's process, and how much of it a spare can
pay ahead (`workers.job.spare`), on one NVIDIA GPU.

A job's process is forked from the slot's warm runner, which has imported torch and triton but
never touched the GPU. Its kernel's first call then finds the compiled kernel in Triton's disk
cache, loads it and its launcher, and starts Triton's driver in that process. This script forks
such processes the same way and times, each over `--trials` processes:

  cold        the kernel's first call in a fresh process (context made first, as a spare does)
  after warm  the same after the process first ran a different, tiny Triton kernel (what a
              spare could do in its preparation: Triton's driver, launcher machinery, its first
              module load), and how long that warm-up itself took
  keyed       cold again, but the parent took Triton's compiler key before forking (host work
              the warm runner could do once)

    python3 benchmarks/triton_first_call.py [--trials 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spare_prep import in_forked_child  # noqa: E402  (forked as the warm runner forks its jobs)


@triton.jit
def _scale(x_ptr, y_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


@triton.jit
def _tiny(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


def _kernel_first_call() -> float:
    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    _scale[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), 2.0, BLOCK=1024)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def _warm() -> float:
    t0 = time.perf_counter()
    z = torch.zeros(128, device="cuda")
    _tiny[(1,)](z, BLOCK=128)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def _in_child(warm: bool) -> dict:
    """In a forked child: context, optionally the warm-up, then the kernel's first call."""

    def measure() -> dict:
        torch.cuda.set_device(0)
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()
        out = {"warm_s": _warm() if warm else 0.0}
        out["first_call_s"] = _kernel_first_call()
        return out

    return in_forked_child(measure)


def _triton_key_s() -> float | None:
    """Triton's compiler key (a hash of its own sources and libtriton's shared library, taken
    once per process before any kernel is looked up in the cache): pure host work, so the warm
    runner can take it before it forks. None where this Triton has no such function."""
    try:
        from triton.runtime.cache import triton_key
    except ImportError:
        try:
            from triton.compiler.compiler import triton_key
        except ImportError:
            return None
    t0 = time.perf_counter()
    triton_key()
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=5)
    args = p.parse_args()
    # No torch.cuda call here: the parent must not start CUDA before it forks (as the runner).
    _in_child(warm=True)  # compiles both kernels into Triton's disk cache, as a job's earlier run had
    cold = [_in_child(warm=False) for _ in range(args.trials)]
    warm = [_in_child(warm=True) for _ in range(args.trials)]
    key_s = _triton_key_s()
    keyed = [_in_child(warm=False) for _ in range(args.trials)] if key_s is not None else []
    med = statistics.median
    print(f"first call of a cached Triton kernel in a fresh forked process ({args.trials} processes each):")
    print(f"  cold                  {med(c['first_call_s'] for c in cold) * 1e3:7.1f} ms")
    print(f"  after a tiny kernel   {med(c['first_call_s'] for c in warm) * 1e3:7.1f} ms "
          f"(the tiny kernel itself {med(c['warm_s'] for c in warm) * 1e3:.1f} ms)")
    if keyed:
        print(f"  compiler key taken by the parent before the fork (it took {key_s * 1e3:.1f} ms there): "
              f"{med(c['first_call_s'] for c in keyed) * 1e3:7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
