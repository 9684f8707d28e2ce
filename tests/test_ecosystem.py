"""Kernels as the PyTorch world writes them, end to end on the CPU (tests/ecosystem_repo,
committed with real git and run through `run_commit` on a local Ray): entries that return
their output, a package's functional entry with keyword arguments, a KernelBench-style problem
whose Model is reference and peer (weights shared with the solution), a solution answering from
a cache, torch C++ extensions built by setup.py and by load_inline (as their authors build
them, once, by the build; never in a job), and the bad inputs each ending as one status with
one diagnostic while every other result is kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest

from pipeline.fleet import cluster
from pipeline.project.config import load_config
from pipeline.project.discovery import discover
from pipeline.run.plan import jobs_for
from pipeline.run.progress import Progress
from pipeline.run.runflow import RunOptions, Session, run_commit
from pipeline.run.summary import with_peer
from pipeline.store import Store

HERE = Path(__file__).resolve().parent
REPO = HERE / "ecosystem_repo"


def _commit(path: Path) -> git.Repo:
    repo = git.Repo.init(path, initial_branch="main")
    repo.index.add([str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and ".git" not in p.parts])
    repo.index.commit("kernels as their authors wrote them", author=git.Actor("Dev", "dev@example.com"))
    return repo


@pytest.fixture(scope="module")
def eco_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("ecosystem")
    shutil.copytree(REPO, base / "repo")
    config = base / "repo" / "flopwatch.toml"
    config.write_text(config.read_text() + "[defaults]\ntiming_budget_s = 0.1\n")
    repo = _commit(base / "repo")
    session = Session(Store(base / "results.db"), base, cluster.connect(None), Progress(enabled=False))
    try:
        outcome = run_commit(session, repo, "HEAD", RunOptions())
    finally:
        cluster.shutdown(session.cluster_info)
    rows: dict[str, list] = {}
    for r in outcome.results:
        rows.setdefault(r.variant, []).append(r)
    return outcome, rows


def test_the_repository_loads_as_written(repo_root):
    valid, invalid = discover(REPO, load_config(REPO))
    (unreadable,) = invalid  # a setup.py that computes its sources: one line says where and what to do
    assert unreadable.error.startswith("flopwatch/unreadable/variant.toml: extensions[0].from: "
                                       "ext_unreadable/setup.py:12: sources: computed by kernel_sources(...)")
    assert "[[extensions]] table instead" in unreadable.error and "\n" not in unreadable.error
    by_name = {v.name: v for v in valid}
    linear = by_name["linear_new"]
    assert linear.binding.returns  # a problem's entry returns its output, as its Model does
    assert linear.repo_op["kind"] == "problem" and linear.repo_op["dims"] == ["batch_size", "in_features",
                                                                             "out_features"]
    # without shapes, a solution runs at the problem's own sizes; the problem's peer at those and
    # at every shape its solutions use
    assert by_name["linear_cached"].shapes[0].dims == {"batch_size": 32, "in_features": 64, "out_features": 128}
    peer_jobs = {j.shape.key for j in jobs_for(valid) if j.variant == "linear"}
    assert peer_jobs == {"batch_size=32,in_features=64,out_features=128", "batch_size=8,in_features=32,out_features=16"}
    no_data_jobs = [j.shape.key for j in jobs_for(valid) if j.variant == "no_data"]
    assert no_data_jobs == ["rows=16"]  # a problem onboarded alone is measured at its own sizes
    assert set(linear.extra_files) == {"problems/linear.py", "solutions/linear_new.py"}
    (ext,) = by_name["myext_swiglu"].extensions
    assert (ext["name"], ext["kind"], ext["sources"]) == ("myext_cpp", "setup", ["ext/csrc/bind.cpp",
                                                                                 "ext/csrc/swiglu.cpp"])
    assert ext["extra_cflags"] == ["-O2"] and by_name["myext_swiglu"].devices == ("cpu",)
    (inline,) = by_name["add_inline"].extensions
    assert inline["kind"] == "load_inline" and inline["functions"] == ["add_forward"]
    assert by_name["my_rms"].binding.kwargs == {"casting_mode": "llama"}


@pytest.mark.slow
def test_functional_entries_are_checked_on_what_they_return(eco_run):
    _, rows = eco_run
    for r in rows["my_rms"]:
        assert r.status == "ok", r.diagnostic
        assert r.correctness["rel_fro_err"] < (1e-5 if r.dtype == "fp32" else 2e-2)
        assert r.bytes_moved == (2 * 64 * 512 + 512) * (4 if r.dtype == "fp32" else 2)
    (out_style,) = rows["my_rms_out"]
    assert out_style.status == "ok", out_style.diagnostic  # args name the output it writes
    (library_op,) = rows["torch_op_swiglu"]
    assert library_op.status == "ok", library_op.diagnostic  # torch.ops.mylib_test.swiglu, registered by its source
    (shape,) = rows["rms_wrong_shape"]
    assert shape.status == "incorrect"
    assert "returned a tensor of shape [64, 511], expected [64, 512]" in shape.diagnostic
    (dtype,) = rows["rms_wrong_dtype"]
    assert dtype.status == "incorrect" and "returned float64, expected float32" in dtype.diagnostic
    # One line each: a table cell and a PR comment row show the whole finding.
    assert "\n" not in shape.diagnostic.strip() and "\n" not in dtype.diagnostic.strip(), (shape.diagnostic,
                                                                                          dtype.diagnostic)


@pytest.mark.slow
def test_a_problem_is_its_own_reference_and_peer(eco_run):
    _, rows = eco_run
    new = {r.shape: r for r in rows["linear_new"]}
    assert set(new) == {"batch_size=32,in_features=64,out_features=128", "batch_size=8,in_features=32,out_features=16"}
    for r in new.values():
        # the solution's weights are the Model's: built under one seed, as KernelBench builds both
        assert r.status == "ok", r.diagnostic
        dims = {k: int(v) for k, v in (p.split("=") for p in r.shape.split(","))}
        assert r.flops == 2 * dims["batch_size"] * dims["in_features"] * dims["out_features"]
        assert r.bytes_moved == 4 * dims["batch_size"] * (dims["in_features"] + dims["out_features"])
    # the declared peer (the problem's Model) runs at every shape the solutions use
    peers = {r.shape for r in rows["linear"]}
    assert peers == set(new) and all(r.status == "ok" and r.peer for r in rows["linear"])
    with_pct = with_peer([r.to_dict() for rs in rows.values() for r in rs])
    assert all(r["pct_of_peer"] > 0 for r in with_pct if r["variant"] == "linear_new")


@pytest.mark.slow
def test_a_solution_that_answers_from_a_cache_is_incorrect(eco_run):
    _, rows = eco_run
    (r,) = rows["linear_cached"]
    assert r.status == "incorrect"
    assert "does not depend on this call's inputs" in r.diagnostic


@pytest.mark.slow
def test_a_problem_whose_inputs_raise_is_invalid_and_nothing_else_is_lost(eco_run):
    outcome, rows = eco_run
    (r,) = rows["no_data"]
    assert r.status == "invalid"
    assert r.diagnostic.startswith("problem 'no_data' (problems/no_data.py): get_inputs() raised FileNotFoundError")
    ok = {r.variant for r in outcome.results if r.status == "ok"}
    assert {"linear", "linear_new", "my_rms", "my_rms_out", "add_inline", "myext_swiglu"} <= ok
    (unreadable,) = rows["unreadable"]
    assert unreadable.status == "invalid" and "computed by kernel_sources(...)" in unreadable.diagnostic


@pytest.mark.slow
def test_extensions_are_built_as_their_repository_builds_them(eco_run):
    outcome, rows = eco_run
    (swiglu,) = rows["myext_swiglu"]
    assert swiglu.status == "ok", swiglu.diagnostic
    assert swiglu.toolchain.startswith("torch:torch ")
    (add,) = rows["add_inline"]
    assert add.status == "ok", add.diagnostic  # ModelNew's load_inline got the module the build made
    (dotted,) = rows["dotted_swiglu"]
    assert dotted.status == "ok", dotted.diagnostic  # `from mypkg import _C`: where build_ext --inplace puts it
    peers = {r.variant for r in outcome.results if r.peer}
    assert {"peer.swiglu", "peer.add"} <= peers  # built-in peers: torch's swiglu, the problem's Model


@pytest.mark.slow
def test_an_extension_that_does_not_compile_is_build_failed_at_file_and_line(eco_run):
    _, rows = eco_run
    (r,) = rows["add_broken"]
    assert r.status == "build_failed"
    assert "extension 'add_broken' failed to build" in r.diagnostic
    assert "main.cpp:" in r.diagnostic and "error: expected" in r.diagnostic  # the compiler's first error


@pytest.mark.slow
def test_an_extension_built_at_run_time_without_being_declared_is_invalid(eco_run):
    _, rows = eco_run
    (r,) = rows["add_undeclared"]
    assert r.status == "invalid"
    assert "load_inline(name='add_ext') at run time" in r.diagnostic and "[[extensions]] from" in r.diagnostic
