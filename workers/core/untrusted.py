"""Text from the repository under test, made safe for where it goes.

Everything a benchmarked repository controls is untrusted — in a pull request, it comes from a
stranger: commit subjects and authors, branch and folder names, variant names and descriptions,
compiler output, whatever a kernel prints. flopwatch passes it on to a terminal, to a markdown
PR comment and job summary, to HTML pages, to SQLite and to file names. HTML is escaped by the
templates' autoescaping and SQL by bound parameters; this module holds the rest, one function
per destination:

- `terminal`: no escape sequences (colours, cursor moves, OSC 8 links, title changes, a
  "clear screen" that hides the lines above) and no other control characters;
- `markdown`: one line of inert text inside a GitHub table cell: no HTML, no links or images,
  no autolinked URLs, no @-mentions (which notify people), no cell breaks;
- `bounded`: a length cap with the number of characters left out, for anything stored or shown
  that a kernel or compiler can make arbitrarily long;
- `check_name`: the characters a variant name may have (it becomes part of file names and
  table cells), refused with a message otherwise.

Workers sit on the lowest floor, so the driver and the reports may both import this.
"""

from __future__ import annotations

import re

# ESC-introduced sequences: CSI (ESC [ ... final byte), OSC/DCS/APC/PM/SOS strings (ESC ] ...
# up to BEL or ESC \), and two-character escapes (ESC followed by one byte).
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
# C0 controls except tab and newline, DEL, and the C1 range (8-bit CSI is 0x9b).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Unicode direction overrides can make a name read differently from what it is (Trojan Source).
_BIDI = re.compile(r"[\u202a-\u202e\u2066-\u2069\u200e\u200f]")
_WORD_JOINER = "\u2060"  # invisible, and breaks what GitHub would match across it
# Escaped: what can make a link or an image ([ ]), a code span (`), a cell break (|), and the
# backslash itself. Emphasis characters (* _ ~) are left alone: at worst they restyle the cell,
# and names like cuda_register_blocked stay readable in the raw comment.
_MD_PUNCT = re.compile(r"([\\`\[\]|])")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")


def terminal(text: object) -> str:
    """`text` without escape sequences or control characters (newlines and tabs stay)."""
    text = _ESCAPES.sub("", str(text))
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _BIDI.sub("", _CONTROLS.sub("", text))


def one_line(text: object) -> str:
    """`terminal` on one line: newlines and tabs become spaces."""
    return re.sub(r"[\n\t]+", " ", terminal(text))


def markdown(text: object) -> str:
    """`text` as inert markdown inside one table cell of a GitHub comment."""
    text = one_line(text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_PUNCT.sub(r"\\\1", text)
    text = text.replace("@", "@" + _WORD_JOINER)  # @user, @org/team: no notification
    text = re.sub(r"(?i)([a-z][a-z0-9+.-]*):(?=//)", r"\1:" + _WORD_JOINER, text)  # https://… not autolinked
    return re.sub(r"(?i)\bwww\.", "www" + _WORD_JOINER + ".", text)


def bounded(text: object, limit: int) -> str:
    """At most `limit` characters of `text`, saying how many were left out."""
    text = str(text)
    if len(text) <= limit:
        return text
    note = f" … [{len(text) - limit} more characters]"
    return text[: max(0, limit - len(note))] + note


def check_name(name: str) -> str | None:
    """None when `name` may name a variant, else why not."""
    if NAME.fullmatch(name or ""):
        return None
    return (f"{one_line(name)[:80]!r} is not a valid name: 1 to 64 characters, letters, digits and _ . + -, "
            "starting with a letter or digit (names become file names and table cells)")
