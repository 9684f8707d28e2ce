"""`[reference]`: a variant checked against the repository's own reference callable (or, with
check = "none", measured as `unchecked` and its output's digest compared across commits), end
to end on the CPU through `run_commit` and `flopwatch compare` on a repository written here."""

from __future__ import annotations

import textwrap
from pathlib import Path

import git
import numpy as np
import pytest

from pipeline import cli
from pipeline.fleet import cluster
from pipeline.history import compare as cmp
from pipeline.project.config import load_config
from pipeline.project.discovery import discover
from pipeline.run.progress import Progress
from pipeline.run.runflow import RunOptions, Session, run_commit
from pipeline.store import Store

OPS = '''\
import torch


def fast_scale(x, s):
    return x * s


def fast_scale_ref(x, s):
    return x * s


def wrong_scale(x, s):
    return x * (s + 1e-2)


def raising_ref(x, s):
    raise ValueError("the reference is broken")


def add_out(a, b, out):
    torch.add(a, b, out=out)


def take(x, idx):
    return x[idx]
'''

SCALE = '''\
name = "{name}"
op = "{name}"
backend = "python"
dtypes = ["fp32"]

[binding]
kind = "python"
entry = "../../ops.py:{entry}"

[reference]
call = "../../ops.py:{ref}"
found = "convention"
sizes = {{ N = 1000 }}
inputs = [{{ name = "x", shape = ["N"] }}, {{ name = "s", value = 2.0 }}]
flops = "N"
'''

ADD_OUT = '''\
name = "add_out"
op = "add_out"
backend = "python"
dtypes = ["fp32"]
shapes = [{ R = 8 }]

[binding]
kind = "python"
entry = "../../ops.py:add_out"

[reference]
call = "torch.add"
sizes = { R = 4, C = 64 }
inputs = [{ name = "a", shape = ["R", "C"] }, { name = "b", shape = ["R", "C"] },
          { name = "out", shape = ["R", "C"], output = true }]
'''


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _commit(root: Path, subject: str) -> str:
    repo = git.Repo(root) if (root / ".git").exists() else git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    return repo.index.commit(subject, author=git.Actor("Dev", "dev@example.com")).hexsha


TAKE = '''\
name = "take"
op = "take"
backend = "python"
dtypes = ["fp32"]

[binding]
kind = "python"
entry = "../../ops.py:take"

[reference]
call = "torch.take"
sizes = { N = 100, M = 50 }
inputs = [{ name = "x", shape = ["N"] }, { name = "idx", shape = ["M"], dtype = "int64", high = 100 }]
'''

# A package's function checked against another of its module (found there by convention).
GELU = '''\
name = "gelu_tanh"
op = "gelu_tanh"
backend = "python"
dtypes = ["fp32", "bf16"]

[binding]
kind = "python"
entry = "mypkg.acts:gelu_tanh"

[reference]
call = "mypkg.acts:gelu_tanh_ref"
found = "convention"
where = "src/mypkg/acts.py:9"
sizes = { R = 16, C = 128 }
inputs = [{ name = "x", shape = ["R", "C"] }]
'''

ACTS = '''\
import torch


def gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


def gelu_tanh_ref(x):
    return 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x ** 3)))
'''


def _checked_repo(root: Path) -> None:
    _write(root, {
        "flopwatch.toml": 'kernels = ["kernels"]\ninclude_dirs = ["src"]\n[defaults]\ntiming_budget_s = 0.1\n',
        "kernels/take/variant.toml": TAKE,
        "kernels/gelu_tanh/variant.toml": GELU,
        "src/mypkg/__init__.py": "",
        "src/mypkg/acts.py": ACTS,
        "ops.py": OPS,
        "kernels/scale/variant.toml": SCALE.format(name="scale", entry="fast_scale", ref="fast_scale_ref"),
        "kernels/scale_wrong/variant.toml": SCALE.format(name="scale_wrong", entry="wrong_scale",
                                                         ref="fast_scale_ref"),
        "kernels/scale_raises/variant.toml": SCALE.format(name="scale_raises", entry="fast_scale", ref="raising_ref"),
        "kernels/add_out/variant.toml": ADD_OUT,
    })


@pytest.fixture(scope="module")
def ref_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("reference")
    _checked_repo(base / "repo")
    _commit(base / "repo", "kernels and their references")
    session = Session(Store(base / "results.db"), base, cluster.connect(None), Progress(enabled=False))
    try:
        outcome = run_commit(session, git.Repo(base / "repo"), "HEAD", RunOptions())
    finally:
        cluster.shutdown(session.cluster_info)
    return {r.variant: r for r in outcome.results}


