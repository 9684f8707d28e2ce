"""One `flopwatch run` over a repository of hostile variants next to a good one, as a user runs
it: each case ends in its status with a message naming what is wrong, and nothing else is lost
(the good variant is measured, every case has its row). Then `flopwatch compare` over the
daemon case, `flopwatch ls`, and the site and PR comment with HTML in every user string."""

from __future__ import annotations

import sqlite3
import uuid

import pytest

from hostile.hostile_repo import AUTHOR, SUBJECT, flopwatch, make_repo, run_json
from hostile.processes import survivors

pytestmark = pytest.mark.slow

CASE = "FLOPWATCH_HOSTILE_CASE"
MANIFEST_MISTAKES = {
    "bool_size": "kernels/gemm/bool_size/variant.toml: shapes[0][0]: expected an integer, got true (a boolean)",
    "negative_timeout": "kernels/gemm/negative_timeout/variant.toml: timeout_s: expected a number greater than 0, "
                        "got -5",
    "openmp_string": 'kernels/gemm/openmp_string/variant.toml: build.openmp: expected true or false, '
                     'got "false" (a string)',
    "misspelt_build_key": "kernels/gemm/misspelt_build_key/variant.toml: build.flgs: unknown key; "
                          "did you mean 'flags'?",
    "misspelt_binding_key": "kernels/gemm/misspelt_binding_key/variant.toml: binding.entyr: unknown key; "
                            "did you mean 'entry'?",
    "misspelt_tolerance_key": "kernels/gemm/misspelt_tolerance_key/variant.toml: tolerance.rtl: unknown key; "
                              "did you mean 'rtol'?",
    "bad_toml": "kernels/gemm/bad_toml/variant.toml: (syntax): not valid TOML",
}
HOSTILE = ("daemon", "huge_shape", "exits_zero", "floods_stdout", "html_in_errors", *MANIFEST_MISTAKES)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    make_repo(base / "repo", HOSTILE, broken=("modifies_inputs", "ignores_inputs"), symlink_out=True)
    mark = uuid.uuid4().hex
    code, summary, stderr = run_json(base / "repo", base / "results.db", "--no-report", env={CASE: mark})
    return base, code, summary, stderr, mark


def _rows(summary: dict, variant: str) -> list[dict]:
    return [r for r in summary["results"] if r["variant"] == variant]


def test_the_run_completes_with_every_case_recorded_and_the_good_variant_measured(suite):
    base, code, summary, stderr, _ = suite
    assert code == 1, stderr[-3000:]  # failures, reported as such: not a crash of flopwatch (2)
    names = {r["variant"] for r in summary["results"]}
    # peer.gemm: the repository declares no peer, so flopwatch's built-in one runs beside the cases
    assert names == {"cpp_naive", "symlink_out", "modifies_inputs", "ignores_inputs", "peer.gemm", *HOSTILE}
    (good,) = _rows(summary, "cpp_naive")
    assert good["status"] == "ok" and good["median_s"] > 0
    with sqlite3.connect(base / "results.db") as db:  # and all of it is in the store
        stored = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    assert stored == len(summary["results"])


@pytest.mark.parametrize("variant", sorted(MANIFEST_MISTAKES))
def test_a_manifest_mistake_is_invalid_naming_file_key_expected_type_and_value(suite, variant):
    (row,) = _rows(suite[2], variant)
    assert row["status"] == "invalid"
    assert row["diagnostic"].startswith(MANIFEST_MISTAKES[variant])


def test_a_kernel_daemon_is_killed_with_its_job_and_the_result_says_so(suite):
    _, _, summary, _, mark = suite
    (row,) = _rows(summary, "daemon")
    assert row["status"] == "ok"
    assert "left processes behind (1 killed)" in row["diagnostic"]
    assert survivors(CASE, mark, patience_s=30.0) == []  # nothing of the run, Ray's processes included


