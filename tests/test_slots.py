"""Device slots: the dispatcher and a kept pool's probe, one call per slot (pure, with stand-in
actors), and a real 3-node Ray cluster with fake device resources: jobs spread over every slot
of every node, longest expected first, the peer check runs on every slot of a node that has
several, and Ray's per-GPU CUDA_VISIBLE_DEVICES reaches the children the slot's warm runner forks."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import ray
from ray.cluster_utils import Cluster
from suite_repo import make_suite_repo

from pipeline.fleet import cluster, slots
from pipeline.run.accounting import busy_s
from pipeline.run.progress import Progress
from pipeline.run.runflow import RunOptions, Session, run_commit
from pipeline.store import Store

_refs = itertools.count()
_sent: dict = {}  # ref -> (actor, method, args): what a stand-in view answers


class _Method:
    def __init__(self, actor, name):
        self.actor, self.name = actor, name

    def remote(self, *args):
        ref = f"ref{next(_refs)}"
        self.actor.calls.append((self.name, args))
        _sent[ref] = (self.actor, self.name, args)
        return ref


class _FakeActor:
    def __init__(self, kind, name, warm):
        self.kind, self.name, self.calls = kind, name, []

    def __getattr__(self, method):
        return _Method(self, method)


class _FakeView:
    """The pool's view of Ray, set by the test: which calls failed in Ray, which nodes live."""

    def __init__(self, alive: dict):
        self.alive, self.failed, self.answers, self.killed = alive, set(), {}, []

    def call_failed(self, ref):
        return ref in self.failed

    def nodes_alive(self):
        return dict(self.alive)

    def answered(self, ref):
        return self.answers.get(ref)

    def kill(self, actor):
        self.killed.append(actor.name)


class _KeptSlots(_FakeView):
    """Answers the pool's describe calls as kept slots found with their probes in memory do
    (`DeviceSlot.describe`); the device probe of a kind in `failing` fails."""

    def __init__(self, failing=()):
        super().__init__({"node-a": True})
        self.failing = failing

    def results(self, refs, timeout):
        return [self._describe(*_sent[ref]) for ref in refs]

    def _describe(self, actor, method, args):
        assert method == "describe"
        # describe(prewarm, name, identity, toolchains), its defaults where not given
        _, name, identity, toolchains = (*args, *(True, None, False, False)[len(args):])
        answer = {"name": name or actor.name, "kind": actor.kind, "node_id": "node-a", "visible": {},
                  "commands": 2, "probes": 2, "probed": 0, "prepared": False, "toolchain_source": "cache"}
        if identity and actor.kind in self.failing:
            answer["identity_error"] = f"device probe on {actor.name} failed (1): no device"
        elif identity:
            answer["identity"] = {"model": f"a {actor.kind}", "slot": actor.name}
        if toolchains:
            answer["toolchains"] = {"cpp": {"version": "c++ 1.0"}}
        return answer


def _on(pool, slot):
    return next(r for r, (s, _) in pool.inflight.items() if s is slot)


def test_a_job_of_a_lost_node_runs_once_more_on_another_node_then_is_given_up():
    view = _FakeView({"node-a": True, "node-b": True})
    pool = slots.SlotPool({"flopwatch_cpu": 2}, make_actor=_FakeActor, view=view)
    a, b = pool.slots_of("cpu")
    a.node_id, b.node_id = "node-a", "node-b"
    for i in range(3):
        pool.submit("cpu", "run", (i,), f"job{i}")
    view.failed.add(_on(pool, a))
    tag, _, slot = pool.finished(_on(pool, a))
    assert tag is None and slot is a  # parked, not a result
    assert pool.settle() == [] and pool.lost_nodes == []  # its node still looks alive: wait
    assert [t for s, t in pool.dispatched if s == "cpu/0"] == ["job0"]  # nothing more handed to it
    view.alive["node-a"] = False
    assert pool.settle() == []  # job0 is queued again, for node-b
    assert pool.lost_nodes == [{"node_id": "node-a", "slots": ["cpu/0"], "retried": 1, "given_up": 0}]
    assert view.killed == ["cpu/0"] and pool.slots_of("cpu") == [b]
    done = []
    for _ in range(2):
        tag, _, _ = pool.finished(_on(pool, b))
        done.append(tag)
    assert done == ["job1", "job2"] and pool.dispatched[-1] == ("cpu/1", "job0")
    # node-b dies too, under job0's second try: no slot is left, and it ran twice already
    view.failed.add(_on(pool, b))
    assert pool.finished(_on(pool, b))[0] is None
    view.alive["node-b"] = False
    given_up = pool.settle()
    assert [(g.tag, g.node_id, g.slot) for g in given_up] == [("job0", "node-b", "cpu/1")]
    assert "node node-b was lost" in given_up[0].reason and "already been retried once" in given_up[0].reason
    assert not pool.has_work()
    pool.submit("cpu", "run", (9,), "late")  # work of a kind no slot is left for is given up, not kept
    assert [(g.tag, g.node_id, g.reason) for g in pool.settle()] == [
        ("late", "", "no node with a cpu slot is left (node node-b was lost)")]
    assert not pool.has_work()


