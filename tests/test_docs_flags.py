"""The documentation keeps up with the command line: every option in `--help` of every command
is named by the docs of *that* command — a section or code line of the README or docs/ (its
subfolders included) about `flopwatch COMMAND`, a paragraph naming it, or a row of a table of
options several commands share that lists the command — and the README's measured figures name
the dated section of docs/benchmarks.md they come from."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pipeline.cli import parser

ROOT = Path(__file__).resolve().parent.parent
HEADING = re.compile(r"^(#{1,6}) (.*)$")
# The header of a table of options several commands share: | option(s) | commands | what |
SHARED_TABLE = re.compile(r"^\|\s*options?\s*\|\s*commands\s*\|")


def doc_texts(root: Path = ROOT) -> list[str]:
    return [p.read_text() for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]]


def options(p: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, str]]:
    """(command, long option) of every command and subcommand."""
    found = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += options(sub, f"{prefix} {name}".strip())
        found += [(prefix, o) for o in action.option_strings if o.startswith("--") and o != "--help"]
    return found


def command_docs(text: str, command: str) -> str:
    """What one markdown text says about `command`: a section whose heading names `flopwatch
    COMMAND` (up to the next heading of its level or above), a code line naming it with the
    indented lines that continue it, and a paragraph naming it (`flopwatch COMMAND` or
    `` `COMMAND``). Another command's docs do not count: `new --no-build` documents nothing of `run`."""
    name = re.compile(rf"(?:flopwatch {re.escape(command)}|`{re.escape(command)})(?![\w-])")
    lines, out, paragraph = text.splitlines(), [], []
    in_code, section = False, 0  # section: the heading level of a section about the command, 0 outside

    def end_paragraph():
        if any(name.search(line) for line in paragraph):
            out.extend(paragraph)
        paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        heading = None if in_code else HEADING.match(line)
        if line.lstrip().startswith("```") or heading or not line.strip():
            end_paragraph()
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif heading:
            level = len(heading.group(1))
            if section and level <= section:
                section = 0
            if not section and name.search(heading.group(2)):
                section = level
        elif section:
            out.append(line)
        elif in_code:
            if name.search(line):
                out.append(line)
                while i < len(lines) and lines[i].startswith(" ") and not lines[i].lstrip().startswith("```"):
                    out.append(lines[i])
                    i += 1
        elif line.strip():
            paragraph.append(line)
    end_paragraph()
    return "\n".join(out)


def shared_options(texts: list[str]) -> dict[str, set[str]]:
    """{option: commands} from the rows of every table of shared options."""
    shared: dict[str, set[str]] = {}
    for text in texts:
        in_table = False
        for line in text.splitlines():
            if SHARED_TABLE.match(line):
                in_table = True
            elif in_table and line.startswith("|"):
                cells = line.split("|")
                for option in re.findall(r"`(--[\w-]+)", cells[1]):
                    shared.setdefault(option, set()).update(re.findall(r"`([a-z][a-z ]*)`", cells[2]))
            else:
                in_table = False
    return shared


def undocumented(p: argparse.ArgumentParser, texts: list[str]) -> list[tuple[str, str]]:
    shared = shared_options(texts)
    missing = []
    for cmd, o in options(p):
        docs = "\n".join(command_docs(t, cmd) for t in texts) if cmd else "\n".join(texts)
        if cmd not in shared.get(o, ()) and not re.search(re.escape(o) + r"(?![\w-])", docs):
            missing.append((cmd, o))
    return missing


def test_every_option_of_every_command_is_documented():
    assert undocumented(parser(), doc_texts()) == []


def _with_option(command: str, option: str) -> argparse.ArgumentParser:
    p = parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices[command].add_argument(option, action="store_true")
    return p


def test_an_option_added_without_a_mention_is_found():
    assert undocumented(_with_option("run", "--frobnicate-kernels"), doc_texts()) == [("run", "--frobnicate-kernels")]


def test_an_option_only_another_command_documents_is_found():
    """`new` documents `--no-build`: that documents no `--no-build` of `run`."""
    assert undocumented(_with_option("run", "--no-build"), doc_texts()) == [("run", "--no-build")]


def test_a_shared_options_row_counts_only_for_the_commands_it_lists(tmp_path):
    """Tests review (2026-12-06): a row of a shared-options table counting for every command, not
    only those in its commands column, passed every test here."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "| option | commands | what |\n| --- | --- | --- |\n| `--zeta-shared` | `run`, `store export` | shared |\n")
    texts = doc_texts(tmp_path)
    p = _with_option("run", "--zeta-shared")
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["ls"].add_argument("--zeta-shared", action="store_true")
    missing = undocumented(p, texts)
    assert ("ls", "--zeta-shared") in missing and ("run", "--zeta-shared") not in missing


def test_a_command_section_code_line_paragraph_and_shared_row_count_and_subfolders_are_read(tmp_path):
    (tmp_path / "docs" / "deep").mkdir(parents=True)
    (tmp_path / "README.md").write_text(
        "flopwatch run --alpha\n\n```\nflopwatch run --beta X\n              [--gamma]\nflopwatch ls --delta\n```\n\n"
        "| option | commands | what |\n| --- | --- | --- |\n| `--zeta` | `run`, `store export` | shared |\n")
    (tmp_path / "docs" / "deep" / "x.md").write_text(
        "# X\n\n## `flopwatch run`\n\nsee --epsilon\n\n### detail\n\n--eta\n\n## Other\n\n--theta\n")
    texts = doc_texts(tmp_path)
    docs = "\n".join(command_docs(t, "run") for t in texts)
    for found in ("--alpha", "--beta", "--gamma", "--epsilon", "--eta"):
        assert found in docs, found
    assert "--delta" not in docs and "--theta" not in docs
    assert shared_options(texts) == {"--zeta": {"run", "store export"}}


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
    # Nor does any other sentence say every command does (docs review, 2026-12-06: README:308).
    flat = " ".join(text.split())
    assert not re.search(r"[Ee]very command ends with where", flat)
    later = re.findall(r"((?:`\w+`(?:, | and ))*`\w+`) end with where their driver's time went", flat)
    assert all(set(re.findall(r"`(\w+)`", names)) == printing for names in later) and later
