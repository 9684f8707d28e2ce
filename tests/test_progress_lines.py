"""Progress where no terminal watches: a run writing to a file or a CI log, or with --json,
gives one line per finished job on stderr as it happens (a bar there printed nothing until the
end, and --json printed nothing at all: a 7-minute run on a GPU node looked hung)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from pipeline.run.progress import Progress


def test_plain_progress_prints_a_line_per_step_with_its_count(capsys):
    with Progress(enabled=True, plain=True).task("build + run abc", 3) as advance:
        advance("gemm_naive M=64 ok")
        advance("gemm_tiled M=64 crashed")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("build + run abc [1/3] gemm_naive M=64 ok (")
    assert err[1].startswith("build + run abc [2/3] gemm_tiled M=64 crashed (")


def test_a_file_gets_lines_and_a_disabled_progress_nothing(tmp_path):
    code = textwrap.dedent("""
        from pipeline.run.progress import Progress
        with Progress().task("run", 2) as advance:
            advance("one")
            advance("two")
        with Progress(enabled=False).task("quiet", 2) as advance:
            advance("three")
    """)
    log = tmp_path / "stderr.txt"
    with log.open("w") as f:
        subprocess.run([sys.executable, "-c", code], stderr=f, check=True)
    lines = log.read_text().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["run [1/2] one", "run [2/2] two"]


def test_the_progress_text_is_one_line_of_plain_text(capsys):
    with Progress(enabled=True, plain=True).task("run", 1) as advance:
        advance("evil\x1b[2J status\nsecond line")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err