def test_a_slot_whose_actor_answers_again_gets_its_job_back():
    view = _FakeView({"node-a": True})
    pool = slots.SlotPool({"flopwatch_cpu": 1}, make_actor=_FakeActor, view=view)
    (a,) = pool.slots_of("cpu")
    a.node_id = "node-a"
    pool.submit("cpu", "run", (), "job")
    view.failed.add(_on(pool, a))
    assert pool.finished(_on(pool, a))[0] is None
    assert pool.settle() == [] and a.ping is not None  # asked; no answer yet
    view.answers[a.ping] = True  # restarted by Ray on its live node
    assert pool.settle() == [] and a.suspect_since is None
    assert pool.dispatched == [("cpu/0", "job"), ("cpu/0", "job")] and pool.lost_nodes == []


def test_dispatcher_fills_idle_slots_in_order_and_never_idles_while_work_waits():
    pool = slots.SlotPool({"flopwatch_cpu": 3, "flopwatch_cuda": 2, "GPU": 2}, make_actor=_FakeActor)
    for i in range(7):
        pool.submit("cpu", "run", (i,), f"job{i}")
        assert pool.idle_while_queued() == []
    assert [t for _, t in pool.dispatched] == ["job0", "job1", "job2"]  # one per slot, FIFO
    assert {s for s, _ in pool.dispatched} == {"cpu/0", "cpu/1", "cpu/2"}
    order = []
    while pool.refs():
        ref = pool.refs()[0]
        tag, _, slot = pool.finished(ref)
        order.append(tag)
        assert pool.idle_while_queued() == []
    assert order[:3] == ["job0", "job1", "job2"]
    assert [t for _, t in pool.dispatched] == [f"job{i}" for i in range(7)]
    assert len(pool.slots_of("cuda")) == 2 and pool.slots_of("rocm") == []


def test_pinned_work_goes_to_its_slot_before_the_shared_queue():
    pool = slots.SlotPool({"flopwatch_cpu": 2}, make_actor=_FakeActor)
    a, b = pool.slots_of("cpu")
    pool.submit("cpu", "run", (), "x")
    pool.submit("cpu", "run", (), "y")
    pool.submit("cpu", "run", (), "shared")
    pool.submit("cpu", "run", (), "pinned-b", slot=b)
    ref_b = next(r for r, (s, _) in pool.inflight.items() if s is b)
    pool.finished(ref_b)
    assert pool.dispatched[-1] == ("cpu/1", "pinned-b")
    assert slots.slot_count({"flopwatch_cuda": 4, "GPU": 2}, "cuda") == 2


def test_longest_expected_job_first_and_larger_work_first_when_unknown():
    pool = slots.SlotPool({"flopwatch_cuda": 2, "GPU": 2}, make_actor=_FakeActor)
    jobs = [("short", 1.0, 0), ("long", 30.0, 0), ("mid", 5.0, 0), ("new-big", 0.0, 8e12), ("new-small", 0.0, 1e9)]
    with pool.held():
        for tag, cost, work in jobs:
            pool.submit("cuda", "run", (), tag, cost_s=cost, work=work)
        assert pool.dispatched == []  # nothing leaves while held
    while pool.refs():
        pool.finished(pool.refs()[0])
    assert [t for _, t in pool.dispatched] == ["long", "mid", "short", "new-big", "new-small"]


