"""A raw entry that names template arguments (`gemm_tiled<64, 8>`): the translation unit that
makes the compiler emit that instantiation.

A template kernel is compiled only where something instantiates it; a runtime compiler is told
which one by a name expression (`nvrtcAddNameExpression`, `hiprtcAddNameExpression`). The build
does the same ahead of time: one file that includes the sources and takes the kernel's address,
which instantiates it and keeps it in the device code. A swept variant's point puts its values
into such an entry (`pipeline.project.sweep`), so each point compiles its own kernel.
"""

from __future__ import annotations

from pathlib import Path

FILE_STEM = "flopwatch_instance"


def needs_instance(entry: str) -> bool:
    return "<" in entry and entry.rstrip().endswith(">")


def write_instance(folder: Path, sources: list[str], entry: str, suffix: str) -> str:
    """Write the instantiating file beside the sources (relative includes of theirs keep
    resolving) and return its path, to be compiled in their place."""
    path = Path(folder) / f"{FILE_STEM}{suffix}"
    lines = [f'#include "{Path(s).resolve()}"' for s in sources]
    lines.append(f"static const void* const {FILE_STEM}_kernel = reinterpret_cast<const void*>(&{entry.strip()});")
    path.write_text("\n".join(lines) + "\n")
    return str(path)