def test_the_table_loads_as_written(tmp_path):
    _checked_repo(tmp_path)
    valid, invalid = discover(tmp_path, load_config(tmp_path))
    assert not invalid
    by_name = {v.name: v for v in valid}
    scale = by_name["scale"]
    assert scale.binding.returns and scale.repo_op["kind"] == "reference"  # returns implied
    assert scale.shapes[0].dims == {"N": 1000} and "ops.py" in scale.extra_files
    assert scale.repo_op["path"] == "ops.py" and "def fast_scale_ref" in scale.repo_op["source"]
    gelu = by_name["gelu_tanh"]  # a package's module: its file in the checkout is what the op digest covers
    assert gelu.repo_op["path"] == "src/mypkg/acts.py" and "gelu_tanh_ref" in gelu.repo_op["source"]
    assert gelu.repo_op["peer_name"] == "mypkg.acts:gelu_tanh_ref (src/mypkg/acts.py:9)"
    add = by_name["add_out"]
    assert not add.binding.returns  # it writes into the output input
    assert add.shapes[0].dims == {"R": 8, "C": 64}  # a size the shape leaves out comes from sizes


@pytest.mark.slow
def test_an_entry_matching_its_reference_is_ok(ref_run):
    r = ref_run["scale"]
    assert r.status == "ok", r.diagnostic
    assert r.flops == 1000 and r.bytes_moved == 2 * 1000 * 4
    assert r.correctness["rel_fro_err"] < 1e-6
    peer = ref_run["peer.scale"]  # the reference, in the job's dtype, is the op's peer
    assert peer.status == "ok", peer.diagnostic


@pytest.mark.slow
def test_an_entry_computing_something_else_is_incorrect(ref_run):
    r = ref_run["scale_wrong"]
    assert r.status == "incorrect" and "relative error" in r.diagnostic


@pytest.mark.slow
def test_a_reference_that_raises_is_invalid_and_named(ref_run):
    r = ref_run["scale_raises"]
    assert r.status == "invalid"
    assert "reference '../../ops.py:raising_ref' (ops.py)" in r.diagnostic
    assert "ValueError: the reference is broken" in r.diagnostic


@pytest.mark.slow
def test_an_entry_writing_into_its_output_argument_is_checked_on_it(ref_run):
    r = ref_run["add_out"]
    assert r.status == "ok", r.diagnostic
    assert r.correctness["rel_fro_err"] < 1e-6 and r.correctness["checks"][0]["unwritten"] == 0


@pytest.mark.slow
def test_integer_inputs_and_package_references(ref_run):
    take = ref_run["take"]
    assert take.status == "ok", take.diagnostic
    assert take.bytes_moved == (100 + 50) * 4 + 50 * 8  # floats read and written, the int64 indices read
    gelu = ref_run["gelu_tanh"]  # one row per variant in ref_run: the last dtype's
    assert gelu.status == "ok", gelu.diagnostic
    peer = ref_run["peer.gelu_tanh"]  # the peer ships the package and imports it as the entry does
    assert peer.status == "ok", peer.diagnostic


def test_torch_functions_are_references():
    from workers.bindings.python_entry import entry_parts

    assert entry_parts("torch.add") == ("module", "torch", "add")
    assert entry_parts("torch.nn.functional.gelu") == ("module", "torch", "nn.functional.gelu")
    assert entry_parts("torch.nn.functional:gelu") == ("module", "torch.nn.functional", "gelu")
    assert entry_parts("torch.ops.mylib.op") == ("torch_op", "torch.ops.mylib.op", "")


def test_the_op_a_job_sees(tmp_path):
    """The namespace the child checks with, without a run: inputs in order under the job's
    generator, the output buffer at its place among the entry's arguments, the reference in
    fp64 shaped as the output even where a size is the output's alone."""
    import torch

    from workers.core.records import Binding, Variant
    from workers.job.child import reference_resolver
    from workers.ops import for_variant

    inputs = ({"name": "a", "shape": ["R", "C"]}, {"name": "out", "shape": ["R", "C", "K"], "output": True},
              {"name": "k", "value": 2})
    spec = {"kind": "reference", "name": "rep", "call": "torch.Tensor.repeat_interleave", "inputs": inputs,
            "dims": ["R", "C", "K"], "sizes": {"R": 2, "C": 3, "K": 2}, "functions": ["peer_returns"]}
    variant = Variant(name="rep", op="rep", backend="python", folder="k", sources=(),
                      binding=Binding("python", "x.py:f"), dtypes=("bf16",), shapes=(), repo_op=spec)
    op = for_variant(variant, reference_resolver(variant, tmp_path))  # an artifact without a Python tree: torch's own function
    made = op.make_inputs({"R": 2, "C": 3, "K": 2}, torch.bfloat16, "default", "cpu", torch.Generator().manual_seed(1))
    assert list(made) == ["a", "k"] and made["a"].dtype == torch.bfloat16 and made["k"] == 2
    out = torch.empty(2, 3, 2)
    args = op.tensor_args(made, out)
    assert args[1] is out and args[2] == 2 and op.output_shape({"R": 2, "C": 3, "K": 2}) == (2, 3, 2)
    ref = op.reference(made, "default")
    assert ref.dtype == torch.float64 and ref.shape == (2, 3, 2)
    assert torch.equal(ref.reshape(-1), made["a"].double().reshape(-1).repeat_interleave(2))


