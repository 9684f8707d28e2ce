"""Whether a built-in op computes what a repository's own reference computes, on the inputs of
its test: the child `flopwatch new` runs before it times the op's torch peer beside an entry
checked against that reference (`python -m workers.ops.agreement REQUEST.json RESULT.json`, in
a sandboxed child with a job's environment: the reference is the repository's code).

Both are run on the CPU in fp64 on one set of the `[reference]` inputs (drawn as a job draws
them, `workers.ops.reference`); they agree where the relative Frobenius error of the op's
reference to the repository's is at most `AGREE_RTOL` (both in fp64: a formula that differs
shows at once — `2·x·σ(x)` against silu's `x·σ(x)` is off by a relative 0.5). The result:
`{"agrees": true | false | null, "detail": "..."}`, null where either cannot run here."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

AGREE_RTOL = 1e-6
SEED = 20_261_206


def resolve(request: dict):
    """The repository's reference callable: the text of a file the draft writes beside itself
    (`source`, run as a module of its own), a `file.py:name` of the repository (from the draft's
    folder), a `package.module:name`, or a torch function."""
    call, root = request["call"], Path(request["root"])
    where, sep, name = call.rpartition(":")
    if request.get("source"):
        module = types.ModuleType("flopwatch_reference")
        module.__file__ = str(root / request["folder"] / where)
        exec(compile(request["source"], module.__file__, "exec"), module.__dict__)  # noqa: S102 - sandboxed child
        obj = module
    elif sep and where.endswith(".py"):
        path = (root / request["folder"] / where).resolve()
        spec = importlib.util.spec_from_file_location(f"flopwatch_reference_{path.stem}", path)
        obj = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(obj)
    elif sep:
        obj = importlib.import_module(where)
    else:
        head, _, name = call.rpartition(".")
        obj = importlib.import_module(head)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def compare(request: dict) -> dict:
    import torch

    from workers.ops import OPS
    from workers.ops.reference import ReferenceOp, load

    fn = resolve(request)
    spec = ReferenceOp(name="agreement", call=request["call"], inputs=tuple(request["inputs"]),
                       dims=tuple(request["sizes"]), sizes=dict(request["sizes"]), kwargs=dict(request["kwargs"]))
    ns = load(spec, lambda *_: fn)
    generator = torch.Generator(device="cpu").manual_seed(SEED)
    inputs = ns.make_inputs(dict(request["sizes"]), torch.float32, "default", "cpu", generator)
    theirs = ns.reference(inputs).flatten()
    op = OPS[request["op"]]
    mine = op.reference({request["mapping"][k]: v for k, v in inputs.items() if k in request["mapping"]},
                        op.LAYOUTS[0])
    mine = (mine if isinstance(mine, torch.Tensor) else torch.cat([t.flatten() for t in mine])).double().flatten()
    if mine.numel() != theirs.numel():
        return {"agrees": False, "detail": f"it returns {mine.numel()} values where the reference returns "
                                           f"{theirs.numel()}"}
    err = float(torch.linalg.vector_norm(mine - theirs) / max(float(torch.linalg.vector_norm(theirs)), 1e-300))
    sizes = ", ".join(f"{k}={v}" for k, v in request["sizes"].items())
    if err <= AGREE_RTOL:
        return {"agrees": True, "detail": f"agrees with the reference on the test's inputs ({sizes}, fp64 on the "
                                          f"CPU: relative error {err:.1e})"}
    return {"agrees": False, "detail": f"it disagrees with the reference on the test's inputs ({sizes}, fp64 on the "
                                       f"CPU: relative error {err:.2g})"}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    sys.dont_write_bytecode = True
    sys.path[:0] = [str(Path(request["root"]) / r) for r in request["roots"]]
    try:
        result = compare(request)
    except Exception as exc:  # noqa: BLE001 - the repository's code: its failure is the answer
        result = {"agrees": None, "detail": f"running them here raised {type(exc).__name__}: "
                                            f"{(str(exc).strip().splitlines() or [''])[0][:200]}"}
    Path(argv[1]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
