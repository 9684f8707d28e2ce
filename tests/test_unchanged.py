"""Nothing changed, nothing timed: the decision per series (pure), and `compare` end to end on
a real repository where each part of the measurement identity changes in turn (a README edit,
a shared header, one variant's flags, the flopwatch harness)."""

from __future__ import annotations

import json

import git
import pytest
import ray
from suite_repo import make_suite_repo

from pipeline import cli
from pipeline.fleet import cluster
from pipeline.history.unchanged import NO_NUMBER, PEER_AT_HEAD, SAME_BUILD, SeriesInfo, plan_series
from pipeline.run import identity


def info(identity_: str, op: str = "gemm", peer: bool = False, kind: str = "cpu", untooled: str = "") -> SeriesInfo:
    return SeriesInfo(identity_, op, kind, peer, untooled)


def no_store(_ids) -> dict:
    return {}


# -- the decision ----------------------------------------------------------------------------

def test_same_identity_is_unchanged_and_reuses_a_stored_row():
    stored = {"id-a": {"commit_sha": "abc", "identity": "id-a"}}
    plan = plan_series({("a",): info("id-a")}, {("a",): info("id-a")}, lambda ids: {i: stored[i] for i in ids if i in stored})
    assert plan.measure == frozenset() and plan.untimed == frozenset()
    assert plan.reuse == {("a",): stored["id-a"]} and plan.reasons[("a",)] == SAME_BUILD


def test_same_identity_without_a_stored_row_is_not_timed_at_all():
    plan = plan_series({("a",): info("id-a")}, {("a",): info("id-a")}, no_store)
    assert plan.untimed == {("a",)} and not plan.measure and not plan.reuse


def test_no_toolchain_here_and_the_same_build_inputs_is_unchanged_too():
    same = info("", untooled="src-1")
    plan = plan_series({("a",): same, ("b",): same}, {("a",): same, ("b",): info("", untooled="src-2")}, no_store)
    assert plan.untimed == {("a",)} and plan.measure == {("b",)}


def test_a_changed_identity_is_measured_at_both_commits_and_its_ops_peer_at_head_only():
    base = {("a",): info("a1"), ("b",): info("b1"), ("peer",): info("p1", peer=True),
            ("copy_peer",): info("c1", op="copy", peer=True)}
    head = {("a",): info("a2"), ("b",): info("b1"), ("peer",): info("p1", peer=True),
            ("copy_peer",): info("c1", op="copy", peer=True)}
    plan = plan_series(base, head, no_store)
    assert plan.measure == {("a",)}
    # the peer's build is the same at both commits: timed once, at head, never paired
    assert plan.head_only == {("peer",)} and plan.at_head == {("a",), ("peer",)}
    assert plan.unchanged == {("b",), ("copy_peer",), ("peer",)}  # another op's peer stays untimed
    assert ("copy_peer",) not in plan.at_head
    assert plan.reasons[("peer",)] == "peer of a changed series"


def test_the_peer_of_another_device_kind_is_not_dragged_in():
    base = {("a", "cuda"): info("a1", kind="cuda"), ("peer", "cpu"): info("p", peer=True)}
    head = {("a", "cuda"): info("a2", kind="cuda"), ("peer", "cpu"): info("p", peer=True)}
    assert plan_series(base, head, no_store).measure == {("a", "cuda")}


def test_a_series_without_identity_at_either_commit_does_not_drag_its_ops_peer():
    """HIP series on an NVIDIA runner (no HIP toolchain): they are 'measured' (their rows say
    why nothing ran), but there is no number to set beside the rocm peer, so it is not timed."""
    base = {("hip",): info("", kind="rocm"), ("peer",): info("p", peer=True, kind="rocm")}
    head = {("hip",): info("", kind="rocm"), ("peer",): info("p", peer=True, kind="rocm")}
    plan = plan_series(base, head, no_store)
    assert plan.measure == {("hip",)} and plan.unchanged == {("peer",)} and not plan.head_only
    # one side with an identity: something is timed there, so the peer is too (at head)
    head[("hip",)] = info("h", kind="rocm")
    assert plan_series(base, head, no_store).at_head == {("hip",), ("peer",)}