def test_what_an_unchecked_call_is_judged_on(tmp_path):
    """No reference, but still: the same digest at every commit (a fixed seed), elements never
    written, and an output that moves between two calls on the same inputs (a race)."""
    import torch

    from workers.core.records import Binding, Variant
    from workers.job.child import reference_resolver, unchecked_check
    from workers.ops import for_variant

    def variant(output: bool) -> Variant:
        inputs = [{"name": "x", "shape": ["N"]}] + ([{"name": "y", "shape": ["N"], "output": True}] if output else [])
        spec = {"kind": "reference", "name": "u", "call": "", "inputs": inputs, "dims": ["N"], "sizes": {"N": 64},
                "functions": []}
        return Variant(name="u", op="u", backend="python", folder="k", sources=(), binding=Binding("python", "k.py:f"),
                       dtypes=("fp32",), shapes=(), repo_op=spec)

    def entry(fn, returns: bool):
        def call(inputs, out=None, alpha=1.0, beta=0.0):
            return fn(inputs["x"]) if returns else fn(inputs["x"], out)
        call.returns = returns
        return call

    def judged(fn, returns: bool = True) -> tuple[dict, dict]:
        v = variant(not returns)
        return unchecked_check(entry(fn, returns), for_variant(v, reference_resolver(v, tmp_path)), v, {"N": 64}, torch.float32, "cpu")

    figures, digest = judged(lambda x: x * 2)
    assert figures["passed"] and figures["repeat_mismatch"] == 0 and digest["shape"] == [64]
    assert judged(lambda x: x * 2)[1] == digest  # the same inputs every time
    assert judged(lambda x: x * 3)[1]["sha256"] != digest["sha256"]
    racy, _ = judged(lambda x: x + torch.rand(64))
    assert not racy["passed"] and "output changed between two runs on the same inputs" in racy["problem"]
    half, _ = judged(lambda x, out: out[:32].copy_(x[:32]), returns=False)
    assert not half["passed"] and "32 element(s) never written, first at [32]" in half["problem"]
    written, _ = judged(lambda x, out: out.copy_(x), returns=False)
    assert written["passed"]


# -- manifest errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("change, key, words", [
    (('call = "../../ops.py:fast_scale_ref"\n', ""), "reference.call", "missing"),
    (('sizes = { N = 1000 }', 'sizes = { NN = 1000 }'), "reference.inputs[0].shape", "did you mean 'NN'"),
    (('{ name = "s", value = 2.0 }]', '{ name = "s", value = 2.0 }, { name = "o1", shape = ["N"], output = true },'
                                      ' { name = "o2", shape = ["N"], output = true }]'),
     "reference.inputs[3].output", "only one input is the output"),
    (('call = "../../ops.py:fast_scale_ref"', 'call = "../../ops.py:fast_scale_rf"'), "reference.call",
     "did you mean 'fast_scale_ref'"),
    (('found = "convention"', 'found = "conventions"'), "reference.found", "did you mean 'convention'"),
    (('op = "scale"', 'op = "gemm"'), "op", "built-in op"),
])
def test_a_wrong_table_is_invalid_with_its_key(tmp_path, change, key, words):
    _write(tmp_path, {"flopwatch.toml": 'kernels = ["kernels"]\n', "ops.py": OPS,
                      "kernels/scale/variant.toml": SCALE.format(name="scale", entry="fast_scale",
                                                                 ref="fast_scale_ref").replace(*change)})
    valid, (bad,) = discover(tmp_path, load_config(tmp_path))
    assert bad.error.startswith(f"kernels/scale/variant.toml: {key}: "), bad.error
    assert words in bad.error


