"""Check points apart from timed points (issue 47, item 1) and a variant's sizes as an axis
(item 2), without running a kernel:

- `[[check]]` sets: read into check points with their own tolerance, mistakes named by key as
  every manifest mistake is; the published JSON Schema knows them;
- what a job's result says of them (`workers.job.check_points.record`), in the run table and
  on the commit page;
- several timed sizes of a variant: the commit page's size table, compare's verdict per size,
  `--points best` keeping every size of the best point.

The runs through the harness are in tests/test_challenge_run.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.project.config import ProjectConfig
from pipeline.project.manifest import ManifestError, load_variant

ADD = """name = "v"
op = "elementwise_add"
backend = "python"
dtypes = ["fp32"]
shapes = [[8192]]

[binding]
kind = "python"
entry = "k.py:add"
returns = true
"""


def _variant(tmp_path: Path, extra: str, config: ProjectConfig | None = None):
    folder = tmp_path / "kernels" / "add" / "v"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.py").write_text("def add(A, B):\n    return A + B\n")
    (folder / "variant.toml").write_text(ADD + extra)
    return load_variant(tmp_path, folder / "variant.toml", config or ProjectConfig())


def test_check_sets_become_check_points_with_their_own_tolerance(tmp_path):
    config = ProjectConfig(shape_sets={"tiny": [[4], [8]]})
    v = _variant(tmp_path, "\n[[check]]\nshapes = [[32], {N = 64}]\nrtol = 1e-5\n\n[[check]]\nshapes = \"tiny\"\n",
                 config)
    assert v.check_points == (
        {"dims": {"N": 32}, "rtol": 1e-5, "atol": None, "where": "check[0].shapes[0]"},
        {"dims": {"N": 64}, "rtol": 1e-5, "atol": None, "where": "check[0].shapes[1]"},
        {"dims": {"N": 4}, "rtol": None, "atol": None, "where": "check[1].shapes[0]"},
        {"dims": {"N": 8}, "rtol": None, "atol": None, "where": "check[1].shapes[1]"})
    assert [s.key for s in v.shapes] == ["N=8192"]  # the timed points stay the shapes
    assert _variant(tmp_path / "plain", "").check_points == ()


@pytest.mark.parametrize("extra, words", [
    ("[[check]]\nshapes = [[32, 2]]\n", "check[0].shapes[0]: [32, 2] is not a elementwise_add shape: expected 1 sizes"),
    ("[[check]]\nshapes = [[32]]\nrtl = 1e-3\n", "check[0].rtl: unknown key; did you mean 'rtol'?"),
    ("[[check]]\nshapes = [[32]]\natol = -1\n", "check[0].atol: expected a number of at least 0, got -1"),
    ("[[check]]\nshapes = [[32]]\n[[check]]\nshapes = [[16], [32]]\n",
     "check[1].shapes[1]: 32 is also check[0].shapes[0]: a check point is given once"),
    ("[[check]]\nshapes = \"nope\"\n", "check[0].shapes: unknown shape set 'nope'"),
    ("[[check]]\nrtol = 1e-3\n", "check[0].shapes: missing"),
    ("[check]\nshapes = [[32]]\n", "check: expected a list, got a table"),
])
def test_check_set_mistakes_name_the_key(tmp_path, extra, words):
    with pytest.raises(ManifestError) as err:
        _variant(tmp_path, "\n" + extra)
    assert f"kernels/add/v/variant.toml: {words}" in str(err.value), str(err.value)


def test_a_variant_without_a_reference_has_no_check_points(tmp_path):
    folder = tmp_path / "kernels" / "mine"
    folder.mkdir(parents=True)
    (folder / "k.py").write_text("def f(x):\n    return x\n")
    (folder / "variant.toml").write_text(
        'name = "mine"\nop = "mine"\nbackend = "python"\ndtypes = ["fp32"]\n\n[binding]\nkind = "python"\n'
        'entry = "k.py:f"\n\n[reference]\ncheck = "none"\nsizes = { N = 8 }\ninputs = [{ name = "x", shape = ["N"] }]\n'
        '\n[[check]]\nshapes = [[4]]\n')
    with pytest.raises(ManifestError, match=r'check: \[reference\] check = "none": there is nothing to check'):
        load_variant(tmp_path, folder / "variant.toml", ProjectConfig())


def test_the_published_schema_knows_check_sets():
    import jsonschema

    from pipeline.project.schema import json_schema

    schema = json_schema("variant")
    base = {"name": "v", "op": "gemm", "backend": "cpp", "dtypes": ["fp32"], "binding": {"kind": "c", "entry": "g"}}
    jsonschema.validate({**base, "check": [{"shapes": [[4, 8, 8]], "rtol": 1e-5}]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**base, "check": [{"shapes": [[4, 8, 8]], "rtol": "tight"}]}, schema)


# -- what a result says of them ----------------------------------------------------------------------

def _verdict(shape: str, passed: bool, where: str) -> dict:
    return {"shape": shape, "where": where, "label": f"{shape} ({where})", "seed": 7, "passed": passed,
            **({} if passed else {"finding": "3 of 4 tiles wrong", "tile_map": [[0.0, 2.0]], "tile": 64})}


def test_a_failed_check_point_makes_the_row_incorrect_naming_the_shape():
    from workers.job import check_points

    verdicts = [_verdict("N=32", True, "check[0].shapes[0]"), _verdict("N=64", False, "check[0].shapes[1]"),
                _verdict("N=4", False, "check[1].shapes[0]")]
    here = check_points.record({"checks": []}, "N=8192", verdicts, "N=8192")
    assert here["status"] == "incorrect"
    assert here["diagnostic"] == ("check point N=64 (check[0].shapes[1]): seed 7: 3 of 4 tiles wrong (and 1 more of "
                                  "3 check points)")
    assert here["check_points"]["here"] and [p["passed"] for p in here["check_points"]["points"]] == [True, False, False]
    assert "tile_map" not in here["check_points"]["points"][1]  # kept once, as the row's tile map
    assert here["check_point_tiles"] == {"tile_map": [[0.0, 2.0]], "tile": 64}
    other = check_points.record({"checks": []}, "N=8192", verdicts, "N=16384")
    assert other["diagnostic"].startswith("check point N=64 (check[0].shapes[1]), checked in the job at N=8192: seed 7")
    ok = check_points.record({"checks": [], "status": "ok"}, "N=8192", verdicts[:1], "N=8192")
    assert ok["status"] == "ok" and "diagnostic" not in ok


def test_the_run_table_and_the_commit_page_show_check_points_and_sizes(tmp_path):
    from pipeline.run.summary import check_points_text
    from reports.site import write_commit_page

    points = {"ran_in": "N=8192", "here": True, "points": [
        {"shape": "N=32", "passed": True}, {"shape": "N=64", "passed": True}]}
    row = {"variant": "v", "op": "elementwise_add", "backend": "python", "shape": "N=8192", "dtype": "fp32",
           "device": "cpu:x", "status": "ok", "median_s": 1e-5, "ci_low_s": 1e-5, "ci_high_s": 1e-5,
           "flops": 0.0, "bytes_moved": 98304.0, "peer": False, "diagnostic": "", "resources": {}, "counters": {},
           "correctness": {"rel_fro_err": 0.0, "check_points": points}}
    assert check_points_text(row) == "checked at 2 more shape(s): 32, 64"
    bigger = {**row, "shape": "N=16384", "bytes_moved": 196608.0}
    page = write_commit_page(tmp_path, {"sha": "a" * 40, "subject": "s", "author": "a", "authored_at": "2026"},
                             [row, bigger]).read_text()
    assert "2 of 2 check points ok: 32, 64" in page
    # the variant's two sizes as one row of the op's size table
    sizes = page[page.index('<h2 id="sizes">'):]
    assert '<th class="axes-corner">N →</th><th>8192</th><th>16384</th>' in sizes and "<tr><th>v</th>" in sizes


# -- sizes as an axis --------------------------------------------------------------------------------

def _row(variant: str, shape: str, seconds: float | None, status: str = "ok", peer: bool = False, op: str = "add"):
    n = int(shape.split("=")[1])
    return {"variant": variant, "op": op, "shape": shape, "dtype": "fp32", "device": "cpu:x", "status": status,
            "median_s": seconds, "flops": 0.0, "bytes_moved": 12.0 * n, "peer": peer}


def test_the_size_table_lays_out_each_variant_over_its_sizes():
    from reports import sizes

    rows = [_row("fast", "N=65536", 1e-5), _row("fast", "N=1024", 1e-6), _row("slow", "N=1024", 2e-6),
            _row("slow", "N=65536", None, "incorrect"), _row("peer.add", "N=1024", 1e-6, peer=True),
            _row("peer.add", "N=65536", 2e-5, peer=True),
            _row("k[B=1]", "N=1024", 4e-6), _row("k[B=2]", "N=1024", 3e-6), _row("k[B=1]", "N=65536", 1e-5),
            _row("one", "N=8", 1e-6, op="other")]  # an op timed at one size: no table
    (t,) = sizes.tables(rows)
    assert (t.op, t.sizes, t.axis) == ("add", ("N=1024", "N=65536"), "N")  # smallest first
    assert t.labels == ("peer.add", "fast", "k", "slow") and t.peers == (True, False, False, False)
    cells = dict(zip(t.labels, t.cells))
    assert cells["fast"][1].best and not cells["peer.add"][1].best  # the fastest at each size is marked
    assert cells["k"][0].point == "B=2" and cells["k"][0].text == "4.1"  # a swept family: its best point there
    assert cells["slow"][1].text == "incorrect" and cells["slow"][1].rate is None
    assert cells["peer.add"][0].best and cells["fast"][0].best  # a tie: both are the fastest


def test_compare_gives_each_size_its_own_verdict():
    """A size is a measurement, not an alternative: a plain variant's sizes keep a row each in
    the PR comment (a swept family's points at one size are summed up, as before)."""
    import numpy as np

    from pipeline.history import compare as cmp

    def row(variant, shape, seconds, seed):
        rng = np.random.default_rng(seed)
        return {"variant": variant, "shape": shape, "dtype": "fp32", "device": "cpu:test", "status": "ok",
                "samples": list(seconds * (1 + 0.005 * rng.standard_normal(30))), "flops": 2e9, "resources": {},
                "counters": {}, "diagnostic": ""}

    base = [row("v", "N=1024", 1e-3, 1), row("v", "N=65536", 1e-2, 2)]
    head = [row("v", "N=1024", 1e-3, 3), row("v", "N=65536", 1.3e-2, 4)]
    rows = cmp.compare_sides(cmp.pool(base), cmp.pool(head), 0.03)
    grouped = cmp.group_points(rows)
    assert sorted((r.shape, r.kind) for r in grouped) == [("N=1024", "same"), ("N=65536", "slower")]


def test_points_best_keeps_every_size_of_the_best_point():
    from pipeline.run.runflow import _best_points_only
    from workers.core.records import Binding, Job, Shape, Variant

    def variant(name, params):
        return Variant(name=name, op="add", backend="python", folder="k", sources=(), binding=Binding("python", "k.py:f"),
                       dtypes=("fp32",), shapes=(), params=params)

    swept = [variant("k[B=1]", {"B": 1}), variant("k[B=2]", {"B": 2})]
    plain = variant("plain", {})
    jobs = [Job(v.name, "add", Shape({"N": n}), "fp32", "cpu") for v in [*swept, plain] for n in (1024, 65536)]
    stored = [{"variant": "k[B=1]", "shape": "N=1024", "dtype": "fp32", "device": "cpu", "status": "ok", "median_s": 2.0},
              {"variant": "k[B=1]", "shape": "N=65536", "dtype": "fp32", "device": "cpu", "status": "ok", "median_s": 9.0},
              {"variant": "k[B=2]", "shape": "N=1024", "dtype": "fp32", "device": "cpu", "status": "ok", "median_s": 1.0},
              {"variant": "k[B=2]", "shape": "N=65536", "dtype": "fp32", "device": "cpu", "status": "ok",
               "median_s": 10.0}]

    class Store:
        def newest_per_series(self, columns):
            return stored

    class Session:
        store = Store()

    kept = _best_points_only(Session(), [*swept, plain], jobs)
    assert sorted((j.variant, j.shape.key) for j in kept) == [
        ("k[B=2]", "N=1024"), ("k[B=2]", "N=65536"), ("plain", "N=1024"), ("plain", "N=65536")]
