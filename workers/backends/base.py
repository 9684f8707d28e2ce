"""Records shared by the build back ends, and the one subprocess helper they use."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Toolchain:
    """A compiler found on this node: `ident` goes into the build hash and the store."""

    backend: str
    compiler: str
    version: str
    detail: dict = field(default_factory=dict)

    @property
    def ident(self) -> str:
        return f"{self.backend}:{self.version}"


@dataclass(frozen=True)
class BuildOutput:
    """What a back end produced in its output folder."""

    ok: bool
    log: str
    first_errors: str = ""
    analysis: dict = field(default_factory=dict)
    # Set when this node cannot build the variant for a reason that is not the variant's fault
    # (e.g. a pybind11 CUDA module needs a CUDA build of torch): the jobs become `skipped`.
    skip_reason: str = ""


_ERROR_LINE = re.compile(r"(error|fatal error|undefined reference)\b", re.IGNORECASE)


def first_errors(log: str, limit: int = 15) -> str:
    """The first compiler lines that say `error`, plus the line after each (the caret line),
    which is what a developer reads first when a rewrite fails with 15 errors."""
    lines = log.splitlines()
    picked: list[str] = []
    for i, line in enumerate(lines):
        if _ERROR_LINE.search(line):
            picked.append(line)
            if i + 1 < len(lines) and not _ERROR_LINE.search(lines[i + 1]):
                picked.append(lines[i + 1])
        if len(picked) >= limit:
            break
    count = sum(1 for line in lines if " error:" in line or line.startswith("error"))
    head = "\n".join(picked[:limit]) or "\n".join(lines[-limit:])
    return f"{count} error(s); first:\n{head}" if count else head


def run_compiler(cmd: list[str], cwd: Path, env: dict | None = None, timeout: float = 600) -> tuple[int, str]:
    """Run one compiler command; returns (exit code, combined output) and never raises on
    a compile error, so the caller can turn it into a `build_failed` record."""
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        return 127, f"compiler not found: {exc}"
    except subprocess.TimeoutExpired:
        return 124, f"compiler timed out after {timeout}s: {' '.join(cmd)}"
    return proc.returncode, "$ " + " ".join(cmd) + "\n" + proc.stdout + proc.stderr
