"""reports/ renders records it is handed: no module under it may import the driver (pipeline)."""

from __future__ import annotations

import ast
from pathlib import Path

REPORTS = Path(__file__).resolve().parent.parent / "reports"


def imported_modules(source: str) -> set[str]:
    """Every module an import statement names, at any depth (function-level imports too)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def upward(source: str) -> list[str]:
    return sorted(m for m in imported_modules(source) if m == "pipeline" or m.startswith("pipeline."))


def test_no_reports_module_imports_pipeline():
    modules = sorted(REPORTS.rglob("*.py"))
    assert len(modules) >= 5
    offenders = {str(p.relative_to(REPORTS)): upward(p.read_text()) for p in modules}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_every_kind_of_import():
    # It must be able to fail: top-level, from-imports and imports inside functions count.
    assert upward("import pipeline.store\n") == ["pipeline.store"]
    assert upward("from pipeline import history\n") == ["pipeline"]
    assert upward("def f():\n    from pipeline.compare import format_rate\n") == ["pipeline.compare"]
    assert upward("from workers import status\nimport pipelines_other\n") == []
