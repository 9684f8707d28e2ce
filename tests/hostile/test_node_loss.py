"""A Ray node lost in the middle of a run (`ray.cluster_utils.Cluster`, `remove_node` while
one of its jobs runs): with another node that has the resource, the job runs again there and
the run completes with every result; with none left, the node's jobs are recorded `lost` with
its id, the run still completes, nothing finished is lost, and `run --resume` on a new node
fills the gap.

Each test has a cluster of its own (they pass alone and in any order), and a run that does not
end within `RUN_LIMIT_S` of the loss fails with that said: a broken "lost" handling leaves the
dispatcher waiting for a slot that will never come back, which must read as a failure, not a
hang."""

from __future__ import annotations

import threading
import time

import git
import pytest
import ray
from ray.cluster_utils import Cluster
from suite_repo import stored_results

from hostile.hostile_repo import make_repo
from pipeline.fleet import cluster
from pipeline.run.progress import Progress
from pipeline.run.runflow import RunOptions, Session, run_commit
from pipeline.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

# rows of one run: `slow` at its 6 shapes, cpp_naive at 1, and the built-in peer at slow's 6
# (the repository declares no peer; cpp_naive's shape is one of slow's)
ROWS = 13

# Ray's health check declares a silent node dead after period × threshold: seconds here, not
# the production default of about 15 s.
FAST_HEALTH_CHECK = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                     "health_check_failure_threshold": 4}
# A run of 13 short jobs ends in seconds once its node is gone; far longer means it waits for ever.
RUN_LIMIT_S = 120