def test_longest_first_balances_two_slots_better_than_arrival_order():
    """The 2-GPU case that motivated it: two 33 s jobs among ~2-8 s ones (an H200 suite run)."""
    costs = [2.0, 2.1, 2.1, 4.9, 32.6, 2.5, 8.0, 4.9, 32.8, 2.2, 5.9, 2.6, 7.7, 2.0, 5.2, 2.0, 4.9, 3.1, 6.5, 2.8, 6.0]

    def makespan(order_by_cost: bool) -> float:
        pool = slots.SlotPool({"flopwatch_cuda": 2, "GPU": 2}, make_actor=_FakeActor)
        clock, ends, free_at = 0.0, {}, {}

        def started(ref) -> None:
            # A slot runs its calls one after the other (the second waits in its runner's queue).
            slot, pending = pool.inflight[ref]
            ends[ref] = free_at[slot.name] = max(clock, free_at.get(slot.name, 0.0)) + pending.tag

        with pool.held():
            for i, c in enumerate(costs):
                pool.submit("cuda", "run", (), c, cost_s=c if order_by_cost else 0.0)
        for ref in pool.refs():
            started(ref)
        while ends:
            ref = min(ends, key=ends.get)
            clock = ends.pop(ref)
            pool.finished(ref)
            for new in pool.refs():
                if new not in ends and new != ref:
                    started(new)
        return clock

    total = sum(costs)
    assert makespan(True) <= total / 2 * 1.01 < makespan(False)


def test_a_gpu_slot_holds_the_next_job_while_one_runs_and_a_cpu_slot_one_job():
    pool = slots.SlotPool({"flopwatch_cpu": 1, "flopwatch_cuda": 2, "GPU": 2}, make_actor=_FakeActor)
    pool.overlap = True
    with pool.held():
        for i in range(5):
            pool.submit("cuda", "run", (), f"gpu{i}", cost_s=10.0 - i)
        for i in range(3):
            pool.submit("cpu", "run", (), f"cpu{i}")
    a, b = pool.slots_of("cuda")
    (c,) = pool.slots_of("cpu")
    # Round by round: each GPU slot one of the two longest; then each a second, first the slot
    # expected free soonest (cuda/1: 9 s against 10 s), then the other; the CPU slot one.
    assert [(s, t) for s, t in pool.dispatched if s.startswith("cuda")] == \
        [("cuda/0", "gpu0"), ("cuda/1", "gpu1"), ("cuda/1", "gpu2"), ("cuda/0", "gpu3")]
    assert (a.running, b.running, c.running) == (2, 2, 1) and pool.idle_while_queued() == []
    pool.finished(_on(pool, a))
    assert pool.dispatched[-1] == ("cuda/0", "gpu4") and a.running == 2
    pool.overlap = False  # a command that profiles: one call per GPU slot
    assert pool.depth("cuda") == 1 and pool.depth("cpu") == 1
    assert slots.overlap_wanted({slots.OVERLAP_ENV: "0"}) is False and slots.overlap_wanted({}) is True


