"""The house keeps its shape (scripts/house.py, docs/architecture.md): every room declares in its
`__init__.py` what it holds and which rooms it may import, the code's own imports agree, no
import circle anywhere, no crowded folder, and the committed picture is the one the code draws.
Each rule is also shown failing on a small planted house."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_house():
    spec = importlib.util.spec_from_file_location("house", ROOT / "scripts" / "house.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["house"] = module
    spec.loader.exec_module(module)
    return module


house = _load_house()


def test_the_house_has_no_finding():
    found = house.findings(house.read())
    assert found == [], "\n".join(found)


def test_every_top_holds_only_rooms_and_a_few_entry_modules():
    h = house.read()
    tops = {top: [m for m, p in h.modules.items() if p.name != "__init__.py" and m.rpartition(".")[0] == top]
            for top in house.TOPS}
    assert tops["workers"] == [] and tops["pipeline"] == ["pipeline.cli"]
    assert {r for r in h.rooms if r.count(".") == 1 and r.startswith("pipeline.")} >= {
        "pipeline.run", "pipeline.fleet", "pipeline.project", "pipeline.onboarding", "pipeline.history",
        "pipeline.store", "pipeline.commands"}


def test_every_module_says_first_what_it_is_for():
    import ast

    h = house.read()
    silent = [m for m, p in h.modules.items() if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip()]
    assert silent == []


def test_the_committed_picture_and_rooms_table_are_the_ones_the_code_draws():
    h = house.read()
    committed = (ROOT / "docs" / "architecture" / "structure.svg").read_text()
    assert committed == house.svg(h), "run: python3 scripts/house.py --draw docs/architecture/structure.svg"
    page = house.ARCHITECTURE.read_text()
    assert house.with_rooms_table(page, h) == page, "run: python3 scripts/house.py --draw docs/architecture/structure.svg"
    assert "structure.svg" in page


# -- each rule fails on a planted house ------------------------------------------------------------

def _plant(tmp_path: Path, files: dict[str, str]) -> object:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return house.read(tmp_path, ("pipeline", "workers"))


BASE = {
    "workers/__init__.py": '"""Node side.\nMay import: nothing."""\n',
    "workers/core/__init__.py": '"""Records.\nMay import: nothing."""\n',
    "workers/core/records.py": '"""Records."""\n',
    "workers/job/__init__.py": '"""A job.\nMay import: workers.core."""\n',
    "workers/job/child.py": '"""The child."""\nfrom workers.core import records\n',
    "pipeline/__init__.py": '"""Driver.\nMay import: pipeline.run."""\n',
    "pipeline/run/__init__.py": '"""One commit.\nMay import: workers,\n    pipeline.store."""\n',
    "pipeline/run/runflow.py": '"""Runs."""\nimport workers.job.child\nfrom pipeline.store import db\n',
    "pipeline/store/__init__.py": '"""Store.\nMay import: workers.core."""\n',
    "pipeline/store/db.py": '"""DB."""\n',
}


def test_a_planted_house_that_keeps_its_declarations_has_no_finding(tmp_path):
    h = _plant(tmp_path, BASE)
    assert house.findings(h) == []
    assert h.allowed["pipeline.run"] == ("workers", "pipeline.store")  # read over its indented line
    # floors from the imports: a room one above the highest it imports
    assert house.layers(h) == [["pipeline", "pipeline.store", "workers", "workers.core"], ["workers.job"],
                               ["pipeline.run"]]


@pytest.mark.parametrize("rel, text, finding", [
    # a lower room reaching up, late, inside a function
    ("workers/job/child.py", '"""The child."""\ndef late():\n    from pipeline.run import runflow\n',
     "workers.job.child:3 imports pipeline.run.runflow (room workers.job may not import pipeline.run)"),
    # a sibling the declaration does not name
    ("pipeline/store/db.py", '"""DB."""\nfrom workers.job import child\n',
     "room pipeline.store may not import workers.job"),
    # a room that says nothing of what it may import
    ("workers/job/__init__.py", '"""A job."""\n', "workers.job/__init__.py declares no rooms it may import"),
    # a declaration naming a room that does not exist
    ("workers/job/__init__.py", '"""A job.\nMay import: workers.core, workers.nowhere."""\n',
     "may import 'workers.nowhere', which is no room"),
    # a circle inside one room, through a function-level import
    ("workers/core/records.py", '"""Records."""\ndef f():\n    from workers.core import status\n',
     "import circle: workers.core.records -> workers.core.status"),
    # declarations that would allow a circle between rooms
    ("pipeline/store/__init__.py", '"""Store.\nMay import: workers.core, pipeline.run."""\n',
     "declared rooms form a circle: pipeline.run -> pipeline.store"),
])
def test_each_planted_break_is_found(tmp_path, rel, text, finding):
    files = dict(BASE)
    files[rel] = text
    if "status" in text:
        files["workers/core/status.py"] = '"""Statuses."""\nfrom workers.core.records import Result\n'
    found = house.findings(_plant(tmp_path, files))
    assert any(finding in f for f in found), found


def test_a_crowded_folder_is_found(tmp_path):
    files = dict(BASE)
    files.update({f"workers/core/m{i}.py": f'"""Module {i}."""\n' for i in range(house.MAX_MODULES)})
    found = house.findings(_plant(tmp_path, files))
    assert found == [f"workers.core holds {house.MAX_MODULES + 1} modules at its top (at most {house.MAX_MODULES})"]


def test_a_name_imported_from_a_package_is_an_import_of_the_package(tmp_path):
    h = _plant(tmp_path, {**BASE, "pipeline/store/__init__.py": '"""Store.\nMay import: workers.core."""\nX = 1\n',
                          "pipeline/run/runflow.py": '"""Runs."""\nfrom pipeline.store import X, db\n'})
    assert {(a, b) for a, b, _ in h.edges} >= {("pipeline.run.runflow", "pipeline.store"),
                                               ("pipeline.run.runflow", "pipeline.store.db")}
