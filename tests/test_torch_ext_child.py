"""The torch-extension build process's import of the entry (`workers.backends.torch_ext_child`):
a challenge problem's files are importable by their names first, as in the job."""

from __future__ import annotations

import json
import sys

from workers.backends import torch_ext_child
from workers.ops import challenge

TASK = "import torch\ninput_t = tuple\noutput_t = torch.Tensor\n"


def test_a_load_inline_submission_imports_the_problems_task_module(tmp_path, monkeypatch):
    """gpu-mode's load_inline solutions begin with `from task import input_t, output_t`: on an
    H100 the build imported the entry without the problem's files and failed ("No module named
    'task'") where the job would have run it."""
    from workers.bindings import python_entry
    from workers.core import records

    op = challenge.ChallengeOp(name="vectoradd_py", folder="p", path="p/reference.py", task="files: []",
                               modules={"task": {"path": "p/task.py", "source": TASK}})
    variant = type("V", (), {"repo_op": op.to_dict(), "binding": type("B", (), {"kind": "python"})()})()
    monkeypatch.setattr(records.Variant, "from_dict", staticmethod(lambda d: variant))
    (tmp_path / "python.json").write_text(json.dumps({}))
    seen = []

    def resolve(v, out):  # what the submission's first line does
        from task import input_t
        seen.append(input_t)

    monkeypatch.setattr(python_entry, "resolve", resolve)
    monkeypatch.delitem(sys.modules, "task", raising=False)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))  # the problem's finder leaves with the test
    assert torch_ext_child.import_entry({}, tmp_path, {}) == ""
    assert seen == [tuple]
    sys.modules.pop("task", None)
