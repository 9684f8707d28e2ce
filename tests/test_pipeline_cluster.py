"""The whole spine on a real two-node Ray cluster (ray.cluster_utils.Cluster): a commit goes in,
builds travel through Ray, run tasks land on the worker node only, every broken variant ends
with the right status and an actionable diagnostic, and the good results are stored."""

from __future__ import annotations

import numpy as np
import pytest
import ray
from ray.cluster_utils import Cluster
from suite_repo import make_suite_repo

from pipeline.commands.publish import write_site
from pipeline.fleet import cluster
from pipeline.run.progress import Progress
from pipeline.run.runflow import RunOptions, Session, run_commit
from pipeline.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BROKEN = ("does_not_compile", "segfaults", "wrong_tile", "hangs", "writes_past_end", "produces_nan",
          "broken_manifest")


@pytest.fixture(scope="module")
def two_nodes():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = c.add_node(num_cpus=2, resources={cluster.CPU_RESOURCE: 1})
    ray.init(address=c.address)
    yield worker.node_id
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def first_run(two_nodes, tmp_path_factory):
    base = tmp_path_factory.mktemp("suite")
    repo = make_suite_repo(base / "repo", broken=BROKEN)
    store = Store(base / "work" / "results.db")
    session = Session(store, base / "work", cluster.connect(None), Progress(enabled=False))
    outcome = run_commit(session, repo, "HEAD", RunOptions())
    return session, repo, outcome


def _by_variant(outcome) -> dict[str, list]:
    rows: dict[str, list] = {}
    for r in outcome.results:
        rows.setdefault(r.variant, []).append(r)
    return rows


def test_each_broken_variant_has_its_status_and_diagnostic(first_run):
    _, _, outcome = first_run
    rows = _by_variant(outcome)
    assert {r.status for r in rows["does_not_compile"]} == {"build_failed"}
    assert "error" in rows["does_not_compile"][0].diagnostic and "kernel.cpp:5" in rows["does_not_compile"][0].diagnostic
    assert {r.status for r in rows["segfaults"]} == {"crashed"}
    assert "SIGSEGV" in rows["segfaults"][0].diagnostic
    assert {r.status for r in rows["hangs"]} == {"timeout"}
    assert "5 s timeout" in rows["hangs"][0].diagnostic
    assert {r.status for r in rows["wrong_tile"]} == {"incorrect"}
    assert all("tile (1, 0) = C[64:128, 0:64]" in r.diagnostic for r in rows["wrong_tile"])
    assert all("1 of" in r.diagnostic for r in rows["wrong_tile"])  # exactly one tile is wrong
    assert {r.status for r in rows["writes_past_end"]} == {"incorrect"}
    assert all("past the end" in r.diagnostic for r in rows["writes_past_end"])
    assert {r.status for r in rows["produces_nan"]} == {"incorrect"}
    assert all("NaN" in r.diagnostic and "[3, 0]" in r.diagnostic for r in rows["produces_nan"])
    (invalid,) = rows["broken_manifest"]
    assert invalid.status == "invalid" and "variant.toml: sources" in invalid.diagnostic


def test_good_variants_are_correct_timed_and_compared_with_the_peer(first_run):
    session, _, outcome = first_run
    rows = _by_variant(outcome)
    for name in ("cpp_naive", "cpp_blocked", "torch_ref"):
        assert [r.status for r in rows[name]] == ["ok", "ok"], rows[name]
        for r in rows[name]:
            assert r.median_s > 0 and r.ci_low_s <= r.median_s <= r.ci_high_s
            assert len(r.samples_s) >= 3 and r.flops_per_s > 0
            assert r.correctness["rel_fro_err"] < 1e-5 and len(r.correctness["checks"]) == 2
            seeds = {c["seed"] for c in r.correctness["checks"]}
            assert len(seeds) == 2  # two different seeds per check
    stored = session.store.results(commit_sha=outcome.commit.sha)
    assert len(stored) == len(outcome.results)  # every outcome stored, failures included


def test_run_tasks_ran_on_the_worker_node_only(first_run, two_nodes):
    _, _, outcome = first_run
    timed = [r for r in outcome.results if r.status in ("ok", "incorrect")]
    assert timed and {r.device_info["ray_node_id"] for r in timed} == {two_nodes}


def test_second_run_rebuilds_nothing_and_resume_reruns_nothing(first_run):
    session, repo, outcome = first_run
    again = run_commit(session, repo, "HEAD", RunOptions(only=("cpp_naive", "does_not_compile")))
    assert again.rebuilt == 0 and again.from_cache == 3  # cpp_naive, does_not_compile, torch_ref peer
    resumed = run_commit(session, repo, "HEAD", RunOptions(resume=True))
    assert resumed.results == [] and resumed.resumed == len(outcome.results) - 1  # all but the invalid row
    assert resumed.rebuilt == 0


def test_report_escapes_user_strings_and_shows_the_failing_tile(first_run, tmp_path):
    session, _, outcome = first_run
    index = write_site(session.store, tmp_path / "site")
    html = index.read_text()
    assert "suite &lt;with&gt; &amp; &#39;quotes&#39;" in html and "suite <with>" not in html
    assert "cpp_naive" in html and "GFLOP/s" in html
    commit_page = (tmp_path / "site" / f"commit-{outcome.commit.sha[:12]}.html").read_text()
    assert "tile (1, 0)" in commit_page and "Plotly.newPlot" in commit_page
    assert (tmp_path / "site" / "assets" / "plotly.min.js").stat().st_size > 1_000_000


def test_detect_spreads_window_batches_over_the_cluster(two_nodes):
    from pipeline.history import detect_cluster
    from pipeline.history import series as history

    rng = np.random.default_rng(5)
    commits = [{"sha": f"{i:040x}", "subject": "", "author": "", "authored_at": ""} for i in range(24)]
    rows = []
    for v in range(6):
        for i in range(24):
            seconds = 1e-3 * (1.3 if v == 2 and i >= 15 else 1.0)
            rows.append({"commit_sha": f"{i:040x}", "variant": f"v{v}", "shape": "M=8", "dtype": "fp32",
                         "device": "cpu:x", "status": "ok", "flops": 1e6,
                         "samples": list(seconds * (1 + 0.01 * rng.standard_normal(10)))})
    series = history.build_series(rows, commits)
    here = history.detect_regressions(series, 0.05)
    spread = history.detect_regressions(series, 0.05, search=detect_cluster.search_windows)
    assert spread == here and [(r.variant, r.bad_sha) for r in here.regressions] == [("v2", f"{15:040x}")]
    assert here.searched >= 1


def test_a_probe_without_an_answer_is_one_line(monkeypatch):
    """A probe that does not answer in time is a ClusterError naming what did not answer, not
    Ray's GetTimeoutError traceback."""
    from pipeline.fleet.ray_access import ClusterError

    def never(ref, timeout):
        raise ray.exceptions.GetTimeoutError("Get timed out: some object(s) not ready.")

    monkeypatch.setattr(cluster.ray, "get", never)
    with pytest.raises(ClusterError, match=r"the toolchain probe on a build node did not answer in 7 s"):
        cluster.wait_probe(object(), timeout=7)
