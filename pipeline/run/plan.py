"""Planning: which builds and which jobs a run needs, as pure functions over records."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from workers.bindings.python_entry import PYTHON_SIDE
from workers.core.records import Job, Shape, Variant
from workers.ops import op_source_digest
from workers.ops.reference import is_reference
from workers.toolkit.bundle import digest, pack
from workers.toolkit.include_dirs import fingerprint
from workers.torch_ext.spec import ExtensionSpec
from workers.torch_ext.spec import digest as extension_digest

# The layout of the python-side back ends' artifact (`workers.bindings.python_entry`) is part of
# their build hash, so an artifact of another layout is not reused.
ARTIFACT_LAYOUT = "artifact: repo tree + python.json (with calls_cpp_extension)"


@dataclass(frozen=True)
class BuildPlan:
    """One variant to build: its shipped sources and the content hash that names the build."""

    variant: Variant
    bundle: dict
    include_dirs: tuple[str, ...]
    build_hash: str


def build_plan(root: Path, variant: Variant, project_includes: tuple[str, ...], toolchain_ident: str) -> BuildPlan:
    """Bundle the variant folder and the project's shared include folders; hash them with
    everything else that changes the binary (flags, arches, binding, toolchain version)."""
    # flopwatch's own peer: no sources, its op's code names it; but the peer of a [reference] op
    # is the repository's callable, shipped and imported as its variants' entries are.
    if variant.backend == "builtin" and not is_reference(variant.repo_op):
        return BuildPlan(variant, {}, (), digest({}, variant.backend, toolchain_ident, repr(variant.binding),
                                                 op_source_digest(variant.repo_op or variant.op)))
    bundle = pack(root, [variant.folder, *project_includes, *variant.extra_files])
    # Node-side include folders (a HipKittens checkout) are not shipped; their content as
    # this machine sees it still names the build, so updating the checkout rebuilds.
    node_includes = fingerprint(variant.include_dirs, os.environ) if variant.include_dirs else ""
    extras = [ARTIFACT_LAYOUT] if variant.backend in PYTHON_SIDE else []
    # what setup.py or the load() call says, flags included
    extras += [extension_digest(ExtensionSpec.from_dict(s)) for s in variant.extensions]
    # A point's values name its build whichever way they reach the code (defines, keyword
    # arguments, constexprs); a variant without axes keeps the hash it always had.
    extras += [f"params {sorted((k, repr(v)) for k, v in variant.params.items())}"] if variant.params else []
    key = digest(bundle, variant.backend, toolchain_ident, " ".join(variant.flags), " ".join(variant.arches),
                 repr(variant.binding), str(variant.openmp), " ".join(variant.include_dirs), node_includes,
                 repr(sorted(variant.launch.items())), variant.makefile, *extras)
    return BuildPlan(variant, bundle, tuple(project_includes), key)


def jobs_for(variants: list[Variant]) -> list[Job]:
    """Every (variant, shape, dtype, device kind). A peer variant without shapes runs at every
    shape and dtype the op's other variants use on that device, so each row has its peer."""
    jobs: list[Job] = []
    modes = {v.name: v.mode for v in variants}
    for v in variants:
        if v.peer:
            continue
        for kind in v.devices:
            for shape in v.shapes:
                for dtype in v.dtypes:
                    jobs.append(Job(v.name, v.op, shape, dtype, kind))
    # A peer runs in the passes its op's variants are measured in (a backward row's peer is a
    # backward pass: `pipeline.run.peers`), at their shapes.
    needed: dict[tuple, list[tuple[Shape, str]]] = {}
    for j in jobs:
        key = (j.op, j.device_kind, modes[j.variant])
        needed.setdefault(key, [])
        if (j.shape, j.dtype) not in needed[key]:
            needed[key].append((j.shape, j.dtype))
    for v in variants:
        if not v.peer:
            continue
        for kind in v.devices:
            pairs = [(s, d) for s in v.shapes for d in v.dtypes] if v.shapes else \
                [(s, d) for s, d in needed.get((v.op, kind, v.mode), []) if d in v.dtypes]
            if not v.shapes and v.repo_op.get("defaults"):
                # a problem's Model runs at its own sizes too: a problem onboarded alone is measured
                own = Shape(dict(v.repo_op["defaults"]))
                pairs += [(own, d) for d in v.dtypes if (own, d) not in pairs]
            jobs.extend(Job(v.name, v.op, s, d, kind) for s, d in pairs)
    return jobs
