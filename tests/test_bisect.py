"""The bisection search over a fake evaluate: noisy samples drawn around a per-commit time."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.history.bisect import BAD, GOOD, SKIP, Bisection, Measurement, bound


class FakeHistory:
    """Commits c0..cN; commits before `first_bad` run in 1.0 ms, from it on in `slow` ms,
    each call drawing 40 samples with 2% noise. `broken` commits fail to build."""

    def __init__(self, n: int, first_bad: int, slow: float = 1.3, broken=(), times=None, noise=0.02):
        self.commits = [f"c{i:02d}" for i in range(n + 1)]
        self.times = times or {c: (slow if i >= first_bad else 1.0) for i, c in enumerate(self.commits)}
        self.broken = set(broken)
        self.noise = noise
        self.calls: list[str] = []

    def __call__(self, sha: str) -> Measurement:
        self.calls.append(sha)
        if sha in self.broken:
            return Measurement(sha, False, reason="build_failed: error: expected ';'")
        rng = np.random.default_rng(len(self.calls))
        samples = self.times[sha] * 1e-3 * (1 + self.noise * rng.standard_normal(40))
        return Measurement(sha, True, tuple(samples))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 15, 16, 40])
def test_clean_step_finds_every_culprit_within_bound(n):
    for first_bad in range(1, n + 1):
        fake = FakeHistory(n, first_bad)
        outcome = Bisection(fake.commits, fake, threshold=0.05).run()
        assert outcome.reproduced
        assert outcome.first_bad == fake.commits[first_bad], (n, first_bad, outcome.message)
        assert outcome.last_good == fake.commits[first_bad - 1]
        assert outcome.evaluations <= bound(n), (n, first_bad, outcome.evaluations)
        assert outcome.measurements == len(fake.calls)


def test_bound_is_log2_plus_two():
    assert [bound(n) for n in (1, 2, 3, 4, 15, 16, 17)] == [2, 3, 4, 4, 6, 6, 7]


def test_broken_commit_is_skipped_and_reported():
    fake = FakeHistory(15, first_bad=10, broken={"c07"})
    outcome = Bisection(fake.commits, fake, threshold=0.05).run()
    assert outcome.first_bad == "c10"
    assert outcome.skipped == ("c07",)
    skip = next(p for p in outcome.probes if p.sha == "c07")
    assert skip.verdict == SKIP and "build_failed" in skip.reason
    # The next probe after a skip is the untried commit nearest the middle, not a restart.
    assert [p.sha for p in outcome.probes][:2] == ["c07", "c08"]


def test_skipped_culprit_leaves_candidates():
    fake = FakeHistory(8, first_bad=4, broken={"c04"})
    outcome = Bisection(fake.commits, fake, threshold=0.05).run()
    assert outcome.first_bad is None
    assert outcome.candidates == ("c04", "c05")
    assert "skipped" in outcome.message


def test_regression_that_does_not_reproduce_stops_after_the_ends():
    fake = FakeHistory(15, first_bad=10, slow=1.0)
    outcome = Bisection(fake.commits, fake, threshold=0.05).run()
    assert not outcome.reproduced and outcome.first_bad is None
    assert "did not reproduce" in outcome.message
    assert outcome.probes == () and outcome.evaluations == 2
    assert set(fake.calls) == {"c00", "c15"}


def test_unbuildable_end_is_an_error_not_a_search():
    fake = FakeHistory(4, first_bad=2, broken={"c04"})
    outcome = Bisection(fake.commits, fake).run()
    assert not outcome.reproduced and "bad end" in outcome.message


def test_unsure_probe_is_measured_again_then_goes_to_the_nearer_end():
    # c02 sits 12% above the good end on a 30% step: it is slower than good and faster than
    # bad, so neither rule decides; after max_repeats it goes to the good side (nearer median).
    times = {"c00": 1.0, "c01": 1.0, "c02": 1.12, "c03": 1.3, "c04": 1.3}
    fake = FakeHistory(4, 0, times=times)
    outcome = Bisection(fake.commits, fake, threshold=0.05, max_repeats=3).run()
    probe = next(p for p in outcome.probes if p.sha == "c02")
    assert probe.measurements == 3 and probe.verdict == GOOD and "unsure" in probe.reason
    assert fake.calls.count("c02") == 3
    assert outcome.first_bad == "c03"
    assert all(p.verdict in (GOOD, BAD) for p in outcome.probes)


def test_max_evals_stops_early_with_candidates():
    fake = FakeHistory(32, first_bad=20)
    outcome = Bisection(fake.commits, fake, threshold=0.05, max_evals=4).run()
    assert outcome.evaluations == 4 and outcome.first_bad is None
    assert fake.commits[20] in outcome.candidates and len(outcome.candidates) > 1
    assert "limit" in outcome.message


class DriftingHistory(FakeHistory):
    """The machine gets 60% slower for everything after the ends were first measured, as when
    a neighbour starts a job: a probe compared with stale end samples would look bad."""

    def __call__(self, sha: str) -> Measurement:
        m = super().__call__(sha)
        factor = 1.6 if len(self.calls) > 2 else 1.0
        return Measurement(m.sha, m.ok, tuple(x * factor for x in m.samples), m.reason)


def test_load_drift_between_probes_does_not_mislead():
    fake = DriftingHistory(15, first_bad=12)
    outcome = Bisection(fake.commits, fake, threshold=0.05).run()
    assert outcome.first_bad == "c12", [(p.sha, p.verdict, p.reason) for p in outcome.probes]
    assert outcome.evaluations <= bound(15)


def test_probes_with_the_ends_build_are_not_measured():
    """Only commits 5 and 9 change the kernel (5: a refactor that keeps the speed, 9: the
    slowdown): every other probe shares an identity with an end or an earlier probe and takes
    its verdict unmeasured."""
    fake = FakeHistory(15, first_bad=9)
    build = {c: ("A" if i < 5 else "A2" if i < 9 else "B") for i, c in enumerate(fake.commits)}
    outcome = Bisection(fake.commits, fake, threshold=0.05, identity=build.get).run()
    assert outcome.first_bad == "c09" and outcome.last_good == "c08"
    measured = {p.sha for p in outcome.probes if p.measurements}
    assert measured <= {f"c{i:02d}" for i in range(5, 9)}  # only the "A2" build needed a measurement
    assert len(measured) == 1
    assert all("same build as" in p.reason for p in outcome.probes if not p.measurements)
    assert set(fake.calls) <= {"c00", "c15", *measured}


def test_without_identities_every_probe_is_measured():
    fake = FakeHistory(15, first_bad=9)
    outcome = Bisection(fake.commits, fake, threshold=0.05).run()
    assert all(p.measurements for p in outcome.probes)