def _cluster(workers: int):
    """A head without a CPU slot and `workers` nodes with one each; yields (cluster, nodes)."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": FAST_HEALTH_CHECK})
    try:
        nodes = [c.add_node(num_cpus=1, resources={cluster.CPU_RESOURCE: 1}) for _ in range(workers)]
        ray.init(address=c.address)
        yield c, nodes
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture
def two_nodes():
    yield from _cluster(2)


@pytest.fixture
def one_node():
    yield from _cluster(1)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    base = tmp_path_factory.mktemp("nodeloss")
    repo = git.Repo(make_repo(base / "repo", ("slow",)))
    yield base, repo
    repo.close()  # its `git cat-file` helpers end with it


def _session(work_dir, store: Store) -> Session:
    return Session(store, work_dir, cluster.connect(None), Progress(enabled=False))


def _run_removing(c: Cluster, node, session: Session, repo, options: RunOptions, after: int = 0):
    """Run HEAD; a thread removes `node` once `after` results are stored and one of the node's
    slots is running a job. Returns (outcome, the (variant, shape) of the jobs in flight on the
    node when it went)."""
    removed = threading.Event()
    in_flight: list[tuple[str, str]] = []
    watcher_failed: list[BaseException] = []

    def remove_when_busy():
        deadline = time.monotonic() + RUN_LIMIT_S
        try:
            while time.monotonic() < deadline:
                try:
                    busy = [(slot, pending) for slot, pending in list(session.slots.inflight.values())]
                except RuntimeError:  # the dispatcher changed the dict meanwhile: look again
                    time.sleep(0.01)
                    continue
                mine = [pending.tag for slot, pending in busy if slot.node_id == node.node_id]
                if mine and stored_results(session.store.path) >= after:
                    in_flight.extend((tag[2].name, tag[1].shape.key) for tag in mine if tag[0] == "job")
                    c.remove_node(node, allow_graceful=False)
                    removed.set()
                    return
                time.sleep(0.05)
        except BaseException as exc:  # noqa: BLE001 -- reported by the test, not lost with this thread
            watcher_failed.append(exc)

    thread = threading.Thread(target=remove_when_busy, daemon=True)
    thread.start()
    ran: list = []
    runner = threading.Thread(target=lambda: ran.append(_outcome_or_error(session, repo, options)), daemon=True)
    runner.start()
    runner.join(timeout=RUN_LIMIT_S)
    thread.join(timeout=5)
    assert not watcher_failed, f"the thread that removes the node failed: {watcher_failed[0]!r}"
    assert removed.is_set(), "the run ended before the node could be lost"
    assert not runner.is_alive(), (f"the run did not end within {RUN_LIMIT_S} s: the lost node's jobs are left "
                                   "waiting (is the lost handling broken?)")
    (outcome,) = ran
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome, in_flight


def _outcome_or_error(session: Session, repo, options: RunOptions):
    try:
        return run_commit(session, repo, "HEAD", options)
    except BaseException as exc:  # noqa: BLE001 -- raised again in the test's own thread
        return exc


def test_a_job_of_a_lost_node_runs_again_on_the_other_node_and_the_run_completes(two_nodes, work):
    c, (node_a, node_b) = two_nodes
    base, repo = work
    store = Store(base / "retry.db")
    outcome, in_flight = _run_removing(c, node_a, _session(base, store), repo, RunOptions())
    statuses = {(r.variant, r.shape): r.status for r in outcome.results}
    # 6 slow shapes + cpp_naive, and the built-in peer (the repository declares none) at the 6 shapes
    assert len(statuses) == ROWS and set(statuses.values()) == {"ok"}, statuses
    (lost,) = outcome.lost_nodes
    assert lost["node_id"] == node_a.node_id and lost["retried"] == 1 and lost["given_up"] == 0
    # The job that ran on node_a when it went was measured again, on node_b.
    (retried,) = in_flight
    ran_on = {(r.variant, r.shape): r.device_info["ray_node_id"] for r in outcome.results}
    assert ran_on[retried] == node_b.node_id
    assert store.run_summary(outcome.commit.sha)["lost_nodes"] == outcome.lost_nodes  # the report's record
    assert len(store.results(commit_sha=outcome.commit.sha)) == ROWS


def test_with_no_node_left_jobs_are_lost_with_the_node_id_and_resume_fills_the_gap(one_node, work):
    c, (node_b,) = one_node
    base, repo = work
    store = Store(base / "lost.db")
    outcome, _ = _run_removing(c, node_b, _session(base, store), repo, RunOptions(), after=2)
    by_status: dict[str, list] = {}
    for r in outcome.results:
        by_status.setdefault(r.status, []).append(r)
    assert set(by_status) == {"ok", "lost"}, by_status.keys()
    assert len(by_status["ok"]) >= 2  # finished before the node went
    assert len(outcome.results) == ROWS  # every job has its row: measured, or lost
    for r in by_status["lost"]:
        assert r.diagnostic.startswith("not measured: ") and node_b.node_id in r.diagnostic
    in_flight = [r for r in by_status["lost"] if r.device_info.get("ray_node_id") == node_b.node_id]
    assert len(in_flight) == 1  # the job that ran when the node went; the others waited in the queue
    for r in by_status["lost"]:
        if r not in in_flight:
            assert f"no node with a cpu slot is left (node {node_b.node_id} was lost)" in r.diagnostic
    (lost,) = outcome.lost_nodes
    assert lost["node_id"] == node_b.node_id and lost["given_up"] == 1 and lost["retried"] == 0
    finished = {(r.variant, r.shape): r.median_s for r in by_status.get("ok", [])}

    c.add_node(num_cpus=1, resources={cluster.CPU_RESOURCE: 1})
    resumed = run_commit(_session(base, store), repo, "HEAD", RunOptions(resume=True))
    assert {(r.variant, r.shape) for r in resumed.results} == {(r.variant, r.shape) for r in by_status["lost"]}
    assert {r.status for r in resumed.results} == {"ok"}
    latest = store.latest_results(outcome.commit.sha)
    assert len(latest) == ROWS and {r["status"] for r in latest} == {"ok"}
    # nothing measured before the loss was measured again or dropped
    kept = {(r["variant"], r["shape"]): r["median_s"] for r in latest if (r["variant"], r["shape"]) in finished}
    assert kept == finished
