"""`builtin` back end: the op's own peer (torch on the device, `op.peer`), which flopwatch adds
to a run when the repository declares no peer for an op (`pipeline.run.peers`). Nothing is
compiled; the artifact only names the op, so the build record says what ran."""

from __future__ import annotations

import platform
from pathlib import Path

from workers.backends.base import BuildOutput, Toolchain
from workers.core.records import Variant


def toolchain() -> Toolchain | None:
    import torch

    return Toolchain("builtin", "torch", f"python {platform.python_version()} torch {torch.__version__}")


def build(variant: Variant, src: Path, out: Path, tc: Toolchain, include_dirs: list[Path]) -> BuildOutput:
    # `workers.ops.reference.KIND`, read as the record's field (back ends import no op code).
    if (variant.repo_op or {}).get("kind") == "reference":
        # The peer of a [reference] op is the repository's reference callable: its files are
        # shipped as a python variant's are, and it is imported the same way.
        from workers.backends.python import ship_tree

        if variant.extensions:  # built as the variants' are, so the reference imports their package
            from workers.backends import torch_ext

            tc_ext = torch_ext.toolchain()
            if tc_ext is None:
                return BuildOutput(False, "", "torch is not importable here: the reference's extensions cannot be built")
            built = torch_ext.build(variant, src, out, tc_ext, include_dirs)
            if not built.ok:
                return built
        else:
            ship_tree(variant, src, out, include_dirs)
    (out / "peer.txt").write_text(f"built-in peer of op {variant.op}: {variant.description}\n")
    return BuildOutput(True, f"built-in peer of {variant.op}: nothing to compile")