def test_a_kept_pools_probe_is_one_call_per_slot_and_its_summary_asks_nothing_more():
    """Two kinds, the identity of each and the toolchains wanted: each slot's describe call
    carries what is wanted of it, and the summary is made of those answers."""
    pool = slots.SlotPool({"flopwatch_cpu": 1, "flopwatch_cuda": 2, "GPU": 2}, make_actor=_FakeActor,
                          persistent=True, view=_KeptSlots())
    assert pool.toolchains_from_slot() and pool.toolchain_kind() == "cpu"
    pool.start(["cpu", "cuda"], identify=["cpu", "cuda"], toolchains=True)
    assert pool.identity("cpu") == {"model": "a cpu", "slot": "cpu/0"}
    assert pool.identity("cuda") == {"model": "a cuda", "slot": "cuda/0"}
    assert pool.toolchains() == {"cpp": {"version": "c++ 1.0"}}
    summary = pool.kept_summary()
    made = pool.slots_of("cpu") + pool.slots_of("cuda")
    # (prewarm, name, identity, toolchains): each kind's first slot its identity, the CPU one the toolchains
    assert [(s.name, s.actor.calls) for s in made] == [
        ("cpu/0", [("describe", (True, "cpu/0", True, True))]),
        ("cuda/0", [("describe", (True, "cuda/0", True, False))]),
        ("cuda/1", [("describe", (True, "cuda/1", False, False))])]
    assert summary["calls"] == summary["slots"] == 3 and summary["probed"] == 0
    assert summary["toolchains"] == "cache" and summary["answer_s"] >= 0


def test_a_failing_device_probe_is_raised_where_its_identity_is_needed():
    """The slot returns its probe's failure with its description; the driver raises it, with the
    slot's own text, when it asks for that identity. A kind started without its identity is
    asked for it with one more call."""
    pool = slots.SlotPool({"flopwatch_cpu": 1, "flopwatch_cuda": 1, "GPU": 1}, make_actor=_FakeActor,
                          persistent=True, view=_KeptSlots(failing={"cuda"}))
    pool.start(["cpu", "cuda"], identify=["cuda"], toolchains=True)
    with pytest.raises(RuntimeError, match=r"^device probe on cuda/0 failed \(1\): no device$"):
        pool.identity("cuda")
    (cpu,) = pool.slots_of("cpu")
    assert pool.identity("cpu")["slot"] == "cpu/0"
    assert cpu.actor.calls == [("describe", (True, "cpu/0", False, True)),
                               ("describe", (False, None, True, False))]
    assert pool.kept_summary()["calls"] == 3

    # The slot's side: the failure comes back as an answer, beside the toolchains, not raised.
    slot = slots.DeviceSlot("cuda", "cuda/0", warm=False)

    def no_device():
        raise RuntimeError("device probe on cuda/0 failed (1): no device")

    slot._probe, slot.toolchains = no_device, lambda: {"cpp": {}}
    assert slot._answers(identity=True, toolchains=True) == {
        "identity_error": "device probe on cuda/0 failed (1): no device", "toolchains": {"cpp": {}}}
    assert slot.probes == 1 and slot._answers(identity=False, toolchains=False) == {}


@pytest.fixture(scope="module")
def three_nodes():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {cluster.CPU_RESOURCE: 1}})
    c.add_node(num_cpus=2, resources={cluster.CPU_RESOURCE: 2})
    c.add_node(num_cpus=2, num_gpus=2, resources={cluster.CPU_RESOURCE: 1, cluster.GPU_RESOURCE["cuda"]: 2})
    ray.init(address=c.address)
    yield c
    slots.close_all()
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def runs(three_nodes, tmp_path_factory):
    base = tmp_path_factory.mktemp("spread")
    repo = make_suite_repo(base / "repo")
    session = Session(Store(base / "work" / "results.db"), base / "work", cluster.connect(None), Progress(enabled=False))
    first = run_commit(session, repo, "HEAD", RunOptions())  # builds everything
    start = len(session.slots.dispatched)
    second = run_commit(session, repo, "HEAD", RunOptions())  # all cached: every job runnable at once
    return session, first, second, session.slots.dispatched[start:]


