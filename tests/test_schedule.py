"""pipeline.run.schedule: the replay agrees with the real dispatcher call for call, a variant's
shapes are spread over slots only where that shortens the wall, and the lower bound."""

from __future__ import annotations

import random

import pytest
from test_slots import _FakeActor

from pipeline.fleet import slots
from pipeline.run import schedule


def _longest_first(costs: list[float], n: int) -> float:
    """Textbook longest-processing-time-first list scheduling: each call, longest first, to the
    slot with the least work so far."""
    loads = [0.0] * n
    for c in sorted(costs, reverse=True):
        loads[loads.index(min(loads))] += c
    return max(loads)


@pytest.mark.parametrize("seed", range(8))
def test_the_dispatcher_replayed_is_longest_first_to_the_slot_free_soonest(seed):
    """A slot holds a second call only when no other slot is expected free sooner, so the
    pool's wall is that of textbook LPT, holding a call behind the running one or not."""
    rng = random.Random(seed)
    n = rng.choice([1, 2, 3, 4, 8])
    costs = [round(rng.uniform(0.2, 8.0), 3) for _ in range(rng.randint(1, 40))]
    replayed = schedule.replay(costs, n)
    assert replayed["wall_s"] == pytest.approx(_longest_first(costs, n))
    assert sum(replayed["loads"]) == pytest.approx(sum(costs))
    assert sorted(set(replayed["slot_of"])) == list(range(min(n, len(costs))))


def test_no_call_waits_behind_the_longest_while_other_slots_run_short_ones():
    """8 slots, few calls: the slot of the longest call took a second one in the first round
    before the hold rule (its wall was the longest call plus that one)."""
    costs = [5.0] + [1.0] * 9
    replayed = schedule.replay(costs, 8, pinned=[[]] + [[0.5]] * 7)
    assert replayed["slot_of"].count(replayed["slot_of"][0]) == 1
    assert replayed["wall_s"] == pytest.approx(5.0)


def test_pinned_calls_run_on_their_slot_first():
    replayed = schedule.replay([2.0, 2.0], 2, pinned=[[], [3.0]])
    assert replayed["slot_of"] == [0, 0] and replayed["loads"] == [4.0, 3.0] and replayed["wall_s"] == 4.0


def test_one_variant_of_two_long_shapes_is_spread_over_two_slots_but_not_on_one():
    groups = [[6.0, 5.0]]
    assert schedule.split(groups, 1) == [[[0, 1]]]
    parts = schedule.split(groups, 2)
    assert sorted(parts[0]) == [[0], [1]]
    one = schedule.replay([11.0 + schedule.PROCESS_S], 2)["wall_s"]
    two = schedule.replay([6.0 + schedule.PROCESS_S, 5.0 + schedule.PROCESS_S], 2)["wall_s"]
    assert two < one


def test_many_variants_that_balance_keep_their_shapes_in_one_process():
    groups = [[1.0, 1.2]] * 20 + [[0.5, 0.6, 0.4]] * 10
    assert schedule.split(groups, 2) == [[list(range(len(g)))] for g in groups]


def test_shapes_are_not_split_where_the_wall_is_another_variants():
    # One slot is held by a 10 s job the whole run: spreading the short variant gains nothing.
    assert schedule.split([[10.0], [0.2, 0.2]], 2) == [[[0]], [[0, 1]]]
    # Alone on two idle slots, its two shapes in parallel do end sooner, a second process included.
    assert sorted(schedule.split([[0.2, 0.2]], 2)[0]) == [[0], [1]]


def test_a_long_variant_among_many_is_split_on_eight_slots_and_the_wall_shrinks():
    """The MI325X node's case: one variant's shapes (4 × 6 s) would bound an 8-GPU run."""
    groups = [[6.0, 6.0, 6.0, 6.0]] + [[1.0, 1.0]] * 30
    parts = schedule.split(groups, 8)
    assert len(parts[0]) >= 2 and all(len(ps) == 1 for ps in parts[1:])
    assert sorted(i for p in parts[0] for i in p) == [0, 1, 2, 3]  # every shape in exactly one call

    def wall(ps_all):
        return schedule.replay([sum(g[i] for i in p) + schedule.PROCESS_S for g, ps in zip(groups, ps_all)
                                for p in ps], 8)["wall_s"]

    whole = [[list(range(len(g)))] for g in groups]
    assert wall(parts) < wall(whole) - 5.0
    bound = schedule.bound([("", c) for g in groups for c in g], 8)
    assert bound.bound_s == pytest.approx(max(6.0, 84.0 / 8)) and wall(parts) <= bound.bound_s * 1.2


def test_a_split_never_makes_the_replayed_wall_longer():
    rng = random.Random(7)
    for _ in range(30):
        groups = [[rng.uniform(0.1, 6.0) for _ in range(rng.randint(1, 5))] for _ in range(rng.randint(1, 15))]
        n = rng.choice([2, 4, 8])
        parts = schedule.split(groups, n)
        costs = [sum(g[i] for i in p) + schedule.PROCESS_S for g, ps in zip(groups, parts) for p in ps]
        whole = [sum(g) + schedule.PROCESS_S for g in groups]
        assert schedule.replay(costs, n)["wall_s"] <= schedule.replay(whole, n)["wall_s"] + 1e-9


def test_the_bound_is_the_longest_job_or_the_work_over_the_slots():
    jobs = [("a", 9.0), ("b", 1.0), ("c", 2.0)]
    b = schedule.bound(jobs, 2)
    assert (b.bound_s, b.longest) == (9.0, "a")
    assert schedule.bound(jobs, 1).bound_s == 12.0
    d = b.to_dict(wall_s=10.0)
    assert d["wall_over_bound"] == pytest.approx(10 / 9, abs=1e-3) and d["work_s"] == 12.0
    with pytest.raises(ValueError, match="at least one slot"):
        schedule.bound(jobs, 0)
    with pytest.raises(ValueError, match="at least one slot"):
        schedule.replay([1.0], 0)


def test_the_peer_checks_reference_goes_ahead_of_the_longest_job():
    pool = slots.SlotPool({"flopwatch_cuda": 1, "GPU": 1}, make_actor=_FakeActor)
    pool.overlap = False
    with pool.held():
        pool.submit("cuda", "run", (), "long", cost_s=30.0)
        pool.submit("cuda", "run", (), "probe", cost_s=0.5, first=True)
        pool.submit("cuda", "run", (), "mid", cost_s=5.0)
    while pool.refs():
        pool.finished(pool.refs()[0])
    assert [t for _, t in pool.dispatched] == ["probe", "long", "mid"]


def test_a_gpu_job_gets_the_nodes_cores_over_its_gpus_at_most_eight_threads():
    assert slots.gpu_job_threads(32, 2) == slots.GPU_JOB_MAX_THREADS == 8
    assert slots.gpu_job_threads(32, 1) == 8
    assert slots.gpu_job_threads(12, 2) == 6
    assert slots.gpu_job_threads(2, 1) == 2
    assert slots.gpu_job_threads(4, 8) == 1  # never none
    assert slots.gpu_job_threads(16, 0) == 8  # a node that reports no GPU counts as one
