"""Help texts and docs state the defaults the code uses: each is checked against
pipeline/project/config.py, so changing a default without its text (or the reverse) fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline import cli
from pipeline.project import config

ROOT = Path(__file__).resolve().parent.parent


def help_of(command: str) -> str:
    sub = next(a for a in cli.parser()._actions if a.dest == "command")
    return " ".join(sub.choices[command].format_help().split())


@pytest.mark.parametrize("command, use", [("compare", "compare"), ("bisect", "history"), ("detect", "history"),
                                          ("nightly", "history")])
def test_threshold_help_lists_every_kinds_default(command, use):
    text = help_of(command)
    for kind, table in config.DEFAULT_THRESHOLDS.items():
        assert f"{kind} {table[use] * 100:g}%" in text, (command, kind)


@pytest.mark.parametrize("command", ["compare", "bisect"])
def test_budget_help_of_short_measurements(command):
    assert f"(default: {config.COMMAND_BUDGET_S[command]:g} s)" in help_of(command)


def test_budget_help_of_run_and_nightly():
    assert f"timing_budget_s, else {config.DEFAULT_BUDGET_S:g} s" in help_of("run")
    assert f"bisect probes: {config.COMMAND_BUDGET_S['bisect']:g} s" in help_of("nightly")


def test_pair_budget_and_timeout_help():
    assert f"(default {config.PAIR_BUDGET_S:g})" in help_of("compare")
    assert f"else {config.DEFAULT_TIMEOUT_S:g} s" in help_of("run")


def test_omitted_budget_reaches_the_jobs_as_documented():
    from pipeline.commands.common import run_options

    args = cli.parser().parse_args(["compare", "A", "B"])
    assert run_options(args, "compare").budget_s == config.COMMAND_BUDGET_S["compare"]
    args = cli.parser().parse_args(["run"])
    assert run_options(args, "run").budget_s is None  # then the project's timing_budget_s
    assert config.ProjectConfig().timing_budget_s == config.DEFAULT_BUDGET_S


def test_history_doc_table_matches_the_thresholds():
    text = (ROOT / "docs" / "history.md").read_text()
    for kind, table in config.DEFAULT_THRESHOLDS.items():
        row = re.search(rf"^\| `{kind}` \| ([\d.]+)% \| ([\d.]+)% \|", text, re.M)
        assert row, kind
        assert (float(row[1]), float(row[2])) == (table["compare"] * 100, table["history"] * 100), kind


def test_statistics_doc_states_the_history_defaults():
    text = " ".join((ROOT / "docs" / "statistics.md").read_text().split())
    assert config.describe_threshold_defaults("history") in text.replace(";", ",")


def test_a_command_line_reads_with_its_own_commands_parser_only():
    """`main` builds the parser of the command it is given (one module imported, not fourteen);
    the same options and defaults as the full parser's; an unknown name gets every command."""
    def choices(p):
        return set(next(a for a in p._actions if a.dest == "command").choices)

    assert choices(cli.parser("run")) == {"run"}
    assert choices(cli.parser("bogus")) == choices(cli.parser()) >= {"run", "compare", "ls", "nightly"}
    for argv in (["run", "--variant", "cuda_wmma", "--num-gpus", "2"], ["compare", "A", "B", "--threshold", "3%"]):
        own, full = vars(cli.parser(argv[0]).parse_args(argv)), vars(cli.parser().parse_args(argv))
        assert {k: v for k, v in own.items() if k != "handler"} == {k: v for k, v in full.items() if k != "handler"}


@pytest.mark.parametrize("typed, meant", [("rn", "run"), ("expotr", "export"), ("comapre", "compare"),
                                          ("doctr", "doctor"), ("frobnicate", None)])
def test_an_unknown_command_names_the_nearest_and_exits_2(capsys, typed, meant):
    """Docs review (2026-12-06): `flopwatch rn` got argparse's usage and "invalid choice"."""
    assert cli.main([typed]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"flopwatch: error: unknown command {typed!r}"), err
    if meant:
        assert f"; did you mean {meant!r}? (commands: run, ls," in err[-1], err
    else:
        assert "did you mean" not in err[-1] and "(commands: run, ls," in err[-1], err
