"""The timing loops' stopping rule, driven by synthetic samplers and a simulated clock: each
clause (CI target, minimum samples, budget, max samples) and the adaptive GPU rule's batch
size, warm-up and credit for earlier launches."""

from __future__ import annotations

import itertools

import pytest

from workers.measure import timing
from workers.measure.timing import TimingSettings, measure, measure_adaptive


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
    (2.5e-3, 0.0, 8),          # ten launches would be 25 ms: at most 20 ms of work per batch
    (1e-3, 0.0, timing.FIXED_BATCH),   # the fixed rule's ten launches, 10 ms of work
    (2e-4, 1e-4, timing.FIXED_BATCH),  # 3 ms per ten: the fixed rule's cadence
    (2e-5, 0.0, 50),           # ten would be 0.2 ms: at least 1 ms of work per batch
    (5e-6, 1e-4, timing.FIXED_BATCH),  # the flush makes ten launches 1.05 ms
    (1e-6, 0.0, timing.MAX_BATCH),     # 1000 wanted for 1 ms, capped
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
    assert t.batch == timing.FIXED_BATCH
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


# -- the device to itself (a preparation step in progress when the loop starts) ------------

class SharedDevice(FakeDevice):
    """A `FakeDevice` whose lock is held by a preparation step until `free_at` (simulated
    seconds); launches beside the step read `beside` times slower."""

    def __init__(self, durations, free_at: float, beside: float = 1.5, flush_s: float = 0.0):
        super().__init__(durations, flush_s)
        self.free_at, self.beside = free_at, beside
        self.waited = 0.0

    def launch(self) -> float:
        d = next(self.durations) * (self.beside if self.now < self.free_at else 1.0)
        self.now += d + self.flush_s
        self.launches += 1
        return d

    def ready(self) -> bool:
        return self.now >= self.free_at

    def wait(self) -> None:
        if self.now < self.free_at:
            self.waited += self.free_at - self.now
            self.now = self.free_at


def shared(durations, free_at: float, settings: TimingSettings | None = None, warmed_s: float = 0.2):
    dev = SharedDevice(durations, free_at)
    t = measure_adaptive(dev.batch, dev.probe, settings or TimingSettings(), warmed_s, clock=dev.clock,
                         device_ready=dev.ready, device_wait=dev.wait)
    return t, dev


def test_a_short_kernel_warms_up_beside_a_step_and_samples_only_once_the_device_is_free():
    t, dev = shared(constant(2e-4), free_at=0.25)
    assert dev.waited == 0.0  # it never sat idle: it launched until the step ended
    assert t.device_free_after_s >= 0.25
    # Every sample ran on a free device: none of the launches read 1.5× slower beside the step.
    assert max(t.samples_s) == pytest.approx(2e-4)
    assert t.warmup_s >= 0.25 and t.warmup_reason == "stable"


def test_without_the_free_device_rule_the_slow_launches_beside_the_step_would_be_samples():
    # The same device with the rule blind to the step (device always "ready"): the warm-up ends
    # on two batches beside the step, and slowed launches become samples. This is what the rule
    # above prevents.
    dev = SharedDevice(constant(2e-4), free_at=0.25)
    t = measure_adaptive(dev.batch, dev.probe, TimingSettings(), 0.2, clock=dev.clock)
    assert max(t.samples_s) == pytest.approx(3e-4)


def test_a_long_probe_run_beside_a_step_is_not_kept_as_a_sample():
    t, dev = shared(constant(1.2), free_at=0.1)
    # The probe started beside the step and read 1.8 s; by its end the device was free. A long
    # kernel's probe is normally kept when the next launch agrees; this one is not.
    assert dev.waited == 0.0
    assert t.samples_s and all(x == pytest.approx(1.2) for x in t.samples_s)


def test_a_long_kernel_asked_while_the_step_still_runs_waits_for_it_rather_than_launch():
    t, dev = shared(constant(0.06), free_at=5.0)
    assert dev.waited > 4.0  # probe (0.09 s beside the step), then it waited for the device
    assert t.device_free_after_s == pytest.approx(5.0)
    assert all(x == pytest.approx(0.06) for x in t.samples_s)


def test_a_step_that_outlasts_max_warmup_is_waited_for_before_sampling():
    t, dev = shared(constant(2e-4), free_at=3.0, settings=TimingSettings(budget_s=0.5))
    assert t.warmup_reason == "max_warmup"
    assert dev.waited > 1.5  # warmed for MAX_WARMUP_S beside it, then waited for the rest
    assert max(t.samples_s) == pytest.approx(2e-4)


def test_the_driver_asks_loops_to_wait_idle_only_when_told(monkeypatch):
    from pipeline.project.config import ProjectConfig
    from pipeline.run import runflow
    from pipeline.run.runflow import RunOptions

    config, options = ProjectConfig(), RunOptions()
    monkeypatch.delenv(runflow.WARM_BESIDE_STEP_ENV, raising=False)
    assert TimingSettings(**runflow._timing(config, options)).warm_beside_step is True
    monkeypatch.setenv(runflow.WARM_BESIDE_STEP_ENV, "0")
    assert TimingSettings(**runflow._timing(config, options)).warm_beside_step is False
