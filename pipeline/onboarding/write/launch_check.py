"""Whether a draft's largest timed size would be launch-bound, asked before anything runs: a size
whose kernel takes less than twice the floor of its call path measures the call, not the kernel
(docs/measurement.md, "Launch floors"), and the run would mark every row of it `launch_bound`.
`new` warns about such a draft so that the user gives it larger sizes before its first run.

The estimate is `pipeline.run.launch_estimate`'s: the op's work at the size over a GPU's
data-sheet roofs against the typical floor of the call path. The GPU is this node's where it has
one of a kind the draft runs on, else each GPU kind the draft runs on as flopwatch knows them
(`decide.scaling.GPUS`), the one where the work is shortest: the estimate errs towards warning,
as the draft's first run on the fastest of them would. The work of a built-in op and of a
`[reference]` table is counted from the draft's own text — its sizes, dtypes, devices and
inputs — without loading the manifest, which would read the repository's files again (`new
--no-build` reads each once); a problem's or a challenge's is known only once it ran, and is
not estimated."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass

from pydantic import ValidationError

from pipeline.onboarding.decide.scaling import GPUS
from pipeline.onboarding.source.records import Draft
from pipeline.project.schema import VariantManifest
from pipeline.project.shapes import ShapeError, resolve
from pipeline.run.launch_estimate import LaunchEstimate, would_be_launch_bound
from workers.core.params import FORWARD
from workers.core.records import Shape
from workers.ops import OPS, dtype_bytes
from workers.ops import reference as reference_op

# Where a draft writes no `devices`: the back end's default (as `pipeline.project.manifest` has it).
DEFAULT_GPUS = {"triton": ("cuda", "rocm"), "cuda": ("cuda",), "hip": ("rocm",)}


@dataclass(frozen=True)
class LaunchWarning:
    """A draft whose largest timed size (`shape`, a shape key, in `dtype`) would sit on its
    launch floor on `device`; why: the estimate in words."""

    name: str
    folder: str
    shape: str
    dtype: str
    device: str
    why: str

    def line(self) -> str:
        return (f"{self.name}: its largest timed size {self.shape} ({self.dtype}) would be launch-bound ({self.why}): "
                f"its rows would time the call, not the kernel; give larger sizes in `shapes` "
                f"({self.folder}/variant.toml)")


def launch_bound(drafts: list[Draft], local: tuple[str, str] | None = None) -> dict[str, LaunchWarning]:
    """The drafts whose largest timed size would be launch-bound, by folder; `local`: this node's
    GPU as `decide.scaling.local_gpu` reads it."""
    out = {}
    for d in drafts:
        found = _estimate(d, local)
        if found is not None:
            out[d.folder] = found
    return out


def _estimate(d: Draft, local: tuple[str, str] | None) -> LaunchWarning | None:
    try:
        m = VariantManifest.model_validate(tomllib.loads(d.files.get("variant.toml", "")))
    except (tomllib.TOMLDecodeError, ValidationError):
        return None  # the build says what is wrong with it
    measured = _work(m)
    devices = _devices(tuple(m.devices) or DEFAULT_GPUS.get(m.backend, ()), local)
    if measured is None or not devices:
        return None
    op, shapes = measured
    # a Python entry through an autograd Function (the draft measures its backward) or a Triton
    # launcher pays the larger floor; anything else one launch from C or a torch op
    path = "autograd" if m.backend == "triton" or any(x != FORWARD for x in m.modes) else "launch"
    worst: tuple[LaunchEstimate, str, str, str] | None = None
    for dtype in m.dtypes:
        try:
            size = dtype_bytes(dtype)
        except KeyError:
            continue
        shape = max(shapes, key=lambda s: (op.bytes_moved(s.dims, size), op.flops(s.dims)))
        flops, moved = float(op.flops(shape.dims)), float(op.bytes_moved(shape.dims, size))
        for device in devices:
            est = would_be_launch_bound(flops, moved, dtype, device, path)
            if est.bound and (worst is None or est.kernel_s < worst[0].kernel_s):
                worst = (est, shape.key, dtype, device)
    if worst is None:
        return None
    est, shape, dtype, device = worst
    return LaunchWarning(m.name, d.folder, shape, dtype, device.split(":", 1)[1], est.why)


def _work(m: VariantManifest) -> tuple[object, list[Shape]] | None:
    """(what counts the work: a built-in op, or a `[reference]` table's namespace, which counts
    its inputs' bytes without importing the reference; the timed shapes), or None for any
    other op, or sizes that are no list of the op's."""
    try:
        if m.reference is not None:
            t = m.reference
            inputs = tuple(i.model_dump(exclude_defaults=True) for i in t.inputs)
            # the table's sizes as `pipeline.project.manifest` names them: its inputs' then its own
            dims = tuple(dict.fromkeys([*(x for i in t.inputs for x in i.shape if isinstance(x, str)), *t.sizes]))
            spec = reference_op.ReferenceOp(name=m.op, inputs=inputs, dims=dims, sizes=dict(t.sizes),
                                            flops_expr=t.flops or "")
            fill = {k: v for k, v in t.sizes.items() if k in dims}
            shapes = resolve("shapes", m.shapes, m.op, dims, {}, fill) if isinstance(m.shapes, list) else \
                [Shape({k: t.sizes[k] for k in dims if k in t.sizes})]
            return reference_op.load(spec), shapes
        if m.op in OPS and m.problem is None and m.challenge is None and isinstance(m.shapes, list):
            return OPS[m.op], resolve("shapes", m.shapes, m.op, tuple(OPS[m.op].DIMS), {})
    except (ShapeError, KeyError, ValueError):
        return None
    return None


def _devices(kinds: tuple[str, ...], local: tuple[str, str] | None) -> list[str]:
    """The device keys to estimate on: this node's GPU where the draft runs on its kind, else
    every GPU flopwatch knows of the kinds the draft runs on."""
    if local and local[0] in kinds:
        return [f"{local[0]}:{local[1]}"]
    return [f"{kind}:{gpu[0]}" for kind in kinds if kind in GPUS for gpu in GPUS[kind]]
