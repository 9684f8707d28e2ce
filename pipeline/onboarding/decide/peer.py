"""Which peer an entry checked against the repository's own reference is timed beside: the
built-in op its name says, where that op agrees with the reference — else the reference itself
in the job's dtype (`workers.ops.reference`).

The one decision of this room that runs the repository's code: both are run once on the CPU on
the test's inputs (`workers.ops.agreement`), in a sandboxed child with a job's environment and
a time limit, as a setup.py run is. A reference that cannot run here (GPU-only code, a missing
package) leaves the peer unverified, and the draft says so."""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.onboarding.source.records import InputRow, Inputs, Reference
from workers.ops import OPS, returns_peer

AGREEMENT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Verdict:
    """agrees: True, False, or None where it could not be told; detail: in words."""

    agrees: bool | None
    detail: str


def peer_inputs(builtin_op: Reference, inputs: Inputs, rows: list[InputRow]) -> dict[str, str] | None:
    """`[reference]` input → the built-in op's input it is, where every input of the op is a
    tensor the entry is given (and the op has a torch peer returning its output); else None."""
    op = OPS.get(builtin_op.op)
    if op is None or not returns_peer(op):
        return None
    tensors = {r.name for r in rows if r.shape is not None and not r.output}
    mapping = {p: a for p, a in zip(inputs.names, builtin_op.mapped) if a in op.INPUTS and p in tensors}
    return mapping if sorted(mapping.values()) == sorted(op.INPUTS) else None


def agreement(repo, call: str, folder: str, source: str, rows: list[InputRow], sizes: dict, op: str, mapping: dict,
              kwargs: dict) -> Verdict:
    """Whether built-in `op` computes what the reference `call` (written from the draft's
    `folder`; `source`: the text of a reference.py the draft writes) computes on the inputs
    `rows` at the test's `sizes`."""
    from workers.isolation.sandbox import run_child
    from workers.job.runner import child_env

    if repo.root is None:
        return Verdict(None, "the repository is not on disk here")
    roots = sorted({repo.import_root(p)[0] for p in repo.scripts if repo.import_root(p)[0]} | {"."})
    request = {"root": str(repo.root), "call": call, "folder": folder, "source": source,
               "inputs": [_row(r) for r in rows], "sizes": sizes, "kwargs": kwargs, "op": op, "mapping": mapping,
               "roots": roots}
    with tempfile.TemporaryDirectory(prefix="flopwatch-agree-") as tmp:
        work = Path(tmp)
        (work / "request.json").write_text(json.dumps(request))
        env = {**child_env(), "PYTHONDONTWRITEBYTECODE": "1", "CUDA_VISIBLE_DEVICES": ""}
        outcome = run_child([sys.executable, "-m", "workers.ops.agreement", "request.json", "result.json"],
                            AGREEMENT_TIMEOUT_S, work, env)
        result = work / "result.json"
        if not result.is_file():
            how = "timed out" if outcome.timed_out else f"ended ({outcome.signal_name or outcome.returncode})"
            return Verdict(None, f"the check of both on the CPU {how}")
        data = json.loads(result.read_text())
    return Verdict(data.get("agrees"), data.get("detail", ""))


def _row(r: InputRow) -> dict:
    out = {"name": r.name}
    if r.shape is None:
        out["value"] = r.value
        return out
    out["shape"] = list(r.shape)
    if r.dtype:
        out["dtype"] = r.dtype
    if r.high is not None:
        out["high"] = r.high
    if r.output:
        out["output"] = True
    return out
