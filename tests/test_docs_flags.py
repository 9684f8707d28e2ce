"""The documentation keeps up with the command line: every option in `--help` of every command
is mentioned in the README or docs/, and the README's measured figures name the dated section of
docs/benchmarks.md they come from."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pipeline.cli import parser

ROOT = Path(__file__).resolve().parent.parent


def documented_text(root: Path = ROOT) -> str:
    return "\n".join(p.read_text() for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))])


def options(p: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, str]]:
    """(command, long option) of every command and subcommand."""
    found = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += options(sub, f"{prefix} {name}".strip())
        found += [(prefix, o) for o in action.option_strings if o.startswith("--") and o != "--help"]
    return found


def undocumented(p: argparse.ArgumentParser, text: str) -> list[tuple[str, str]]:
    return [(cmd, o) for cmd, o in options(p) if not re.search(re.escape(o) + r"(?![\w-])", text)]


def test_every_option_of_every_command_is_documented():
    assert undocumented(parser(), documented_text()) == []


def test_an_option_added_without_a_mention_is_found():
    p = parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["run"].add_argument("--frobnicate-kernels", action="store_true")
    assert undocumented(p, documented_text()) == [("run", "--frobnicate-kernels")]


def _citations(readme: str) -> list[str]:
    flat = " ".join(readme.split())
    return re.findall(r'docs/benchmarks\.md, "([^"]+)"', flat)


def test_the_readmes_figures_name_their_dated_section():
    readme = (ROOT / "README.md").read_text()
    headings = {" ".join(h.split()) for h in re.findall(r"^## (.+)$", (ROOT / "docs/benchmarks.md").read_text(),
                                                        re.MULTILINE)}
    cited = _citations(readme)
    assert cited and all(c in headings for c in cited), (cited, headings)
    # every paragraph that gives a GPU figure cites its section
    for paragraph in re.split(r"\n\s*\n", readme):
        if re.search(r"on (an|one) H[12]00\b", paragraph) and re.search(r"\d+(\.\d+)? s\b", paragraph):
            assert _citations(paragraph), paragraph[:200]
    assert _citations('see docs/benchmarks.md, "A section"') == ["A section"]


def test_the_readme_names_exactly_the_commands_that_end_with_where_their_time_went():
    """README once said every command ends with the line; only two did. The commands it names
    are those whose module prints `driver_clock.line`."""
    text = (ROOT / "README.md").read_text()
    sentence = re.search(r"\)\. ((?:`\w+`(?:, | and ))*`\w+`) end with where their own time went", text)
    assert sentence, "README no longer says which commands end with where their time went"
    named = set(re.findall(r"`(\w+)`", sentence.group(1)))
    printing = {p.stem for p in (ROOT / "pipeline" / "commands").glob("*.py") if "driver_clock.line(" in p.read_text()}
    assert named == printing