def test_series_on_one_side_only_or_without_identity_are_measured():
    plan = plan_series({("gone",): info("g"), ("x",): info("")}, {("new",): info("n"), ("x",): info("")}, no_store)
    assert plan.measure == {("gone",), ("new",), ("x",)}


def test_all_forces_every_series():
    plan = plan_series({("a",): info("same")}, {("a",): info("same")}, no_store, force=True)
    assert plan.measure == {("a",)} and not plan.unchanged
    peers = {("a",): info("a1"), ("peer",): info("p", peer=True)}
    forced = plan_series(peers, {**peers, ("a",): info("a2")}, no_store, force=True)
    assert forced.measure == {("a",), ("peer",)} and not forced.head_only  # --all pairs the peer too


# -- the identity ----------------------------------------------------------------------------

def test_identity_moves_with_each_of_its_parts(monkeypatch):
    base = dict(build_hash="b", op="gemm", shape_key="M=1,N=1,K=1", dtype="fp32", device_key="cpu:x")
    ref = identity.measurement_identity(**base)
    assert identity.measurement_identity(**base) == ref
    for key, other in (("build_hash", "c"), ("shape_key", "M=2,N=1,K=1"), ("dtype", "bf16"),
                       ("device_key", "cuda:NVIDIA H200"), ("op", "copy")):
        assert identity.measurement_identity(**{**base, key: other}) != ref, key
    assert identity.measurement_identity(**base, threads=4) != ref
    monkeypatch.setattr(identity, "worker_code_digest", lambda: "a different harness")
    assert identity.measurement_identity(**base) != ref


# -- compare, end to end ---------------------------------------------------------------------

HEADER = "// shared helpers\n#define FLOPWATCH_TEST_UNROLL {n}\n"
CONFIG = """\
kernels = ["kernels"]
include_dirs = ["kernels/include"]
[shape_sets]
tiny = [[128, 128, 128]]
[defaults]
timing_budget_s = 0.2
"""


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """c0 the suite; c1 a README edit; c2 a shared header edit; c3 one variant's flags edited."""
    root = tmp_path_factory.mktemp("unchanged")
    repo = make_suite_repo(root)
    (root / ".gitignore").write_text(".flopwatch/\n")
    (root / "flopwatch.toml").write_text(CONFIG)
    (root / "kernels" / "include").mkdir()
    (root / "kernels" / "include" / "helpers.h").write_text(HEADER.format(n=4))
    shas = [_commit(repo, "suite with a shared header")]
    (root / "README.md").write_text("# kernels\n")
    shas.append(_commit(repo, "docs only"))
    (root / "kernels" / "include" / "helpers.h").write_text(HEADER.format(n=8))
    shas.append(_commit(repo, "change the shared header"))
    manifest = root / "kernels" / "gemm" / "cpp_naive" / "variant.toml"
    assert 'flags = ["-O2"]' in manifest.read_text()
    manifest.write_text(manifest.read_text().replace('flags = ["-O2"]', 'flags = ["-O2", "-DFLOPWATCH_TEST=1"]'))
    shas.append(_commit(repo, "cpp_naive: a -D define"))
    return root, shas


def _commit(repo: git.Repo, subject: str) -> str:
    repo.git.add(A=True)
    return repo.index.commit(subject).hexsha