def test_a_shape_that_cannot_fit_is_invalid_before_running_with_both_figures(suite):
    (row,) = _rows(suite[2], "huge_shape")
    assert row["status"] == "invalid"
    # The gemm's own byte count (A and B read, C written as fp32) in fp32, and again with A and B
    # at 8 bytes an element for the fp64 reference: a lower bound of what the check holds.
    n = 10**6
    needed = (4 * 2 * n * n + 4 * n * n) + (8 * 2 * n * n + 4 * n * n)
    assert f"needs at least {needed / 2**40:.1f} TiB ({needed} bytes" in row["diagnostic"]
    assert "bytes) are host memory available; not run" in row["diagnostic"]
    assert row["median_s"] is None and not row["correctness"].get("checks")


def test_exit_zero_inside_a_kernel_is_crashed(suite):
    (row,) = _rows(suite[2], "exits_zero")
    assert row["status"] == "crashed" and "exited with code 0 before writing a result" in row["diagnostic"]


def test_a_100_mb_stdout_flood_is_survived(suite):
    (row,) = _rows(suite[2], "floods_stdout")
    assert row["status"] == "ok" and row["median_s"] > 0


def test_kernels_that_write_their_inputs_or_return_stale_output_are_incorrect(suite):
    (mod,) = _rows(suite[2], "modifies_inputs")
    (stale,) = _rows(suite[2], "ignores_inputs")
    assert mod["status"] == "incorrect" and "the kernel changed its inputs: A" in mod["diagnostic"]
    assert stale["status"] == "incorrect" and "output does not depend on this call's inputs" in stale["diagnostic"]


def test_a_symlink_out_of_the_tree_is_invalid_and_not_read(suite):
    (row,) = _rows(suite[2], "symlink_out")
    assert row["status"] == "invalid" and "not extracted from the commit" in row["diagnostic"]


def test_ls_lists_each_mistake_as_invalid_with_its_message(suite):
    base = suite[0]
    done = flopwatch("ls", "--repo", str(base / "repo"), "--json")
    assert done.returncode == 1
    import json

    rows = {r["name"]: r for r in json.loads(done.stdout)}
    for variant, message in MANIFEST_MISTAKES.items():
        assert rows[variant]["status"] == "invalid" and rows[variant]["error"].startswith(message)
    assert rows["cpp_naive"]["status"] == "ok"


def test_html_in_every_user_string_is_escaped_on_the_site_and_in_the_pr_comment(suite, tmp_path):
    base = suite[0]
    done = flopwatch("report", "--repo", str(base / "repo"), "--db", str(base / "results.db"),
                     "--site", str(tmp_path / "site"))
    assert done.returncode == 0, done.stderr[-2000:]
    pages = "".join(p.read_text() for p in (tmp_path / "site").glob("*.html"))
    assert "&lt;script&gt;alert(&#39;subject&#39;)&lt;/script&gt;" in pages
    assert "&lt;img src=x onerror=alert(&#39;compiler&#39;)&gt;" in pages  # the compile error
    assert "Mallory &#34; onmouseover=&#34;alert(&#39;author&#39;) &amp; co" in pages
    for raw in ("<script>alert(", "<img src=x", '" onmouseover="'):
        assert raw not in pages
    compare = flopwatch("compare", "HEAD~1", "HEAD", "--repo", str(base / "repo"), "--db", str(base / "compare.db"),
                        "--variant", "html_in_errors", "--no-report")
    assert compare.returncode in (0, 1), compare.stderr[-3000:]
    assert "<script>" not in compare.stdout and "<img" not in compare.stdout
    assert AUTHOR not in compare.stdout and SUBJECT not in compare.stdout


def test_compare_over_the_daemon_leaves_nothing_running(suite):
    base = suite[0]
    mark = uuid.uuid4().hex
    done = flopwatch("compare", "HEAD~1", "HEAD", "--repo", str(base / "repo"), "--db", str(base / "compare2.db"),
                     "--variant", "daemon", "--no-report", "--pair-budget", "0.2", "--all", env={CASE: mark})
    assert done.returncode in (0, 1), done.stderr[-3000:]
    # compare's rows of the daemon variant (--all: the commits differ in the README only),
    # each with its leftover killed; the variant's name alone in the output would prove nothing
    with sqlite3.connect(base / "compare2.db") as conn:
        notes = [d for (d,) in conn.execute("SELECT diagnostic FROM results WHERE variant = 'daemon'")]
    assert notes and all("left processes behind (1 killed)" in d for d in notes), notes
    assert survivors(CASE, mark, patience_s=30.0) == []
