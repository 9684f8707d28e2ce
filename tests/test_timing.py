"""The timing loops' stopping rule, driven by synthetic samplers and a simulated clock: each
clause (CI target, minimum samples, budget, max samples) and the adaptive GPU rule's batch
size, warm-up and credit for earlier launches."""

from __future__ import annotations

import itertools

import pytest

from workers import timing
from workers.timing import TimingSettings, measure, measure_adaptive


class FakeDevice:
    """A kernel whose launches take the durations `durations` yields; the clock advances by
    each launch plus a fixed flush, as a GPU's would."""

    def __init__(self, durations, flush_s: float = 0.0):
        self.durations = iter(durations)
        self.flush_s = flush_s
        self.now = 0.0
        self.launches = 0

    def clock(self) -> float:
        return self.now

    def launch(self) -> float:
        d = next(self.durations)
        self.now += d + self.flush_s
        self.launches += 1
        return d

    def batch(self, n: int) -> list[float]:
        return [self.launch() for _ in range(n)]

    def probe(self) -> tuple[float, float]:
        return self.launch(), self.flush_s


def constant(value: float):
    return itertools.repeat(value)


def alternating(a: float, b: float):
    return itertools.cycle([a, b])


# -- the common rule (CPU, and the fixed GPU rule) -------------------------------------------

def cpu_measure(durations, settings: TimingSettings):
    dev = FakeDevice(durations)
    return measure(dev.launch, dev.launch, settings, clock=dev.clock), dev


def test_steady_samples_stop_at_the_ci_target_after_min_samples():
    t, _ = cpu_measure(constant(0.01), TimingSettings(min_samples=12, warmup_s=0.0))
    assert t.stop_reason == "ci_target" and t.converged
    assert len(t.samples_s) == 12


def test_min_samples_never_below_what_a_95pct_interval_needs():
    t, _ = cpu_measure(constant(0.01), TimingSettings(min_samples=2, warmup_s=0.0))
    assert len(t.samples_s) == timing.CI_MIN_SAMPLES


def test_noisy_samples_stop_at_the_budget_not_before():
    # ±50% alternation: the median's CI never gets within 1%
    settings = TimingSettings(budget_s=0.5, warmup_s=0.0)
    t, _ = cpu_measure(alternating(0.01, 0.02), settings)
    assert t.stop_reason == "budget" and not t.converged
    assert sum(t.samples_s) >= settings.budget_s
    assert sum(t.samples_s) < settings.budget_s + 0.021  # stopped at the first sample past it


def test_budget_needs_at_least_three_samples():
    t, _ = cpu_measure(alternating(1.0, 2.0), TimingSettings(budget_s=0.1, warmup_s=0.0, min_warmup=0))
    assert t.stop_reason == "budget" and len(t.samples_s) == timing.BUDGET_MIN_SAMPLES


def test_max_samples_caps_a_loop_that_neither_converges_nor_spends_its_budget():
    t, _ = cpu_measure(alternating(1e-6, 2e-6), TimingSettings(budget_s=100.0, max_samples=40, warmup_s=0.0))
    assert t.stop_reason == "max_samples" and len(t.samples_s) == 40


def test_warmup_calls_are_not_samples():
    t, dev = cpu_measure(constant(0.01), TimingSettings(min_warmup=7, warmup_s=0.0))
    assert dev.launches == 7 + len(t.samples_s)
    assert t.warmup_s == pytest.approx(0.07)


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="timing method"):
        TimingSettings(method="quick")


# -- the adaptive GPU rule --------------------------------------------------------------------

def adaptive(durations, settings: TimingSettings | None = None, warmed_s: float = 0.0, flush_s: float = 1e-4):
    settings = settings or TimingSettings()
    dev = FakeDevice(durations, flush_s)
    return measure_adaptive(dev.batch, dev.probe, settings, warmed_s, clock=dev.clock), dev


