"""`cpp` back end: the host C++ compiler builds a shared library with an extern "C" entry."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from workers.backends.base import BuildOutput, Toolchain, first_errors, run_compiler
from workers.core.records import Variant

LIBRARY = "libvariant.so"


def toolchain() -> Toolchain | None:
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not compiler:
        return None
    out = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    return Toolchain("cpp", compiler, out.splitlines()[0].strip() if out else "unknown")


def compile_command(tc: Toolchain, variant: Variant, src: Path, include_dirs: list[Path]) -> list[str]:
    """The compiler command line for one variant (pure, tested as a string)."""
    cmd = [tc.compiler, "-std=c++17", "-O3", "-shared", "-fPIC"]
    if variant.openmp:
        cmd.append("-fopenmp")
    cmd += list(variant.flags)
    cmd += [f"-I{d}" for d in include_dirs]
    cmd += [str(src / s) for s in variant.sources]
    cmd += ["-o", LIBRARY]
    return cmd


def build(variant: Variant, src: Path, out: Path, tc: Toolchain, include_dirs: list[Path]) -> BuildOutput:
    code, log = run_compiler(compile_command(tc, variant, src, include_dirs), cwd=out)
    if code != 0:
        return BuildOutput(False, log, first_errors(log))
    return BuildOutput(True, log)
