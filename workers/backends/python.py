"""`python` back end: nothing to compile; the sources travel as they are and the child
imports the module named by the binding's entry (`file.py:function`)."""

from __future__ import annotations

import platform
import shutil
from pathlib import Path

from workers.backends.base import BuildOutput, Toolchain
from workers.records import Variant


def toolchain() -> Toolchain | None:
    import torch

    return Toolchain("python", "python", f"python {platform.python_version()} torch {torch.__version__}")


def build(variant: Variant, src: Path, out: Path, tc: Toolchain, include_dirs: list[Path]) -> BuildOutput:
    for name in variant.sources:
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / name, target)
    return BuildOutput(True, "sources copied")