@pytest.mark.parametrize("launch_s, flush_s, expected", [
    (1.0, 1e-4, 1),            # a second-long kernel: one launch per synchronisation
    (0.05, 1e-4, 1),           # longer than a batch's target on its own
    (5e-6, 1e-4, timing.MAX_BATCH),  # 5 µs + flush: 190 wanted, capped
    (1e-3, 0.0, 20),           # 20 ms of work per batch
])
def test_batch_size_follows_the_kernel_duration(launch_s, flush_s, expected):
    assert timing.batch_size(launch_s, flush_s) == expected


def test_a_long_kernel_is_timed_a_few_times_within_the_budget():
    t, dev = adaptive(constant(1.2))
    assert t.batch == 1
    # The probe and the next launch agreed: both are samples, no launch went to warm-up alone.
    assert t.warmup_reason == "stable" and t.warmup_launches == 0 and t.warmup_s == 0.0
    assert t.stop_reason == "budget" and len(t.samples_s) == timing.BUDGET_MIN_SAMPLES
    assert dev.launches == timing.BUDGET_MIN_SAMPLES


def test_a_long_kernel_whose_first_launch_is_off_keeps_it_out_of_the_samples():
    t, dev = adaptive(itertools.chain([1.3], constant(1.2)))
    # The probe was 8% off the next launch: no agreement within MAX_WARMUP_S, both were warm-up.
    assert t.warmup_reason == "max_warmup" and t.warmup_launches == 2
    assert 1.3 not in t.samples_s and len(t.samples_s) == timing.BUDGET_MIN_SAMPLES
    assert dev.launches == 2 + timing.BUDGET_MIN_SAMPLES


def test_a_long_steady_kernel_with_more_budget_stops_at_the_ci_target_with_few_samples():
    t, _ = adaptive(constant(1.2), TimingSettings(budget_s=60.0))
    assert t.stop_reason == "ci_target" and len(t.samples_s) == timing.CI_MIN_SAMPLES


def test_a_fast_kernel_is_batched_and_sampled_for_at_least_min_sampling_s():
    settings = TimingSettings(min_sampling_s=0.25)
    t, _ = adaptive(constant(2e-4), settings, flush_s=0.0)
    assert t.batch == 100
    assert t.stop_reason == "ci_target"
    assert t.sampling_s >= settings.min_sampling_s
    assert len(t.samples_s) % t.batch == 0  # whole batches only


def test_warmup_waits_for_two_batches_that_agree():
    # The clock settles: the first 50 launches are 10% faster (boost), then steady.
    settings = TimingSettings(stable_rel=0.005)
    durations = itertools.chain([9e-4] * 50, constant(1e-3))
    t, _ = adaptive(durations, settings, flush_s=0.0)
    assert t.warmup_reason == "stable"
    assert t.warmup_launches >= 50
    assert min(t.samples_s) == pytest.approx(1e-3)  # no boosted launch among the samples


def test_warmup_gives_up_at_max_warmup_on_a_kernel_that_never_settles():
    drifting = (1e-3 * 1.001 ** i for i in itertools.count())  # 2% slower every batch of 20
    t, _ = adaptive(drifting, TimingSettings(budget_s=0.5), flush_s=0.0)
    assert t.warmup_reason == "max_warmup"
    assert t.warmup_s >= timing.MAX_WARMUP_S
    assert t.stop_reason == "budget"


def test_earlier_launches_count_as_warmup():
    # Tiny kernel: without credit the warm-up lasts MIN_WARMUP_S; with the correctness
    # launches' time credited it ends as soon as two batches agree.
    cold, _ = adaptive(constant(1e-5), flush_s=0.0)
    warm, _ = adaptive(constant(1e-5), warmed_s=timing.MIN_WARMUP_S, flush_s=0.0)
    # the batch that showed stability is already counted as sampling
    assert cold.warmup_s + cold.batch * 1e-5 >= timing.MIN_WARMUP_S
    assert warm.warmup_s < timing.MIN_WARMUP_S / 10


def test_adaptive_max_samples():
    t, _ = adaptive(alternating(1e-5, 3e-5), TimingSettings(max_samples=250, budget_s=100.0), flush_s=0.0)
    assert t.stop_reason == "max_samples" and len(t.samples_s) == 250