def test_jobs_spread_over_every_cpu_slot_of_every_node_in_submission_order(runs):
    session, first, second, dispatched = runs
    cpu_slots = session.slots.slots_of("cpu")
    assert len(cpu_slots) == 4 and len({s.node_id for s in cpu_slots}) == 3
    jobs = [tag[1] for _, tag in dispatched if tag[0] == "job"]
    assert sorted((j.variant, j.shape.key) for j in jobs) == sorted((j.variant, j.shape.key) for j in second.jobs)
    # every job of the cached builds was queued at once and handed out longest first, by the
    # busy time the first run stored for it, after the peer check's reference (the peer job
    # whose launches the first run timed longest: its result starts the re-times on the other
    # slots of the node)
    launch = {(r.variant, r.shape): r.median_s for r in first.results if r.peer and r.median_s}
    assert (jobs[0].variant, jobs[0].shape.key) == max(launch, key=launch.get)
    last = {(r.variant, r.shape, r.dtype): busy_s(r.phases) for r in first.results if r.phases}
    expected = [last.get((j.variant, j.shape.key, j.dtype), 0.0) for j in jobs[1:]]
    assert expected == sorted(expected, reverse=True) and expected[0] > expected[-1]
    # the first four calls (jobs or the pinned peer check) started at once, one on each slot
    first_four = [name for name, _ in dispatched][:4]
    assert sorted(first_four) == sorted(s.name for s in cpu_slots)
    ok = [r for r in second.results if r.status == "ok"]
    assert len(ok) == 6
    # each result names the slot and node it was handed to (which slot ends up with the last jobs
    # depends on which finishes first, so that is not asserted)
    handed_to = {(j.variant, j.shape.key, j.dtype): name for name, (kind, j, *_) in dispatched if kind == "job"}
    node_of = {s.name: s.node_id for s in cpu_slots}
    for r in ok:
        slot = handed_to[(r.variant, r.shape, r.dtype)]
        assert (r.device_info["slot"], r.device_info["ray_node_id"]) == (slot, node_of[slot])
    assert len({r.device_info["ray_node_id"] for r in ok}) >= 2


def test_phases_and_device_busy_are_recorded(runs):
    session, _, second, _ = runs
    for r in second.results:
        assert {"queue_s", "start_s", "load_s", "correctness_s", "warmup_s", "timing_s"} <= set(r.phases)
        assert r.phases["timing_s"] > 0 and r.phases["start_s"] >= 0
    # forked by each slot's one warm runner, not a fresh interpreter per job
    described = ray.get([s.actor.describe.remote(False) for s in session.slots.slots_of("cpu")], timeout=60)
    assert [d["zygote_starts"] for d in described] == [1] * len(described)
    rows = second.accounting
    assert {row["slot"] for row in rows} == {s.name for s in session.slots.slots_of("cpu")}
    for row in rows:
        assert 0 < row["busy_s"] <= row["wall_s"] and 0 < row["busy_pct"] <= 100
    stored = session.store.run_summary(second.commit.sha)
    assert stored["devices"] == rows


def test_peer_check_covers_every_slot_of_the_node_with_two(runs):
    session, _, second, dispatched = runs
    (node,) = {s.node_id for s in session.slots.slots_of("cpu") if
               sum(t.node_id == s.node_id for t in session.slots.slots_of("cpu")) == 2}
    checks = second.peer_check["checks"]
    assert checks and {c["node_id"] for c in checks} == {node}
    assert len(checks[0]["devices"]) == 2 and checks[0]["variant"] == "torch_ref"
    assert all(d["off_pct"] is not None for d in checks[0]["devices"])
    assert not any(r.variant == "torch_ref" and r.shape == checks[0]["shape"] and r.device_info.get("slot") is None
                   for r in second.results)
    assert len([r for r in second.results if r.variant == "torch_ref"]) == 2  # peer-check rows are not results
    # One re-time per slot of that node that did not run the peer's job itself: not every op's
    # peer on every slot.
    retimes = [name for name, tag in dispatched if tag[0] == "peer_check"]
    ran_it = next(r.device_info["slot"] for r in second.results
                  if (r.variant, r.shape) == ("torch_ref", checks[0]["shape"]))
    node_slots = {s.name for s in session.slots.slots_of("cpu") if s.node_id == node}
    assert sorted(retimes) == sorted(node_slots - {ran_it})
    assert {d["slot"] for d in checks[0]["devices"]} == node_slots


def test_visible_devices_reach_the_forked_children_of_each_gpu_slot(runs):
    session, _, _, _ = runs
    gpu = session.slots.slots_of("cuda")
    assert len(gpu) == 2
    seen = ray.get([s.actor.child_env_probe.remote() for s in gpu], timeout=300)
    visible = sorted(d["visible"]["CUDA_VISIBLE_DEVICES"] for d in seen)
    assert visible == ["0", "1"]  # Ray's per-GPU assignment, as the job child sees it
    assert all(d["returncode"] == 0 and d["pid"] != d["pid_parent"] for d in seen)