def _compare(capsys, root, db, base, head, *extra) -> tuple[int, dict]:
    code = cli.main(["compare", base, head, "--repo", str(root), "--db", str(db), "--budget", "0.2",
                     "--pair-budget", "0.3", "--no-report", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def _rows(report: dict) -> dict[str, dict]:
    return {r["variant"]: r for r in report["rows"]}


def _count(db) -> int:
    from pipeline.store import count_results

    return count_results(db)


@pytest.mark.slow
def test_a_compare_that_times_nothing_starts_no_ray(history, capsys, tmp_path):
    """With no Ray up, a compare whose series are all unchanged plans on this machine (the
    same toolchain and device identities a slot would give, or the stored results would not
    match) and starts no Ray; a compare with a series to time starts one for it. Runs before
    the tests that keep this module's Ray up."""
    root, (c0, c1, c2, c3) = history
    db = tmp_path / "r.db"
    assert not ray.is_initialized(), "an earlier test left Ray connected in this process"
    assert cli.main(["run", c0, "--repo", str(root), "--db", str(db), "--budget", "0.2", "--no-report",
                     "--json"]) == 0  # its own local Ray, stopped at its end
    capsys.readouterr()
    stored = _count(db)

    code, report = _compare(capsys, root, db, c0, c1)
    assert code == 0 and _no_ray(report["ray"]) and not ray.is_initialized()
    assert "ray_start" not in report["driver"]["phases"]
    assert len(report["rows"]) == 3  # a compare of no rows would pass the check below
    assert all(r["kind"] == "unchanged" and r["note"].startswith(f"same build: stored result of {c0[:10]}")
               for r in report["rows"]), report["rows"]
    assert _count(db) == stored

    code, report = _compare(capsys, root, db, c2, c3)
    assert report["ray"]["mode"] == cluster.PRIVATE and report["driver"]["phases"]["ray_start"] > 0
    rows = _rows(report)
    assert not rows["cpp_naive"]["note"] and rows["cpp_naive"]["kind"] != "unchanged"
    assert not ray.is_initialized()  # stopped with the command


def test_a_docs_only_compare_with_an_empty_store_builds_and_times_nothing(history, capsys, tmp_path, monkeypatch):
    """A fresh runner: no stored result, no build cache. A README edit changes no series'
    identity, so every row is unchanged without a number: nothing is built, no Ray starts,
    and the comment says that no numbers were needed."""
    root, (c0, c1, _c2, _c3) = history
    cache, summary = tmp_path / "cache", tmp_path / "summary.md"
    monkeypatch.setenv("FLOPWATCH_CACHE", str(cache))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))  # the markdown the PR comment gets
    assert not ray.is_initialized()
    code, report = _compare(capsys, root, tmp_path / "empty.db", c0, c1)
    assert code == 0 and _no_ray(report["ray"]) and not ray.is_initialized()
    assert len(report["rows"]) == 3 and report["not_retimed"] == 3
    assert all(r["kind"] == "unchanged" and r["note"] == NO_NUMBER and r["base"] is None and r["head"] is None
               for r in report["rows"]), report["rows"]
    assert not cache.exists() or not any(cache.rglob("*"))  # no build, not even into the cache
    assert _count(tmp_path / "empty.db") == 0
    markdown = summary.read_text()
    assert "no regressions" in markdown and "no numbers were needed" in markdown, markdown


