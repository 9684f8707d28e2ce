"""The index a Python-side build artifact carries (which folder, import roots, built
extensions): read by bindings.python_entry and torch_ext.runtime alike."""

from __future__ import annotations

import json
from pathlib import Path

TREE = "repo"  # the artifact's copy of the shipped repository files
INDEX = "python.json"


def read_index(artifact: Path) -> dict:
    path = artifact / INDEX
    return json.loads(path.read_text()) if path.exists() else {"folder": "", "roots": [], "extensions": {}}
