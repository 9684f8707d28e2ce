"""The build process of a torch extension variant:
`python -m workers.backends.torch_ext_child REQUEST.json RESULT.json`. It builds every extension
as its repository would (`workers.torch_ext.build`), then imports the variant's entry once in the
same process, where the libraries it just loaded are (a second copy of a library registers its
TORCH_LIBRARY operators twice, and the process aborts)."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

from workers.torch_ext.build import build_all


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text())
    result = build_all(request)
    if request.get("variant") and not result["failed"]:
        result["import_error"] = import_entry(request["variant"], Path(request["out"]), result["built"])
    Path(argv[2]).write_text(json.dumps(result))
    return 0


def import_entry(variant: dict, out: Path, built: dict) -> str:
    """Import the variant's entry once, as its jobs will (the repository's package importing
    its prebuilt modules): an entry that only fails at import fails the build, with the
    traceback's last line, instead of every job. "" when it imports."""
    from workers.bindings.python_entry import problem_files, resolve
    from workers.core.records import Variant
    from workers.toolkit.artifact_index import INDEX

    index = json.loads((out / INDEX).read_text())
    (out / INDEX).write_text(json.dumps({**index, "extensions": built}))
    v = Variant.from_dict(variant)
    if v.binding.kind == "pybind11":
        return ""  # the extension module itself, imported above
    from workers.torch_ext.runtime import UndeclaredExtension

    try:
        problem_files(v)  # as the job makes them importable before it imports the entry
        resolve(v, out)
    except UndeclaredExtension:
        return ""  # the manifest's fault, not the build's: each job says `invalid` with the line to add
    except Exception as exc:  # noqa: BLE001 - the repository's import-time code
        traceback.print_exc()
        sys.stdout.flush()
        return f"{type(exc).__name__}: {exc}".strip().splitlines()[-1]
    return ""


if __name__ == "__main__":
    sys.exit(main(sys.argv))