@pytest.mark.parametrize("peer, key, words", [
    ('{ op = "slu", inputs = { x = "X" } }', "reference.peer.op", "'slu' is not a built-in op; did you mean 'silu'"),
    ('{ op = "gemm", inputs = { x = "A" } }', "reference.peer.op", "has no torch peer returning its output"),
    ('{ op = "silu", inputs = { s = "X" } }', "reference.peer.inputs.s", "not a tensor input of [reference]"),
    ('{ op = "silu", inputs = { x = "Y" } }', "reference.peer.inputs.x", "'Y' is not an input of silu"),
    ('{ op = "swiglu", inputs = { x = "A" } }', "reference.peer.inputs", "swiglu's inputs ['B'] are given by none"),
])
def test_a_wrong_peer_is_invalid_with_its_key(tmp_path, peer, key, words):
    text = SCALE.format(name="scale", entry="fast_scale", ref="fast_scale_ref").replace(
        'found = "convention"', f'found = "convention"\npeer = {peer}')
    _write(tmp_path, {"flopwatch.toml": 'kernels = ["kernels"]\n', "ops.py": OPS, "kernels/scale/variant.toml": text})
    _, (bad,) = discover(tmp_path, load_config(tmp_path))
    assert bad.error.startswith(f"kernels/scale/variant.toml: {key}: "), bad.error
    assert words in bad.error


def test_a_built_in_op_named_as_the_peer_is_what_the_peer_runs(tmp_path):
    """`[reference] peer`: the built-in op's torch peer, on the table's inputs under the op's
    names, is timed instead of the reference in the job's dtype; its name says so."""
    import torch

    from workers.job.child import reference_resolver
    from workers.ops import for_variant

    text = SCALE.format(name="scale", entry="fast_scale", ref="fast_scale_ref").replace(
        'found = "convention"', 'found = "convention"\npeer = { op = "silu", inputs = { x = "X" } }')
    _write(tmp_path, {"flopwatch.toml": 'kernels = ["kernels"]\n', "ops.py": OPS, "kernels/scale/variant.toml": text})
    (variant,), bad = discover(tmp_path, load_config(tmp_path))
    assert bad == [] and variant.repo_op["peer_name"] == "torch.nn.functional.silu (built-in op silu)"
    op = for_variant(variant, reference_resolver(variant, tmp_path))
    made = op.make_inputs({"N": 8}, torch.float32, "default", "cpu", torch.Generator().manual_seed(1))
    assert torch.equal(op.peer_returns(made), torch.nn.functional.silu(made["x"]))


def test_variants_share_a_reference_op_only_with_the_same_table(tmp_path):
    same = SCALE.format(name="scale2", entry="fast_scale", ref="fast_scale_ref").replace('op = "scale2"', 'op = "scale"')
    other = same.replace('name = "scale2"', 'name = "scale3"').replace("N = 1000", "N = 999")
    _write(tmp_path, {"flopwatch.toml": 'kernels = ["kernels"]\n', "ops.py": OPS,
                      "kernels/scale/variant.toml": SCALE.format(name="scale", entry="fast_scale", ref="fast_scale_ref"),
                      "kernels/more/scale2/variant.toml": same.replace("../../ops.py", "../../../ops.py"),
                      "kernels/scale3/variant.toml": other})
    valid, (bad,) = discover(tmp_path, load_config(tmp_path))
    assert sorted(v.name for v in valid) == ["scale", "scale2"]
    assert bad.error.startswith("kernels/scale3/variant.toml: op: 'scale' is already the op of the [reference] "
                                "table of kernels/more/scale2/variant.toml, which differs")


# -- no reference: unchecked, and compare's "output changed" -----------------------------------

UNCHECKED = '''\
name = "{name}"
op = "{name}"
backend = "python"
dtypes = ["fp32"]

[binding]
kind = "python"
entry = "{name}.py:run"

[reference]
check = "none"
sizes = {{ N = 256 }}
inputs = [{{ name = "x", shape = ["N"] }}]
'''


