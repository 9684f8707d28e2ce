"""Ops a repository declares itself (`op.py` beside its kernels) and the built-in peer a run
adds when a repository declares none: read without running on the driver, validated with the
file and name in the complaint, run in the job's child, and reported end to end with a % of
peer on every correct row (tests/repo_ops is the repository, committed with real git)."""

from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest

from pipeline.commands.publish import write_site
from pipeline.fleet import cluster
from pipeline.project.config import ProjectConfig
from pipeline.project.discovery import discover, find_ops
from pipeline.run.peers import builtin_peers
from pipeline.run.progress import Progress
from pipeline.run.runflow import RunOptions, Session, run_commit
from pipeline.run.summary import with_peer
from pipeline.store import Store
from reports.site import commit_page_name
from workers.ops import OPS, op_source_digest
from workers.ops.repo import OpDefinitionError, parse_op

HERE = Path(__file__).resolve().parent
GOOD_OP = (HERE / "repo_ops" / "kernels" / "rmsnorm" / "op.py").read_text()


def _commit(path: Path) -> git.Repo:
    repo = git.Repo.init(path, initial_branch="main")
    repo.index.add([str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and ".git" not in p.parts])
    repo.index.commit("kernels and an op of their own", author=git.Actor("Dev", "dev@example.com"))
    return repo


def _variant_toml(name: str, op: str) -> str:
    return (f'name = "{name}"\nop = "{op}"\nbackend = "cpp"\nsources = ["rmsnorm.cpp"]\ndtypes = ["fp32"]\n'
            f'shapes = [[8, 32]]\n[binding]\nkind = "c"\nentry = "rmsnorm"\n')


# -- reading an op.py without running it ------------------------------------------------------

def test_the_driver_reads_an_op_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    source = GOOD_OP + f"\nopen({str(marker)!r}, 'w').write('the driver ran repository code')\n"
    op = parse_op("kernels/rmsnorm/op.py", source, "rmsnorm", tuple(OPS))
    assert not marker.exists()
    assert (op.name, op.inputs, op.output, op.dims, op.scalar_names) == ("rmsnorm", ("X", "W"), "Y", ("M", "N"), ("eps",))
    assert op.tolerance == {"fp32": (1e-5, 1e-4), "fp16": (2e-3, 1e-2)} and op.has_peer
    assert op.peer_name == "torch.nn.functional.rms_norm"
    assert op_source_digest(op) != op_source_digest(parse_op("x/op.py", source + "\n# edited\n", "rmsnorm"))
    assert op_source_digest(op) == op_source_digest(op.to_dict())  # as a variant carries it


@pytest.mark.parametrize("edit,key,words", [
    (lambda s: s.replace("def reference(", "def not_the_reference("), "reference", "missing: def reference(inputs"),
    (lambda s: s.replace('INPUTS = ("X", "W")', "INPUTS = make_names()"), "INPUTS", "must be a literal"),
    (lambda s: s.replace('OUTPUT = "Y"', 'OUTPUT = "X"'), "INPUTS/OUTPUT/DIMS/SCALARS", "['X'] used twice"),
    (lambda s: s.replace('"fp16": (2e-3, 1e-2)', '"fp64": (2e-3, 1e-2)'), "TOLERANCE", "'fp64' is not one of"),
    (lambda s: s.replace("def flops(dims):", "def flops():"), "flops", "must accept 1 positional argument"),
    (lambda s: s.replace("def scalars(dims):", "def scalar_values(dims):"), "scalars", "SCALARS is declared"),
    (lambda s: "NAME = 'gemm'\n" + s, "NAME", "'gemm' is a built-in op"),
    (lambda s: s + "\ndef broken(:\n", "(syntax)", "line"),
])
def test_a_broken_op_names_its_file_the_name_and_the_fix(edit, key, words):
    with pytest.raises(OpDefinitionError) as info:
        parse_op("kernels/rmsnorm/op.py", edit(GOOD_OP), "rmsnorm", tuple(OPS))
    assert str(info.value).startswith(f"kernels/rmsnorm/op.py: {key}: ") and words in str(info.value)


def test_discovery_finds_ops_and_variants_of_a_broken_op_say_which_file(tmp_path):
    shutil.copytree(HERE / "repo_ops" / "kernels", tmp_path / "kernels")
    broken = tmp_path / "kernels" / "layernorm"
    (broken / "cpp").mkdir(parents=True)
    (broken / "op.py").write_text(GOOD_OP.replace("def make_inputs(", "def inputs_made("))
    (broken / "cpp" / "variant.toml").write_text(_variant_toml("layernorm_cpp", "layernorm"))
    shutil.copy2(tmp_path / "kernels" / "rmsnorm" / "cpp_rows" / "rmsnorm.cpp", broken / "cpp")
    ops, bad = find_ops(tmp_path, ("kernels",))
    assert list(ops) == ["rmsnorm"] and [b.manifest for b in bad] == ["kernels/layernorm/op.py"]
    valid, invalid = discover(tmp_path, ProjectConfig())
    rms = next(v for v in valid if v.name == "rmsnorm_cpp")
    assert rms.repo_op["path"] == "kernels/rmsnorm/op.py" and rms.layout == "default"
    errors = {b.manifest: b.error for b in invalid}
    assert "kernels/layernorm/op.py: make_inputs: missing" in errors["kernels/layernorm/op.py"]
    assert "kernels/layernorm/op.py would declare it but is broken" in errors["kernels/layernorm/cpp/variant.toml"]