def test_series_no_slot_here_could_run_start_no_ray_either(tmp_path, capsys, monkeypatch):
    """A HIP variant on a runner without HIP's toolchain (an NVIDIA runner): its series have
    no identity there, but the same build inputs at both commits, so they are unchanged
    without a number, from the toolchain probe alone. No Ray is started for them. (This machine has a HIP compiler:
    the compare's own probe, on this machine before any Ray, is told it has none.)"""
    import shutil

    from suite_repo import ROOT

    root = tmp_path / "repo"
    repo = make_suite_repo(root, good=("cpp_naive",))
    shutil.copytree(ROOT / "kernels" / "gemm" / "hip_naive", root / "kernels" / "gemm" / "hip_naive")
    shutil.copytree(ROOT / "kernels" / "include", root / "kernels" / "include")
    manifest = root / "kernels" / "gemm" / "hip_naive" / "variant.toml"
    manifest.write_text(manifest.read_text().replace('shapes = "gemm_gpu"', 'shapes = "tiny"'))
    config = root / "flopwatch.toml"
    config.write_text(config.read_text().replace('kernels = ["kernels"]', 'kernels = ["kernels"]\ninclude_dirs = ["kernels/include"]'))
    c0 = _commit(repo, "a HIP variant beside the CPU one")
    (root / "README.md").write_text("# kernels\n")
    c1 = _commit(repo, "docs only")
    db = tmp_path / "r.db"
    assert not ray.is_initialized()
    assert cli.main(["run", c0, "--repo", str(root), "--db", str(db), "--budget", "0.2", "--no-report",
                     "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    hip = [r for r in run["results"] if r["variant"] == "hip_naive"]
    assert hip and all(r["status"] == "skipped" for r in hip), hip  # built, no AMD GPU to run it

    from workers.backends import build

    real = build.toolchains
    monkeypatch.setattr(build, "toolchains",
                        lambda record=None: {**real(record), "hip": {"ident": None, "reason": "not found"}})
    monkeypatch.setenv("FLOPWATCH_TOOLCHAIN_CACHE", "0")  # the answer above, not the one kept on disk
    code, report = _compare(capsys, root, db, c0, c1)
    assert code == 0 and _no_ray(report["ray"]) and not ray.is_initialized(), report["ray"]
    rows = [r for r in report["rows"] if r["variant"] == "hip_naive"]
    # No toolchain at either commit, and the same build inputs at both: unchanged, with no number.
    assert rows and all(r["kind"] == "unchanged" and r["note"] == NO_NUMBER for r in rows), \
        [(r["kind"], r["note"]) for r in rows]
    # The op's rocm peer (torch_ref) carries its stored row, skipped (no AMD GPU here): not run.
    rocm = [r for r in report["rows"] if r["device"].split(":")[0] == "rocm" and r["variant"] != "hip_naive"]
    assert rocm and all(r["kind"] == "not run" for r in rocm) and report["not_run"] == len(rocm)
    assert all(r["kind"] == "unchanged" for r in report["rows"] if r["variant"] == "cpp_naive")


@pytest.mark.slow
def test_compare_times_only_what_an_edit_can_move(history, ray_cluster, capsys, tmp_path, monkeypatch):
    root, (c0, c1, c2, c3) = history
    db = tmp_path / "r.db"
    assert cli.main(["run", c0, "--repo", str(root), "--db", str(db), "--budget", "0.2", "--no-report",
                     "--json"]) == 0
    capsys.readouterr()
    stored = _count(db)

    # A README edit: every series unchanged, carried by the stored results, nothing timed.
    code, report = _compare(capsys, root, db, c0, c1)
    rows = _rows(report)
    assert code == 0 and report["not_retimed"] == len(report["rows"]) == 3
    assert all(r["kind"] == "unchanged" and r["note"].startswith(f"same build: stored result of {c0[:10]}")
               for r in rows.values()), rows
    assert _count(db) == stored  # nothing was run

    # A shared header: every build changes, every series is timed, at head and in pairs. The
    # base's identities have results in the store (the run of c0, a README edit before): they
    # stand for the base's run; the base is built for the pairs, not run again.
    before = _count(db)
    code, report = _compare(capsys, root, db, c1, c2)
    assert code in (0, 1) and len(report["rows"]) == 3  # 1: a timing moved; never 2, an error
    assert report["not_retimed"] == 0 and all(not r["note"] for r in report["rows"])
    assert _count(db) == before + 3  # 3 series at head only
    assert {r["kind"] for r in report["rows"]} <= {"same", "unsure", "slower", "faster"}
    assert all(r["base"]["paired"] and r["head"]["paired"] for r in report["rows"])  # the base built, paired

    # One variant's flags: that variant is timed at both commits and paired, the op's peer once,
    # at head (its row carries that number for both sides); the other is not timed.
    before = _count(db)
    code, report = _compare(capsys, root, db, c2, c3)
    rows = _rows(report)
    assert not rows["cpp_naive"]["note"] and rows["cpp_naive"]["kind"] in {"same", "unsure", "slower", "faster"}
    peer = rows["torch_ref"]
    assert peer["kind"] == "unchanged" and peer["note"] == PEER_AT_HEAD
    assert peer["head"]["samples"] and peer["base"] == peer["head"], peer
    assert rows["cpp_blocked"]["kind"] == "unchanged" and rows["cpp_blocked"]["note"].startswith("same build")
    assert _count(db) == before + 2  # the variant and the peer at head (the base's variant stored by c1..c2)
    assert rows["cpp_naive"]["base"]["paired"]

    # A new flopwatch harness: the stored results no longer match, and both commits have the
    # same identity: unchanged, with no number, and nothing timed.
    before = _count(db)
    monkeypatch.setattr(identity, "worker_code_digest", lambda: "a different harness")
    code, report = _compare(capsys, root, db, c0, c1)
    assert all(r["kind"] == "unchanged" and r["note"] == NO_NUMBER for r in report["rows"]), report
    assert _count(db) == before

    # --all times everything at both commits.
    before = _count(db)
    code, report = _compare(capsys, root, db, c0, c1, "--all")
    assert code in (0, 1) and len(report["rows"]) == 3
    assert report["not_retimed"] == 0 and _count(db) == before + 6

    # A changed series with nothing stored for its base identity is run at both commits.
    fresh = tmp_path / "fresh.db"
    code, report = _compare(capsys, root, fresh, c2, c3)
    assert _count(fresh) == 3 and _rows(report)["cpp_naive"]["base"]["paired"]  # variant at both, peer at head


def _no_ray(use: dict) -> bool:
    """`--json`'s ray record of a command that started no Ray: its mode, no slots; what the probe
    without Ray found (the toolchains from the cache) may be said beside."""
    return use.get("mode") == "not started" and "slots" not in use and "connect_s" not in use


@pytest.mark.slow
def test_builds_submitted_ahead_are_taken_over_by_their_run(history, ray_cluster, tmp_path, monkeypatch):
    """`build_ahead` (a compare's head builds while its base runs): the run that needs a build
    submitted ahead takes its ref over and submits nothing again; a cached build is not
    submitted ahead."""
    from pipeline.project import checkout
    from pipeline.run import runflow
    from pipeline.run.progress import Progress
    from pipeline.store import Store

    root, (_c0, _c1, _c2, c3) = history
    submitted = []
    real_submit = cluster.submit_build

    def counting(variant, *args, **kwargs):
        submitted.append(variant.name)
        return real_submit(variant, *args, **kwargs)

    monkeypatch.setattr(cluster, "submit_build", counting)
    session = runflow.Session(Store(tmp_path / "r.db"), tmp_path / "work", ray_cluster, Progress(enabled=False),
                              cache=tmp_path / "cache")
    repo = checkout.open_repo(root)
    options = runflow.RunOptions(budget_s=0.2)
    planned = runflow.plan_commit(session, repo, c3, options)
    wanted = {planned.series(j, session) for j in planned.jobs if j.variant == "cpp_naive"}
    assert runflow.build_ahead(session, planned, wanted, options) == 1 and submitted == ["cpp_naive"]
    assert runflow.build_ahead(session, planned, wanted, options) == 0  # already in flight
    outcome = runflow.run_commit(session, repo, c3, options, planned, wanted)
    assert submitted == ["cpp_naive"] and not session.builds_ahead  # taken over, not submitted again
    assert outcome.rebuilt == 1 and {r.status for r in outcome.results} == {"ok"}
    assert runflow.build_ahead(session, planned, wanted, options) == 0  # now in the cache


def test_compare_imports_what_it_needs_after_the_jobs_in_a_thread_of_its_own(tmp_path, monkeypatch):
    """`compare._import_beside`: the modules are imported off the main thread; one that fails
    to import stops the thread without raising (the main thread's own import reports it)."""
    import sys

    from pipeline.commands import compare

    (tmp_path / "fw_beside_ok.py").write_text("import threading\nTHREAD = threading.current_thread().name\n")
    (tmp_path / "fw_beside_bad.py").write_text("raise ImportError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    compare._import_beside(("fw_beside_bad", "fw_beside_never")).join(5)
    assert "fw_beside_bad" not in sys.modules and "fw_beside_never" not in sys.modules
    compare._import_beside(("fw_beside_ok",)).join(5)
    assert sys.modules["fw_beside_ok"].THREAD == "flopwatch-imports"
