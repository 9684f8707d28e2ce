"""Steps within an unchanged build are the machine's, not a commit's (`history.same_build`):
`detect` records the step of a series whose build changed at the step, and sets apart the
same-sized step of a series measured from one build throughout (the built-in peer's case)."""

from __future__ import annotations

import dataclasses

import numpy as np

from pipeline.commands.detect import detect, same_build_line
from pipeline.history import same_build
from pipeline.history.regressions import Regression, RegressionStore
from pipeline.store import Store
from workers.core.records import Result

N, STEP = 12, 6  # commits; from STEP on, every series runs 1.5x longer
SHAPE, FLOPS = "M=256,N=256,K=256", 2 * 256 ** 3


def _sha(i: int) -> str:
    return f"{i + 1:040x}"


def _fill(store: Store, identity_of) -> None:
    """Every commit: the series "kernel", "peer" and "old" (stored without an identity), each
    1.5x slower from STEP on; identity_of(variant, i) gives each result's identity."""
    for i in range(N):
        sha = _sha(i)
        store.record_commit(sha, f"commit {i}", "A <a@x>", f"2026-01-{i + 1:02d}", [_sha(i - 1)] if i else [])
        run = store.start_run(sha, False, "run", "", "", "run")
        for k, variant in enumerate(("kernel", "peer", "old")):
            rng = np.random.default_rng(100 * i + k)
            base = 1e-3 * (1.5 if i >= STEP else 1.0)
            samples = tuple(base * (1 + 0.002 * rng.standard_normal(20)))
            median = float(np.median(samples))
            store.record_result(run, sha, False, Result(
                variant=variant, op="gemm", backend="cpp", shape=SHAPE, dtype="fp32", device="cpu:x", status="ok",
                median_s=median, ci_low_s=median * 0.999, ci_high_s=median * 1.001, samples_s=samples, flops=FLOPS,
                identity=identity_of(variant, i)))


def _identity(variant: str, i: int) -> str:
    if variant == "kernel":  # its source changed at the step
        return "kernel-v2" if i >= STEP else "kernel-v1"
    return "peer-build" if variant == "peer" else ""


def test_detect_records_the_changed_build_and_sets_apart_the_unchanged_one(tmp_path):
    with Store(tmp_path / "r.db") as store:
        _fill(store, _identity)
        found = detect(store, [_sha(i) for i in range(N)], None)
        recorded = sorted(r.variant for r, _ in found.recorded)
        assert recorded == ["kernel", "old"]  # "old" has no identity: judged as before
        assert [r.variant for r in found.same_build] == ["peer"]
        step = found.same_build[0]
        assert (step.good_sha, step.bad_sha) == (_sha(STEP - 1), _sha(STEP)) and step.change < -0.3
        assert sorted(r.variant for r in RegressionStore(store).all()) == ["kernel", "old"]
        line = same_build_line(found.same_build)
        assert line.startswith("1 step(s) within an unchanged build") and f"peer {SHAPE}" in line


def test_both_ends_must_hold_one_and_the_same_identity(tmp_path):
    with Store(tmp_path / "r.db") as store:
        _fill(store, lambda variant, i: "" if variant == "old" else "one-build")
        peer = Regression("peer", SHAPE, "fp32", "cpu:x", _sha(STEP - 1), _sha(STEP), -0.33, 2.0, 1.3, 0.01)
        assert same_build.unchanged_build(store, peer)
        assert not same_build.unchanged_build(store, dataclasses.replace(peer, variant="old"))  # no identity
        # a re-run at the bad end from another build: the range may have changed it
        run = store.start_run(_sha(STEP), False, "run", "", "", "run")
        store.record_result(run, _sha(STEP), False, Result(
            variant="peer", op="gemm", backend="cpp", shape=SHAPE, dtype="fp32", device="cpu:x", status="ok",
            median_s=1e-3, samples_s=(1e-3,), flops=FLOPS, identity="another-build"))
        assert not same_build.unchanged_build(store, peer)
        kept, machine = same_build.split(store, [peer, dataclasses.replace(peer, variant="kernel")])
        assert [r.variant for r in kept] == ["peer"] and [r.variant for r in machine] == ["kernel"]


