"""Where a Python draft runs and which back end builds it: the CPU too where its code runs there
(a plain-torch Model, a C++ `load_inline`), else the GPUs only (CUDA or Triton code, GPU-only
imports); `triton` for a Triton entry, `torch` for one whose package loads a compiled
extension, `python` otherwise. Decisions over what the readers say of the module."""

from __future__ import annotations

from pipeline.onboarding.conventions.module_entries import (
    extension_loaded,
    gpu_code,
    imports_gpu_only,
    package_uses_triton,
    uses_triton,
)


def runs_on_cpu(*texts: str, specs: tuple = ()) -> bool:
    """Whether Python code can run on the CPU as well as a GPU: no CUDA extension among
    `specs` (a load_inline with only cpp_sources is C++), no Triton, no `.cuda()` or
    `device="cuda"`."""
    return not any(s.cuda for s in specs) and not any(uses_triton(t) or gpu_code(t) for t in texts)


def solution_backend(text: str, specs: tuple = ()) -> str:
    """A KernelBench solution's back end: its load_inline extensions', else Triton's, else Python."""
    return "torch" if specs else "triton" if uses_triton(text) else "python"


def entry_placement(repo, rel: str) -> tuple[str, tuple[str, ...], str]:
    """(back end, devices, the setup.py of the extension the package loads or "") of a module's
    entries."""
    text = repo.text(rel)
    triton = uses_triton(text) or package_uses_triton(repo, rel)
    devices = ("cpu", "cuda") if runs_on_cpu(text) and not imports_gpu_only(text) else ("cuda",)
    extension = extension_loaded(repo, rel)
    return ("torch" if extension else "triton" if triton else "python"), devices, extension
