"""`/.flopwatch/` in the repository's `.gitignore`: flopwatch keeps its results, build cache and
checkouts there, and an untracked folder would show in every `git status` of the user's
checkout (the run itself leaves that folder out when it tells a clean checkout from a dirty
one). Added once, the file created if missing and its content kept."""

from __future__ import annotations

from pathlib import Path

from pipeline.onboarding.write.inside import within

LINE = "/.flopwatch/"
# The lines of a .gitignore at the repository's root that already ignore the folder.
_SAME = {"/.flopwatch/", "/.flopwatch", ".flopwatch/", ".flopwatch", "/.flopwatch/*", ".flopwatch/*"}


def ignore_own_folder(root: Path) -> str:
    """Add LINE to `root`'s .gitignore unless a line there ignores the folder already; returns
    what was done, in words ("" when nothing was). OutsideRepository where .gitignore is a link
    leading out of the repository."""
    path = within(root, ".gitignore")
    existed = path.exists()
    data = path.read_bytes() if existed else b""
    if any(line.strip() in _SAME for line in data.decode(errors="replace").splitlines()):
        return ""
    # appended as bytes: the file's own bytes (CRLF line ends, a missing last newline) stay as they are
    newline = b"\r\n" if b"\r\n" in data else b"\n"
    with open(path, "ab") as f:
        f.write((newline if data and not data.endswith(b"\n") else b"") + LINE.encode() + newline)
    return f".gitignore: {'+' if existed else 'created with'} {LINE} (flopwatch's results, build cache and checkouts)"