def _build_change_at_step(store, slow_from: int) -> list[str]:
    """N commits of one kernel whose build changes at STEP, measured 1.5x slower from commit
    `slow_from` on (a noisy commit beside the change reads at the other level); their SHAs."""
    for i in range(N):
        sha = _sha(i)
        store.record_commit(sha, f"commit {i}", "A <a@x>", f"2026-01-{i + 1:02d}", [_sha(i - 1)] if i else [])
        run = store.start_run(sha, False, "run", "", "", "run")
        rng = np.random.default_rng(i)
        base = 1e-3 * (1.5 if i >= slow_from else 1.0)
        samples = tuple(base * (1 + 0.002 * rng.standard_normal(20)))
        median = float(np.median(samples))
        store.record_result(run, sha, False, Result(
            variant="kernel", op="gemm", backend="cpp", shape=SHAPE, dtype="fp32", device="cpu:x", status="ok",
            median_s=median, ci_low_s=median * 0.999, ci_high_s=median * 1.001, samples_s=samples, flops=FLOPS,
            identity="kernel-v2" if i >= STEP else "kernel-v1"))
    return [_sha(i) for i in range(N)]


def test_a_step_a_busy_commit_pulled_early_is_moved_onto_the_build_change(tmp_path):
    """The kernel's build changes at STEP, but the commit before it was measured on a busy
    machine, at the slow level: the detector splits a commit early, between two commits of the
    old build (so it read "within an unchanged build" and nothing was recorded, on the 2-core CI
    machine). The step is the build change's, one commit on; a build change further than NEAR
    measured commits away leaves it the machine's."""
    with Store(tmp_path / "r.db") as store:
        order = _build_change_at_step(store, slow_from=STEP - 1)  # the busy commit STEP - 1 reads slow too
        found = detect(store, order, None)
        assert [(r.good_sha, r.bad_sha) for r, _ in found.recorded] == [(_sha(STEP - 1), _sha(STEP))], found
        assert not found.same_build
        early = Regression("kernel", SHAPE, "fp32", "cpu:x", _sha(STEP - 2), _sha(STEP - 1), -0.33, 2.0, 1.3, 0.01)
        assert same_build.beside_a_build_change(store, early, order).bad_sha == _sha(STEP)
        far = dataclasses.replace(early, good_sha=_sha(STEP - 4), bad_sha=_sha(STEP - 3))
        assert same_build.beside_a_build_change(store, far, order) is None  # three commits from the change
        assert same_build.split(store, [far], order) == ([], [far])


def test_a_step_pulled_late_onto_the_new_builds_commits_is_moved_back_onto_the_build_change(tmp_path):
    """The other direction: the kernel's build changes at STEP, but STEP, the new build's first
    commit, reads at the old level (a noisy measurement), so the detector splits a commit late,
    between STEP and STEP + 1, two commits of the new build. The step is the build change's, one
    commit before its good end; one three measured commits late is left the machine's."""
    with Store(tmp_path / "r.db") as store:
        order = _build_change_at_step(store, slow_from=STEP + 1)  # commit STEP reads fast, at the old level
        found = detect(store, order, None)
        assert [(r.good_sha, r.bad_sha) for r, _ in found.recorded] == [(_sha(STEP - 1), _sha(STEP))], found
        assert not found.same_build
        late = Regression("kernel", SHAPE, "fp32", "cpu:x", _sha(STEP), _sha(STEP + 1), -0.33, 2.0, 1.3, 0.01)
        moved = same_build.beside_a_build_change(store, late, order)
        assert (moved.good_sha, moved.bad_sha) == (_sha(STEP - 1), _sha(STEP))
        far = dataclasses.replace(late, good_sha=_sha(STEP + 2), bad_sha=_sha(STEP + 3))
        assert same_build.beside_a_build_change(store, far, order) is None  # three commits from the change
        assert same_build.split(store, [far], order) == ([], [far])


def test_ends_that_each_measured_two_builds_are_not_an_unchanged_build(tmp_path):
    """Both ends measured the same two builds (a re-run of each from another build): the sets of
    identities are equal, but which build each end's figure is of cannot be told, so the range
    may have moved it. Such a step is kept as a commit's, not set apart as the machine's."""
    with Store(tmp_path / "r.db") as store:
        _fill(store, lambda variant, i: "one-build")
        peer = Regression("peer", SHAPE, "fp32", "cpu:x", _sha(STEP - 1), _sha(STEP), -0.33, 2.0, 1.3, 0.01)
        assert same_build.unchanged_build(store, peer)
        for sha in (_sha(STEP - 1), _sha(STEP)):
            run = store.start_run(sha, False, "run", "", "", "run")
            store.record_result(run, sha, False, Result(
                variant="peer", op="gemm", backend="cpp", shape=SHAPE, dtype="fp32", device="cpu:x", status="ok",
                median_s=1e-3, samples_s=(1e-3,), flops=FLOPS, identity="another-build"))
        assert same_build.identities_at(store, peer, _sha(STEP - 1)) == {"one-build", "another-build"}
        assert same_build.identities_at(store, peer, _sha(STEP)) == {"one-build", "another-build"}
        assert not same_build.unchanged_build(store, peer)
        assert same_build.split(store, [peer], [_sha(i) for i in range(N)]) == ([peer], [])
