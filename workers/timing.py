"""Timing loops: warm-up, then repetitions until the median is known well enough.

Stopping rule: stop when the 95% confidence interval of the median (order statistics, so no
normality assumption) has a half-width within `target_rel_ci` (1%) of the median, after at
least `min_samples`, or when the time budget or `max_samples` is spent. Every sample is kept.
On a GPU each sample is one launch between device events, after a cache flush.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from workers.stats import median_ci


@dataclass(frozen=True)
class TimingSettings:
    budget_s: float = 2.0
    warmup_s: float = 0.1
    min_warmup: int = 2
    min_samples: int = 10
    max_samples: int = 2000
    target_rel_ci: float = 0.01
    flush: bool = True


@dataclass(frozen=True)
class Timing:
    samples_s: list[float]
    median_s: float
    ci_low_s: float
    ci_high_s: float
    converged: bool
    stop_reason: str
    settings: dict

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("samples_s")
        d["n"] = len(self.samples_s)
        d["rel_ci_halfwidth"] = (self.ci_high_s - self.ci_low_s) / 2 / self.median_s if self.median_s else None
        return d


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _converged(samples: list[float], settings: TimingSettings) -> bool:
    if len(samples) < settings.min_samples:
        return False
    lo, hi = median_ci(samples)
    return (hi - lo) / 2 <= settings.target_rel_ci * _median(samples)


def measure(sample_once: Callable[[], float | list[float]], warmup: Callable[[], None],
            settings: TimingSettings) -> Timing:
    """Drive any sampler (CPU wall clock, or a batch of GPU event pairs) with the common
    stopping rule."""
    start = time.perf_counter()
    n = 0
    while n < settings.min_warmup or time.perf_counter() - start < settings.warmup_s:
        warmup()
        n += 1
        if time.perf_counter() - start > settings.budget_s:
            break
    samples: list[float] = []
    deadline = time.perf_counter() + settings.budget_s
    reason = "max_samples"
    while len(samples) < settings.max_samples:
        got = sample_once()
        samples.extend(got if isinstance(got, list) else [got])
        if len(samples) >= 5 and _converged(samples, settings):
            reason = "ci_target"
            break
        if time.perf_counter() > deadline and len(samples) >= 3:
            reason = "budget"
            break
    lo, hi = median_ci(samples)
    return Timing(samples, _median(samples), lo, hi, reason == "ci_target", reason, asdict(settings))


def time_cpu(call: Callable[[], None], settings: TimingSettings) -> Timing:
    """Wall-clock samples of a host call (CPU kernels and the CPU torch peer)."""

    def once() -> float:
        t0 = time.perf_counter()
        call()
        return time.perf_counter() - t0

    return measure(once, call, settings)


GPU_BATCH = 10
# A GPU under sustained load settles at a lower clock than a cold one (power and thermal limits):
# warm up for a second of back-to-back launches and take enough samples that the median
# describes the settled state, which is what a model running the kernel sees.
GPU_MIN_WARMUP_S = 1.0
GPU_MIN_SAMPLES = 50


def time_gpu(call: Callable[[], None], settings: TimingSettings, flush_bytes: int) -> Timing:
    """Device-event samples of one launch each, with the caches flushed before every sample
    by writing a buffer larger than L2 (+ Infinity Cache on MI300/MI325X), so a kernel is
    timed reading its inputs from HBM as it would in a real model.

    Samples are enqueued in batches of GPU_BATCH and read after one synchronisation: a host
    sync after every launch leaves the GPU idle between samples, and an idle GPU boosts its
    clock, which made an 8192³ bf16 GEMM read ~8% faster than back-to-back execution on an H100."""
    import dataclasses

    import torch

    settings = dataclasses.replace(settings, warmup_s=max(settings.warmup_s, GPU_MIN_WARMUP_S),
                                   min_samples=max(settings.min_samples, GPU_MIN_SAMPLES))
    flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda") if settings.flush else None
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(GPU_BATCH)]

    def once() -> list[float]:
        for start_ev, end_ev in events:
            if flush is not None:
                flush.zero_()
            start_ev.record()
            call()
            end_ev.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) / 1e3 for s, e in events]

    # Warm up in the sampling regime itself (flush, launch, flush, launch…): a warm-up of bare
    # launches heats the GPU more than the measurement does and leaves it at a lower clock.
    return measure(once, once, settings)
