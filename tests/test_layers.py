"""The floors of the house: lower floors never import upper ones (docs/architecture.md).

    workers/            node side: builds, the job sandbox, checks, timing, profilers, records
    reports/            renders plain records it is handed; may use workers' records
    pipeline/           the run room: one commit end to end (checkout … store)
    pipeline/history/   decisions over many commits: compare, verdicts, series, bisect
    pipeline/commands/  the CLI: wires rooms together

Every import statement counts, including those inside functions: a late import climbs as
surely as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

RUN_ROOM = ("pipeline.project.checkout", "pipeline.fleet.cluster", "pipeline.project.config", "pipeline.project.discovery", "pipeline.run.peers",
            "pipeline.onboarding",
            "pipeline.project.manifest", "pipeline.run.plan", "pipeline.run.progress", "pipeline.run.runflow",
            "pipeline.store", "pipeline.run.summary", "pipeline.fleet.slots", "pipeline.run.accounting",
            "pipeline.fleet.ray_access", "pipeline.fleet.local_ray", "pipeline.run.build_cache")

# (modules under this prefix, may not import these prefixes)
RULES = [
    ("workers", ("pipeline", "reports")),
    ("reports", ("pipeline",)),
    *[(m, ("pipeline.history", "pipeline.commands", "pipeline.cli")) for m in RUN_ROOM],
    ("pipeline.history", ("pipeline.commands", "pipeline.cli")),
]


def imported_modules(source: str, module: str) -> set[str]:
    """Absolute names of every module `source` imports (relative imports resolved against `module`)."""
    found: set[str] = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations() -> list[str]:
    found = []
    for path in sorted(p for top in ("workers", "reports", "pipeline") for p in (ROOT / top).rglob("*.py")):
        module = _module_name(path)
        for owner, forbidden in RULES:
            if not _within(module, owner):
                continue
            for name in sorted(imported_modules(path.read_text(), module)):
                if any(_within(name, f) for f in forbidden):
                    found.append(f"{module} imports {name} (a lower floor reaching up)")
    return found


def test_scanner_sees_every_kind_of_import():
    src = "import pipeline.store\nfrom pipeline.run import runflow\ndef f():\n    from ..history import series\n"
    names = imported_modules(src, "pipeline.commands.run")
    assert {"pipeline.store", "pipeline.run.runflow", "pipeline.history.series"} <= names


@pytest.mark.parametrize("module,source", [
    ("workers.measure.timing", "from pipeline.history.verdicts import median_ci\n"),
    ("workers.job.child", "def late():\n    import reports.site\n"),
    ("pipeline.run.runflow", "from pipeline.history import series\n"),
])
def test_a_planted_upward_import_is_caught(module, source):
    names = imported_modules(source, module)
    rules = [forbidden for owner, forbidden in RULES if _within(module, owner)]
    assert any(_within(n, f) for n in names for fs in rules for f in fs)


def test_no_lower_floor_imports_an_upper_one():
    assert violations() == []