def test_a_builtin_peer_joins_where_the_repository_declares_none(tmp_path):
    shutil.copytree(HERE / "repo_ops" / "kernels", tmp_path / "kernels")
    valid, _ = discover(tmp_path, ProjectConfig())
    added = {v.name: v for v in builtin_peers(valid)}
    assert set(added) == {"peer.gemm", "peer.rmsnorm"}
    assert added["peer.gemm"].description == "built-in peer: torch.matmul" and added["peer.gemm"].devices == ("cpu",)
    assert added["peer.rmsnorm"].devices == ("cpu", "cuda")  # the op's variants run on both
    assert added["peer.rmsnorm"].repo_op["path"] == "kernels/rmsnorm/op.py"
    # a repository's own peer wins on the device kinds it covers
    own = next(v for v in valid if v.op == "gemm")
    declared = own.__class__.from_dict({**own.to_dict(), "name": "mine", "peer": True, "devices": ["cpu"]})
    assert [v.name for v in builtin_peers([*valid, declared])] == ["peer.rmsnorm"]


# -- end to end: built, checked, timed and reported ------------------------------------------

@pytest.fixture(scope="module")
def op_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("repo_ops")
    shutil.copytree(HERE / "repo_ops" / "kernels", base / "repo" / "kernels")
    raising = base / "repo" / "kernels" / "raising"
    (raising / "cpp").mkdir(parents=True)
    head = "def make_inputs(dims, dtype, layout, device, generator):\n"
    assert head in GOOD_OP
    (raising / "op.py").write_text(GOOD_OP.replace(head, head + "    1 / 0\n"))
    (raising / "cpp" / "variant.toml").write_text(_variant_toml("raising_cpp", "raising"))
    shutil.copy2(base / "repo" / "kernels" / "rmsnorm" / "cpp_rows" / "rmsnorm.cpp", raising / "cpp")
    (base / "repo" / "flopwatch.toml").write_text("[defaults]\ntiming_budget_s = 0.2\n")
    repo = _commit(base / "repo")
    session = Session(Store(base / "results.db"), base, cluster.connect(None), Progress(enabled=False))
    try:
        outcome = run_commit(session, repo, "HEAD", RunOptions())
    finally:
        cluster.shutdown(session.cluster_info)
    write_site(session.store, base / "site")
    page = (base / "site" / commit_page_name(outcome.commit.sha)).read_text()
    return outcome, page


@pytest.mark.slow
def test_a_repository_op_is_built_checked_timed_and_reported(op_run):
    outcome, page = op_run
    rows = [r for r in outcome.results if r.variant == "rmsnorm_cpp"]
    assert sorted(r.shape for r in rows) == ["M=128,N=1024", "M=64,N=512"]
    for r in rows:
        assert r.status == "ok", r.diagnostic
        m, n = (int(p.split("=")[1]) for p in r.shape.split(","))
        # the counts come from the op's own code, run in the child
        assert r.flops == 4.0 * m * n and r.bytes_moved == 4.0 * (2 * m * n + n)
        assert r.correctness["rel_fro_err"] < 1e-5 and r.median_s > 0
    assert "rmsnorm_cpp" in page and "built-in peer: the op&#39;s peer()" in page


@pytest.mark.slow
def test_every_correct_row_of_a_repository_without_a_peer_has_a_percent_of_peer(op_run):
    outcome, page = op_run
    rows = with_peer([r.to_dict() for r in outcome.results])
    correct = [r for r in rows if r["status"] == "ok" and not r["peer"]]
    assert {r["variant"] for r in correct} == {"cpp_naive", "rmsnorm_cpp"}
    assert len(correct) == 4 and all(r["pct_of_peer"] and r["pct_of_peer"] > 0 for r in correct), correct
    peers = {r["variant"]: r for r in rows if r["peer"]}
    assert {r["backend"] for r in peers.values()} == {"builtin"}
    assert {k.split(".")[1] for k in peers} == {"gemm", "rmsnorm", "raising"}
    assert peers["peer.gemm"]["status"] == peers["peer.rmsnorm"]["status"] == "ok"
    assert "built-in peer: torch.matmul" in page


@pytest.mark.slow
def test_an_op_whose_code_raises_is_invalid_naming_the_function_and_file(op_run):
    outcome, _ = op_run
    rows = [r for r in outcome.results if r.variant == "raising_cpp"]
    assert rows and {r.status for r in rows} == {"invalid"}
    assert "op 'raising' (kernels/raising/op.py): make_inputs() raised ZeroDivisionError" in rows[0].diagnostic