@pytest.mark.slow
def test_unchecked_outputs_are_compared_across_commits(tmp_path, capsys):
    root = tmp_path / "repo"
    _write(root, {
        "flopwatch.toml": 'kernels = ["kernels"]\n[defaults]\ntiming_budget_s = 0.1\n',
        "kernels/moves/variant.toml": UNCHECKED.format(name="moves"),
        "kernels/moves/moves.py": "def run(x):\n    return x * 2.0\n",
        "kernels/steady/variant.toml": UNCHECKED.format(name="steady"),
        "kernels/steady/steady.py": "def run(x):\n    return x * 2.0\n",
    })
    base = _commit(root, "two kernels without a reference")
    # the same work at both commits (a microsecond op: x + x and x * 2 differ in time by 2x)
    _write(root, {"kernels/moves/moves.py": "def run(x):\n    return x * 2.5\n",
                  "kernels/steady/steady.py": "def run(x):\n    return x * 2.0  # the same values, other code\n"})
    head = _commit(root, "one output moves")
    db = tmp_path / "r.db"
    code = cli.main(["compare", base, head, "--repo", str(root), "--db", str(db), "--budget", "0.1",
                     "--pair-budget", "0.1", "--no-report", "--threshold", "90%"])  # timing noise is not the subject
    out = capsys.readouterr().out
    assert code == 0, out  # a changed output is reported, never a regression
    lines = {line.split("|")[2].strip(): line for line in out.splitlines() if line.startswith("| ")}
    # the inputs of the same fixed seed at both commits: the first values moved by x/2
    import torch

    from workers.ops.reference import DIGEST_SEED

    x = torch.randn(256, generator=torch.Generator().manual_seed(DIGEST_SEED))[:8]
    moved = float((x * 2.5 - x * 2.0).abs().max())
    assert f"output changed (first 8 values: max difference {moved:.3g})" in lines["moves"], out
    assert "output changed" not in lines["steady"], out
    import json
    import sqlite3

    stored = sqlite3.connect(db).execute("SELECT variant, status, correctness FROM results").fetchall()
    assert {(v, s) for v, s, _ in stored} == {("moves", "unchecked"), ("steady", "unchecked")}
    digest = json.loads(stored[0][2])["output"]
    assert digest["shape"] == [256] and digest["dtype"] == "float32" and len(digest["sample"]) == 8


def test_a_changed_output_is_reported_and_is_no_regression():
    def row(sha: str, sample: float, seed: int) -> dict:
        rng = np.random.default_rng(seed)
        return {"variant": "k", "shape": "N=256", "dtype": "fp32", "device": "cpu:test", "status": "unchecked",
                "samples": list(1e-3 * (1 + 0.01 * rng.standard_normal(30))), "flops": 256.0,
                "correctness": {"output": {"sha256": sha, "shape": [256], "dtype": "float32",
                                           "sample": [sample, 1.0]}}}

    def report(base: dict, head: dict) -> cmp.Report:
        rows = cmp.compare_sides(cmp.pool([base]), cmp.pool([head]), 0.5)
        return cmp.Report("a" * 40, "base", "b" * 40, "head", 0.5, 1, tuple(rows))

    moved = report(row("aa", 0.5, 1), row("bb", 0.75, 2))
    assert moved.rows[0].kind == "same" and cmp.exit_status(moved) == 0  # unchecked is measured
    assert "output changed (first 2 values: max difference 0.25)" in cmp.render_markdown(moved)
    assert "1 series; 1 output(s) changed (no reference to check them)." in cmp.render_markdown(moved)
    assert cmp.as_json(moved)["rows"][0]["output_changed"].startswith("output changed")
    steady = report(row("aa", 0.5, 1), row("aa", 0.5, 2))
    assert "output changed" not in cmp.render_markdown(steady)


def test_unchecked_is_shown_as_its_own_status(tmp_path):
    import dataclasses
    import io

    from rich.console import Console

    from pipeline.run.summary import exit_code, print_table, sort_rows, with_peer
    from reports.site import write_commit_page
    from workers.core.records import Result

    digest = {"sha256": "ab" * 32, "shape": [256], "dtype": "float32", "sample": [0.0] * 8}
    rows = sort_rows(with_peer([dataclasses.asdict(Result(
        variant="moves", op="moves", backend="python", shape="N=256", dtype="fp32", device="cpu:x", status="unchecked",
        median_s=1e-5, ci_low_s=1e-5, ci_high_s=1e-5, samples_s=(1e-5,), bytes_moved=2048.0,
        correctness={"checks": [], "output": digest}))]))
    html = write_commit_page(tmp_path, {"sha": "c" * 40, "subject": "s", "author": "a", "authored_at": "2026"},
                             rows).read_text()
    assert '<td class="status-unchecked">unchecked</td>' in html and "205 MB/s" in html  # measured
    assert f"output sha256 {'ab' * 32}" in html
    out = io.StringIO()
    print_table(rows, Console(file=out, width=200), "run")
    assert "unchecked" in out.getvalue() and "no reference; output sha256 abababababab" in out.getvalue()
    assert exit_code(rows) == 0
