"""Everything the benchmarked repository controls is untrusted: each place its text goes
(terminal, markdown comment, HTML, SQLite, file system, workflow scripts) escapes, bounds or
refuses it. Each test here feeds one hostile string to one sink."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import git
import pytest
from rich.console import Console
from suite_repo import init_repo

from pipeline.history import compare as cmp
from pipeline.project import checkout
from pipeline.project.config import ProjectConfig, load_config
from pipeline.project.manifest import ManifestError, load_variant
from pipeline.run import summary
from pipeline.store import TEXT_LIMITS, Store
from workers.core import untrusted
from workers.core.records import Result
from workers.toolkit.bundle import pack

ROOT = Path(__file__).resolve().parents[1]
ESCAPES = "\x1b[2J\x1b[31mred\x1b[0m \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ \x1b]0;title\x07 \x9b2J"
HOSTILE_MD = ("[click](https://evil.example) ![x](https://evil.example/p.png) @octocat <img src=x onerror=alert(1)> "
              "| cell | www.evil.example `code` **bold**\nsecond line")


def test_terminal_text_has_no_escape_sequences_or_controls():
    text = untrusted.terminal("ok " + ESCAPES + "\u202eevil\x00\x07 end\nnext")
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text and "\x00" not in text
    assert "\u202e" not in text
    assert text.startswith("ok ") and "red" in text and "click" in text and text.endswith("end\nnext")
    assert "\n" not in untrusted.one_line("a\nb\tc") and untrusted.one_line("a\nb") == "a b"


def test_markdown_cell_is_inert():
    cell = untrusted.markdown(HOSTILE_MD)
    assert "\n" not in cell and "<" not in cell and ">" not in cell
    assert not re.search(r"(?<!\\)[\[\]]", cell)  # every bracket escaped: no link, no image
    assert "@octocat" not in cell and "@\u2060octocat" in cell  # no mention
    assert "https://" not in cell and "www.evil" not in cell  # no autolink
    assert "| cell |" not in cell and "\\|" in cell  # no cell break
    assert "`code`" not in cell and "\\`code\\`" in cell


def _side(seconds: float, diagnostic: str = "", status: str = "ok") -> cmp.Side:
    samples = tuple(seconds * (1 + 0.001 * i) for i in range(20)) if status == "ok" else ()
    return cmp.Side(status, samples, flops=1e9, diagnostic=diagnostic)


def test_pr_comment_carries_no_injected_markup():
    key = (HOSTILE_MD, "M=8,N=8,K=8", "fp32", "cpu:" + HOSTILE_MD)
    broken = ("other", "M=8,N=8,K=8", "fp32", "cpu:x")
    rows = cmp.compare_sides({key: _side(1e-3), broken: _side(1e-3)},
                             {key: _side(1e-3), broken: _side(0, HOSTILE_MD + ESCAPES, "crashed")}, 0.03)
    report = cmp.Report("a" * 40, HOSTILE_MD + ESCAPES, "b" * 40, "@octocat fix #1 " + HOSTILE_MD, 0.03, 1,
                        tuple(rows))
    text = cmp.render_markdown(report)
    lines = text.splitlines()
    table = [line for line in lines if line.startswith("| ")]
    assert len(table) == 3  # header and two series: no row broken or added by a newline or a pipe
    assert all(len(re.split(r"(?<!\\)\|", line)) == 12 for line in table)  # ten cells, none split
    assert not re.search(r"(?<!\\)\]\(", text) and "![" not in text  # no link, no image
    for bad in ("<img", "@octocat", "https://", "\x1b"):
        assert bad not in text, bad


# The workflows review's status (2026-12-06): written by a kernel into its job's result.json.
HOSTILE_STATUS = ("crashed | [approved](https://evil.example) @octo-org/maintainers ![x](https://evil.example/x.png)"
                  "\n\n## \u2705 flopwatch: no regressions")


def test_a_status_outside_the_known_set_from_the_job_child_becomes_crashed():
    from workers.core.records import BuildResult
    from workers.isolation.sandbox import ChildOutcome
    from workers.job import runner

    base = dict(variant="v", op="gemm", backend="cpp", shape="M=8,N=8,K=8", dtype="fp32", device="cpu:x")
    outcome = ChildOutcome(0, "", False, 0.1, "", "")
    build = BuildResult("v", "h", True, "g++")
    timing = {"median_s": 1e-3, "ci_low_s": 1e-3, "ci_high_s": 1e-3}
    for written in (HOSTILE_STATUS, "OK", None, ["ok"]):
        data = {"status": written, "timing": timing, "samples_s": [1e-3]}
        result = runner.classify(dict(base), data, outcome, 10.0, None, build, 0)
        assert result.status == "crashed" and result.median_s is None, written
        assert result.diagnostic.startswith("the job wrote a status flopwatch does not know"), result.diagnostic
    known = runner.classify(dict(base), {"status": "ok", "timing": timing, "samples_s": [1e-3]}, outcome, 10.0,
                            None, build, 0)
    assert known.status == "ok" and known.median_s == 1e-3


def test_every_cell_of_the_pr_comment_is_escaped_a_hostile_status_included():
    """A status stored before the runner kept statuses to the known set, or by other code, still
    reaches the comment inert: no live link, image, team mention, or heading after the table."""
    key = ("v", "M=8,N=8,K=8", "fp32", "cpu:x")
    points = {(f"fam[BLOCK={b}]", "M=8,N=8,K=8", "fp32", "cpu:x") for b in (16, 32)}
    base = {key: _side(1e-3), **{p: _side(1e-3) for p in points}}
    head = {key: _side(0, "boom", HOSTILE_STATUS), **{p: _side(0, "boom", HOSTILE_STATUS) for p in points}}
    rows = cmp.compare_sides(base, head, 0.03)
    text = cmp.render_markdown(cmp.Report("a" * 40, "s", "b" * 40, "s", 0.03, 1, tuple(rows)))
    lines = text.splitlines()
    table = [line for line in lines if line.startswith("| ")]
    assert len(table) == 3, text  # header, the family's line, the plain variant: nothing split or added
    assert all(len(re.split(r"(?<!\\)\|", line)) == 12 for line in table), text
    assert [line for line in lines if line.startswith("#")] == [lines[0]], text  # no second heading
    assert not re.search(r"(?<!\\)\]\(", text) and "![" not in text, text  # no link, no image
    assert "@octo-org" not in text and "https://" not in text, text


def test_terminal_table_renders_names_as_text_not_markup():
    row = {"variant": "[link=https://evil.example]v[/link]" + ESCAPES, "op": "gemm", "shape": "M=8,N=8,K=8",
           "dtype": "fp32", "device": "cpu:x", "status": "crashed", "diagnostic": "[bold]boom[/bold]" + ESCAPES,
           "median_s": None, "flops": 1.0, "peer": False, "correctness": {}}
    out = io.StringIO()
    summary.print_table([row], Console(file=out, force_terminal=True, width=400, color_system="truecolor"),
                        "results " + ESCAPES)
    text = out.getvalue()
    assert "[link=https://evil.example]v[/link]" in text and "[bold]boom[/bold]" in text
    assert "\x1b]8;" not in text and "\x1b[2J" not in text and "\x1b]0;" not in text


@pytest.mark.parametrize("name", ["../escape", "a/b", "<script>", "x\x1b[2J", "", "é", "a" * 65, "-flag"])
def test_manifest_refuses_names_that_are_not_plain(tmp_path, name):
    folder = tmp_path / "kernels" / "gemm" / "v"
    folder.mkdir(parents=True)
    (folder / "k.cpp").write_text("// kernel\n")
    (folder / "variant.toml").write_text(
        f'name = {json.dumps(name)}\nop = "gemm"\nbackend = "cpp"\nsources = ["k.cpp"]\n'
        'dtypes = ["fp32"]\nshapes = [[8, 8, 8]]\n[binding]\nkind = "c"\nentry = "gemm"\n')
    with pytest.raises(ManifestError) as err:
        load_variant(tmp_path, folder / "variant.toml", ProjectConfig())
    assert "name" in str(err.value) and "\x1b" not in str(err.value)


@pytest.mark.parametrize("entry,ok", [("${THUNDERKITTENS_ROOT}/include", True), ("${CUTLASS_DIR}", True),
                                      ("/home/runner/.ssh", False), ("${HOME}/.ssh", False),
                                      ("${THUNDERKITTENS_ROOT}/../../etc", False), ("include", False),
                                      ("$HIPKITTENS_ROOT/include", True), ("$HOME/.ssh", False)])
def test_node_include_folders_go_through_a_root_variable(tmp_path, entry, ok):
    folder = tmp_path / "kernels" / "gemm" / "v"
    folder.mkdir(parents=True)
    (folder / "k.cpp").write_text("// kernel\n")
    (folder / "variant.toml").write_text(
        'name = "v"\nop = "gemm"\nbackend = "cpp"\nsources = ["k.cpp"]\ndtypes = ["fp32"]\nshapes = [[8, 8, 8]]\n'
        f'[binding]\nkind = "c"\nentry = "gemm"\n[build]\ninclude_dirs = ["{entry}"]\n')
    if ok:
        assert load_variant(tmp_path, folder / "variant.toml", ProjectConfig()).include_dirs == (entry,)
    else:
        with pytest.raises(ManifestError, match="include_dirs"):
            load_variant(tmp_path, folder / "variant.toml", ProjectConfig())


def test_pack_ships_no_file_from_outside_the_repository(tmp_path):
    outside = tmp_path / "secret"
    outside.write_text("private key")
    repo = tmp_path / "repo"
    folder = repo / "kernels" / "v"
    folder.mkdir(parents=True)
    (folder / "k.cpp").write_text("// kernel\n")
    (folder / "shared.h").symlink_to(repo / "kernels" / "v" / "k.cpp")  # inside: fine
    (folder / "leak.h").symlink_to(outside)
    (folder / "up").symlink_to(tmp_path, target_is_directory=True)
    files = pack(repo, ["kernels/v"])
    assert set(files) == {"kernels/v/k.cpp", "kernels/v/shared.h"}
    assert b"private key" not in b"".join(files.values())


def _repo_with_symlink(path: Path, target: str) -> git.Repo:
    folder = path / "kernels" / "gemm" / "v"
    folder.mkdir(parents=True)
    (folder / "variant.toml").write_text(
        'name = "v"\nop = "gemm"\nbackend = "cpp"\nsources = ["k.cpp"]\ndtypes = ["fp32"]\nshapes = [[8, 8, 8]]\n'
        '[binding]\nkind = "c"\nentry = "gemm"\n')
    os.symlink(target, folder / "k.cpp")
    repo = init_repo(path, "Dev")
    repo.git.add(A=True)
    repo.index.commit("a symlink out of the tree")
    return repo


@pytest.mark.parametrize("target", ["/etc/hostname", "../../../../../etc/hostname"])
def test_a_committed_symlink_out_of_the_tree_is_not_extracted(tmp_path, target):
    repo = _repo_with_symlink(tmp_path / "repo", target)
    root, _ = checkout.materialise(repo, "HEAD", tmp_path / "cache")
    source = root / "kernels" / "gemm" / "v" / "k.cpp"
    assert not source.exists() and not source.is_symlink()
    assert "kernels/gemm/v/k.cpp" in checkout.refused_members(root)
    with pytest.raises(ManifestError, match="not extracted from the commit"):
        load_variant(root, root / "kernels" / "gemm" / "v" / "variant.toml", load_config(root))


@pytest.mark.parametrize("rev", ["--output=/tmp/x", "-h", "", "main\nrm -rf /"])
def test_a_revision_that_looks_like_an_option_is_refused(tmp_path, rev):
    repo = _repo_with_symlink(tmp_path / "repo", "k2.cpp")
    with pytest.raises(checkout.CheckoutError, match="not a revision"):
        checkout.commit_info(repo, rev)


def test_store_keeps_hostile_text_verbatim_but_bounded(tmp_path):
    subject = "x'); DROP TABLE results; -- " + "s" * 5000
    with Store(tmp_path / "r.db") as store:
        store.record_commit("c" * 40, subject, "a" * 1000, "2026-01-01", [])
        run = store.start_run("c" * 40, False, "run", "repo", "host", "run")
        flood = "y" * 1_000_000
        store.record_result(run, "c" * 40, False, Result("v", "gemm", "cpp", "M=8", "fp32", "cpu", "crashed",
                                                          diagnostic=flood, stderr_tail=flood))
        stored = store.commit("c" * 40)
        [row] = store.results()
    assert stored["subject"].startswith("x'); DROP TABLE results; -- ")
    assert len(stored["subject"]) <= TEXT_LIMITS["subject"] and len(stored["author"]) <= TEXT_LIMITS["author"]
    assert len(row["diagnostic"]) <= TEXT_LIMITS["diagnostic"] and "more characters" in row["diagnostic"]
    assert len(row["stderr_tail"]) <= TEXT_LIMITS["stderr_tail"]


def test_site_escapes_subjects_and_diagnostics(tmp_path):
    from pipeline.commands.publish import write_site

    with Store(tmp_path / "r.db") as store:
        store.record_commit("d" * 40, "<script>alert(1)</script>", "<b>a</b>", "2026-01-01", [])
        run = store.start_run("d" * 40, False, "run", "repo", "host", "run")
        store.record_result(run, "d" * 40, False, Result("v", "gemm", "cpp", "M=8,N=8,K=8", "fp32", "cpu:x",
                                                         "crashed", diagnostic="<img src=x onerror=alert(2)>"))
        index = write_site(store, tmp_path / "site")
        pages = "".join(p.read_text() for p in (tmp_path / "site").glob("*.html"))
    assert "<script>alert(1)" not in pages and "&lt;script&gt;alert(1)" in pages
    assert "<img src=x" not in pages and index.exists()