@pytest.fixture(scope="module")
def batched_runs(three_nodes, tmp_path_factory):
    """The same suite with CPU variants' shapes batched as GPU ones are (FLOPWATCH_BATCH=all):
    3 variants of 2 shapes on 4 CPU slots, the second run with the first run's job times."""
    import os

    from pipeline.run import runflow

    base = tmp_path_factory.mktemp("split")
    repo = make_suite_repo(base / "repo")
    session = Session(Store(base / "work" / "results.db"), base / "work", cluster.connect(None), Progress(enabled=False))
    before = os.environ.get(runflow.BATCH_ENV)
    os.environ[runflow.BATCH_ENV] = "all"
    try:
        run_commit(session, repo, "HEAD", RunOptions())
        start = len(session.slots.dispatched)
        second = run_commit(session, repo, "HEAD", RunOptions())
    finally:
        if before is None:
            os.environ.pop(runflow.BATCH_ENV)
        else:
            os.environ[runflow.BATCH_ENV] = before
    return session, second, session.slots.dispatched[start:]


def test_a_variants_shapes_are_spread_over_idle_slots_and_the_bound_is_reported(batched_runs):
    session, second, dispatched = batched_runs
    calls: dict[str, int] = {}
    for _, tag in dispatched:
        if tag[0] in ("job", "batch"):
            calls[tag[2].name] = calls.get(tag[2].name, 0) + 1
    # Three variants of two shapes on four idle slots: at least one is split across slots.
    assert set(calls) == {"cpp_naive", "cpp_blocked", "torch_ref"} and max(calls.values()) == 2
    assert sorted((r.variant, r.shape) for r in second.results) == \
        sorted((j.variant, j.shape.key) for j in second.jobs)
    assert all(r.status == "ok" for r in second.results)
    split = [name for name, n in calls.items() if n == 2]
    slots_of = {r.device_info["slot"] for r in second.results if r.variant == split[0]}
    assert len(slots_of) == 2  # its two shapes ran on two slots
    b = second.bounds["cpu"]
    # The work includes the peer check's re-times (slot time too), so it is at least the results'.
    assert b["work_s"] >= sum(busy_s(r.phases) for r in second.results) - 1e-3
    assert b["slots"] == 4 and 0 < b["bound_s"] <= b["wall_s"]
    assert b["bound_s"] == pytest.approx(max(b["longest_job_s"], b["work_s"] / 4), abs=1e-3)
    assert session.store.run_summary(second.commit.sha)["bounds"] == second.bounds


def test_a_gpu_slot_hands_its_next_jobs_the_identity_its_first_job_read(monkeypatch):
    from types import SimpleNamespace

    from workers.core.records import Result

    monkeypatch.setattr(slots.ray, "get_runtime_context", lambda: SimpleNamespace(get_node_id=lambda: "n1"))
    slot = slots.DeviceSlot("cuda", "cuda/0", warm=False)
    assert "device_identity" not in slot._job_settings({"threads": 2})  # nothing read yet
    read = {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "extra": {"sm_clock_mhz": 1755.0}}
    result = Result(variant="v", op="gemm", backend="cuda", shape="M=1", dtype="bf16", device="cuda", status="ok",
                    device_info=read, phases={})
    recorded = slot._measured_here(result, 0.0)
    assert recorded["device_info"]["extra"] == {"sm_clock_mhz": 1755.0}  # as read
    given = slot._job_settings({"threads": 2})["device_identity"]
    assert given["uuid"] == "GPU-1" and given["extra"] == {} and "slot" not in given
    # A CPU slot's jobs read their own (nothing of a vendor's tool to save there).
    cpu = slots.DeviceSlot("cpu", "cpu/0", warm=False)
    cpu._measured_here(dataclasses.replace(result, device_info={"kind": "cpu", "name": "x", "uuid": ""}), 0.0)
    assert "device_identity" not in cpu._job_settings({})
