"""Timing loops: warm-up, then repetitions until the median is known well enough.

Every sample is kept. On a GPU each sample is one launch between device events, after a cache
flush; on a CPU it is the wall time of one call.

The stopping rule (shared by both; `stop_reason` records which clause ended the loop):

- `ci_target`: at least `min_samples` (CPU) or `CI_MIN_SAMPLES` (GPU, adaptive) samples, the
  95% confidence interval of the median (order statistics, no normality assumed) has a
  half-width within `target_rel_ci` of the median, and (GPU) at least `min_sampling_s` of
  sampling has passed, so that the median describes a stretch of settled execution rather
  than a handful of launches.
- `budget`: `budget_s` of sampling has passed and there are at least `BUDGET_MIN_SAMPLES`.
- `max_samples`: `max_samples` samples.

GPU, adaptive (the default, `method="adaptive"`):

1. *Probe.* One flushed launch measures the kernel's duration `d`, and one bare flush the
   flush's own GPU time `f`.
2. *Batch.* Samples are enqueued in batches read after one synchronisation: a host sync after
   every launch leaves the GPU idle between samples and an idle GPU boosts its clock (an 8192³
   bf16 GEMM read ~8% faster that way on an H100). A batch is `FIXED_BATCH` launches, the fixed
   rule's cadence, as long as that is between `MIN_BATCH_S` and `BATCH_TARGET_S` of GPU work;
   a longer kernel gets fewer (at most `BATCH_TARGET_S` of work, at least one launch), a shorter
   one more (at least `MIN_BATCH_S`, at most `MAX_BATCH`): a 1 s kernel is timed one launch at
   a time, a 5 µs kernel dozens per synchronisation. Why the fixed rule's cadence where it
   fits: the few microseconds the GPU idles at each synchronisation are part of what a kernel
   reads (a power-limited GEMM of 0.2-0.3 ms read 0.4-1.9% slower in batches of ~50 than in
   batches of 10 on an H200, docs/benchmarks.md), and the suite's history was measured in
   batches of 10.
3. *Warm-up* ends when two consecutive batches agree: their medians within `stable_rel`. The
   correctness check's launches ran just before on the same device and count as warm-up time
   (`warmed_s`), so warm-up only needs the two batches, at least `MIN_WARMUP_S` in all, and at
   most `MAX_WARMUP_S` (the former fixed warm-up). The batch that showed the stability was
   itself run on a settled device, so its samples are the first timed ones. A kernel timed
   one launch per batch (≥ `BATCH_TARGET_S` long) keeps the launch before it too: that launch
   is itself within `stable_rel` of a settled one (a batch of many launches may agree by its
   median while holding a few unsettled ones, so it is not kept). A 1.2 s kernel spent a
   launch per job on warm-up alone.
   *The device to itself.* On a GPU shared with the next jobs' preparation
   (`workers.isolation.device_lock`), the loop may start while a preparation step ends: warm-up batches
   run meanwhile (the GPU works instead of waiting), but only a batch run with the device held
   can end the warm-up or be a sample, and the launch before it counts only if it was held too.
   A kernel whose one launch takes `WAIT_LAUNCH_S` or more waits for the device after the
   probe instead: a launch of its own could outlast the step by a second.
4. *Sampling* by the rule above. A long kernel has little relative noise: its CI is tight after
   a few samples, and with the budget clause it is timed `BUDGET_MIN_SAMPLES` times rather than
   a fixed 50.

GPU, fixed (`method="fixed"`, the former rule, kept to compare against): at least 1 s of
warm-up and 50 samples, batches of 10 whatever the kernel's length.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from workers.measure.stats import median_ci

# GPU work between two host synchronisations (see the module docstring, step 2).
BATCH_TARGET_S = 0.02
MIN_BATCH_S = 0.001
MAX_BATCH = 100
# Warm-up bounds (step 3). The upper bound is the former fixed warm-up: a GPU under sustained
# load settles at a lower clock than a cold one, and a second of back-to-back launches was
# enough for that on an H100 and an H200.
MIN_WARMUP_S = 0.1
MAX_WARMUP_S = 1.0
# The smallest sample count whose order-statistic interval reaches 95% coverage ([x(1), x(6)]
# covers the median with probability 1 - 2/64); below it the "interval" is the sample range.
CI_MIN_SAMPLES = 6
# The budget ends the loop only once there are this many samples (a median of at least three).
BUDGET_MIN_SAMPLES = 3
# A launch this long waits for the device rather than warm up beside a preparation step
# (step 3): a step takes ≤ 0.3 s, and a launch started just before it ends runs on.
WAIT_LAUNCH_S = 0.05

# The fixed rule (method="fixed").
FIXED_BATCH = 10
FIXED_MIN_WARMUP_S = 1.0
FIXED_MIN_SAMPLES = 50

METHODS = ("adaptive", "fixed")


@dataclass(frozen=True)
class TimingSettings:
    budget_s: float = 2.0
    warmup_s: float = 0.1  # CPU: warm-up wall time before sampling
    min_warmup: int = 2  # CPU: warm-up calls before sampling
    min_samples: int = 10  # CPU; and the fixed GPU rule's floor before it is raised to 50
    max_samples: int = 2000
    target_rel_ci: float = 0.01
    flush: bool = True
    method: str = "adaptive"  # GPU: "adaptive" or "fixed"
    stable_rel: float = 0.005  # GPU adaptive: consecutive batch medians this close end the warm-up
    # GPU adaptive: the CI clause needs at least this much sampling. A power-limited kernel's
    # clock oscillates under the power cap: on an H200, medians of 0.1-0.5 s windows of a bf16
    # 8192³ GEMM were 2-9% off the settled median and those of 1 s windows within 2%
    # (benchmarks/gpu_settling.py, docs/benchmarks.md), while the samples of one short window
    # agree so well that their CI alone would stop the loop after a tenth of a second.
    min_sampling_s: float = 1.0
    # GPU adaptive: warm up beside a preparation step in progress (step 3, "the device to
    # itself"); False: wait for it idle first, as loops did before (FLOPWATCH_WARM_BESIDE_STEP=0,
    # to measure what it buys).
    warm_beside_step: bool = True

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"timing method must be one of {METHODS}, got {self.method!r}")
        if self.budget_s <= 0 or self.max_samples < BUDGET_MIN_SAMPLES:
            raise ValueError("timing budget must be positive and max_samples at least 3")


@dataclass(frozen=True)
class Timing:
    samples_s: list[float]
    median_s: float
    ci_low_s: float
    ci_high_s: float
    converged: bool
    stop_reason: str
    settings: dict
    # Where the loop's time went (phase accounting of the job): warm-up, then sampling.
    warmup_s: float = 0.0
    sampling_s: float = 0.0
    batch: int = 1  # samples per host synchronisation (GPU)
    warmup_reason: str = ""  # GPU adaptive: "stable" or "max_warmup"
    warmup_launches: int = 0
    # GPU adaptive: seconds of the loop before the device was its own (warm-up beside a
    # preparation step, or a wait for it; 0 when it was free at once).
    device_free_after_s: float = 0.0

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


def ci_tight(samples: list[float], target_rel_ci: float, min_samples: int) -> bool:
    """The CI clause: enough samples and a median CI half-width within `target_rel_ci`."""
    if len(samples) < max(min_samples, 1):
        return False
    lo, hi = median_ci(samples)
    return (hi - lo) / 2 <= target_rel_ci * _median(samples)


def measure(sample_once: Callable[[], float | list[float]], warmup: Callable[[], None],
            settings: TimingSettings, clock: Callable[[], float] = time.perf_counter) -> Timing:
    """Drive any sampler (CPU wall clock, or a batch of GPU event pairs) with the common
    stopping rule, after a warm-up of `min_warmup` calls and `warmup_s` seconds."""
    start = clock()
    n = 0
    while n < settings.min_warmup or clock() - start < settings.warmup_s:
        warmup()
        n += 1
        if clock() - start > settings.budget_s:
            break
    warmed = clock()
    samples: list[float] = []
    deadline = clock() + settings.budget_s
    reason = "max_samples"
    while len(samples) < settings.max_samples:
        got = sample_once()
        samples.extend(got if isinstance(got, list) else [got])
        if ci_tight(samples, settings.target_rel_ci, max(settings.min_samples, CI_MIN_SAMPLES)):
            reason = "ci_target"
            break
        if clock() > deadline and len(samples) >= BUDGET_MIN_SAMPLES:
            reason = "budget"
            break
    end = clock()
    return _timing(samples, reason, settings, warmed - start, end - warmed)


def _timing(samples: list[float], reason: str, settings: TimingSettings, warmup_s: float, sampling_s: float,
            **extra) -> Timing:
    lo, hi = median_ci(samples)
    return Timing(samples, _median(samples), lo, hi, reason == "ci_target", reason, asdict(settings),
                  round(warmup_s, 4), round(sampling_s, 4), **extra)


def batch_size(launch_s: float, flush_s: float) -> int:
    """Samples per synchronisation (module docstring, step 2): FIXED_BATCH, fewer when that
    is more than BATCH_TARGET_S of GPU work, more when it is less than MIN_BATCH_S; 1..MAX_BATCH."""
    per_sample = max(launch_s + flush_s, 1e-9)
    at_most = round(BATCH_TARGET_S / per_sample)
    at_least = round(MIN_BATCH_S / per_sample)
    return max(1, min(MAX_BATCH, max(min(FIXED_BATCH, at_most), at_least)))


def stable(previous: list[float], current: list[float], rel: float) -> bool:
    """Two consecutive batches agree: their medians within `rel` of each other."""
    a, b = _median(previous), _median(current)
    return abs(b - a) <= rel * min(a, b)


def measure_adaptive(sample_batch: Callable[[int], list[float]], probe: Callable[[], tuple[float, float]],
                     settings: TimingSettings, warmed_s: float = 0.0,
                     clock: Callable[[], float] = time.perf_counter,
                     device_ready: Callable[[], bool] = lambda: True,
                     device_wait: Callable[[], None] = lambda: None) -> Timing:
    """The adaptive GPU rule (module docstring) over any batch sampler.

    `probe()` returns (one launch's seconds, one flush's seconds); `sample_batch(n)` returns n
    samples taken back to back; `warmed_s` is the time the device already spent running this
    kernel (the correctness launches). `device_ready()` says whether the device is this loop's
    alone now (it takes it if free), `device_wait()` waits until it is (step 3, "the device to
    itself"). `clock` is injectable so the rule is tested without a GPU."""
    start = clock()
    free_after: float | None = None  # seconds from the start to the device held

    def alone() -> bool:
        nonlocal free_after
        if free_after is None and device_ready():
            free_after = clock() - start
        return free_after is not None

    def wait_alone() -> None:
        nonlocal free_after
        if free_after is None:
            device_wait()
            free_after = clock() - start

    probe_alone = alone()
    launch_s, flush_s = probe()
    batch = batch_size(launch_s, flush_s)
    if launch_s >= WAIT_LAUNCH_S:
        wait_alone()
    previous, previous_start, previous_alone = [launch_s], start, probe_alone
    launches = 1
    samples: list[float] = []
    warmup_reason = "max_warmup"
    sampling_start = clock()
    while True:
        current_alone = alone()
        batch_start = clock()
        current = sample_batch(batch)
        launches += len(current)
        warm_for = clock() - start + warmed_s
        if current_alone and warm_for >= MIN_WARMUP_S and stable(previous, current, settings.stable_rel):
            samples, sampling_start, warmup_reason = list(current), batch_start, "stable"
            if batch == 1 and previous_alone:  # one launch each: the launch before is within stable_rel of a settled one
                samples, sampling_start = previous + samples, previous_start
            launches -= len(samples)
            break
        if clock() - start >= MAX_WARMUP_S:
            wait_alone()
            sampling_start = clock()
            break
        previous, previous_start, previous_alone = current, batch_start, current_alone
    warmup_s = sampling_start - start
    reason = "max_samples"
    while len(samples) < settings.max_samples:
        elapsed = clock() - sampling_start
        if (len(samples) >= CI_MIN_SAMPLES and elapsed >= settings.min_sampling_s
                and ci_tight(samples, settings.target_rel_ci, CI_MIN_SAMPLES)):
            reason = "ci_target"
            break
        if elapsed >= settings.budget_s and len(samples) >= BUDGET_MIN_SAMPLES:
            reason = "budget"
            break
        samples.extend(sample_batch(min(batch, settings.max_samples - len(samples))))
    return _timing(samples, reason, settings, warmup_s, clock() - sampling_start, batch=batch,
                   warmup_reason=warmup_reason, warmup_launches=launches,
                   device_free_after_s=round(free_after or 0.0, 4))


def time_cpu(call: Callable[[], None], settings: TimingSettings,
             after_first: Callable[[], None] | None = None,
             before_each: Callable[[], None] | None = None) -> Timing:
    """Wall-clock samples of a host call (CPU kernels and the CPU torch peer). `after_first()`
    runs once, after the first call and outside any sample (as in `time_gpu`); `before_each()`
    before every call, outside its sample (a backward pass's gradients reset)."""
    pending = [after_first] if after_first is not None else []
    prepare = before_each or (lambda: None)

    def warm() -> None:
        prepare()
        call()
        if pending:
            pending.pop()()

    def once() -> float:
        if pending:  # no warm-up call ran: the first call is kept, not sampled
            warm()
        prepare()
        t0 = time.perf_counter()
        call()
        return time.perf_counter() - t0

    return measure(once, warm, settings)


def time_gpu(call: Callable[[], None], settings: TimingSettings, flush_bytes: int, warmed_s: float = 0.0,
             after_first: Callable[[], None] | None = None, claim=None,
             before_each: Callable[[], None] | None = None) -> Timing:
    """Device-event samples of one launch each, with the caches flushed before every sample
    by writing a buffer larger than L2 (+ Infinity Cache on MI300/MI325X), so a kernel is
    timed reading its inputs from HBM as it would in a real model. `warmed_s`: seconds the
    kernel already ran on this device just before (the correctness launches).
    `after_first()` runs once, after the first launch has completed and outside any timed
    region (the child keeps that launch's output to compare with the last one's). `claim`: the
    loop's `workers.isolation.device_lock.Claim` (None: the device is this loop's alone).
    `before_each()` runs on the host before every launch's flush, outside its events (a backward
    pass's gradients reset)."""
    import torch

    flush = torch.empty(max(flush_bytes // 4, 1), dtype=torch.int32, device="cuda") if settings.flush else None
    events: list[tuple] = []

    pending = [after_first] if after_first is not None else []

    def sample_batch(n: int) -> list[float]:
        while len(events) < n:
            events.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
        for start_ev, end_ev in events[:n]:
            if before_each is not None:
                before_each()
            if flush is not None:
                flush.zero_()
            start_ev.record()
            call()
            end_ev.record()
            if pending:  # once: after the first launch, outside its events
                torch.cuda.synchronize()
                pending.pop()()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) / 1e3 for s, e in events[:n]]

    if settings.method == "fixed":
        fixed = replace(settings, warmup_s=max(settings.warmup_s, FIXED_MIN_WARMUP_S),
                        min_samples=max(settings.min_samples, FIXED_MIN_SAMPLES))

        def once() -> list[float]:
            return sample_batch(FIXED_BATCH)

        # Warm up in the sampling regime itself (flush, launch, flush, launch…): a warm-up of
        # bare launches heats the GPU more than the measurement does and leaves it at a lower clock.
        if claim is not None:
            claim.wait()
        t = measure(once, once, fixed)
        return replace(t, batch=FIXED_BATCH)

    def probe() -> tuple[float, float]:
        launch_s = sample_batch(1)[0]
        if flush is None:
            return launch_s, 0.0
        start_ev, end_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start_ev.record()
        flush.zero_()
        end_ev.record()
        end_ev.synchronize()
        return launch_s, start_ev.elapsed_time(end_ev) / 1e3

    if claim is None:
        return measure_adaptive(sample_batch, probe, settings, warmed_s)
    if not settings.warm_beside_step:
        claim.wait()  # then ready() is true from the start
    return measure_adaptive(sample_batch, probe, settings, warmed_s, device_ready=claim.ready,
                            device_wait=claim.wait)

