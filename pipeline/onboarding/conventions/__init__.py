"""One reader module per convention of kernel repositories: matches(repo, rel), read(repo, rel) -> records.
May import: pipeline.onboarding.source, pipeline.project, workers.

Each module says which files are its (`matches`, a cheap test of the path or text), reads one
into plain records (`read`, each file once per reader: `RepoFiles.records`) and names the record
types it gives (`GIVES`). `READERS` lists them explicitly, in the order a file is asked of them;
a new convention is a new module named here, not a longer one. `found(repo, Kind, files)` asks
every reader that gives `Kind`, so a later stage takes a record whichever reader made it.
"""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.onboarding.conventions import (
    autograd,
    bench_script,
    compared_in_tests,
    competition,
    cuda_kernels,
    kernelbench,
    module_entries,
    py_launch,
    pybind,
    ref_names,
    script_values,
    sliced_from_tests,
    torch_extension,
    torch_library,
    triton_bench,
)

READERS = (
    cuda_kernels,  # __global__ kernels, their launches in host code, type aliases
    pybind,  # the functions a PYBIND11_MODULE exports
    torch_library,  # TORCH_LIBRARY operators and their TORCH_LIBRARY_IMPL devices
    py_launch,  # kernels compiled at run time and launched from Python (cupy, hip-python, cuda-python)
    script_values,  # the tensors, sizes and calls of a Python script
    torch_extension,  # torch.utils.cpp_extension builds: load, load_inline, setup.py
    kernelbench,  # KernelBench problems (class Model) and solutions (class ModelNew)
    competition,  # kernel-challenge problem folders (reference.py, task.yml), their submissions and harness
    module_entries,  # a module's public functions as entries, and what it only forwards to
    autograd,  # autograd Functions (a class deriving from torch.autograd.Function, its backward)
    ref_names,  # references by name beside an entry (X_ref, torch_X, class TorchX)
    compared_in_tests,  # the words of each test: which tests may call an entry
    sliced_from_tests,  # the comparisons inside test functions (an entry's slices come from these)
    # sizes a repository benchmarks its entries at
    triton_bench,  # triton.testing.Benchmark sweeps under perf_report: x_vals × args
    bench_script,  # benchmark scripts: what they reach, the sizes their text gives
)


def found(repo, kind: type, files: Iterable[str]) -> list:
    """Every `kind` record the readers that give it read in `files`, file by file, in order."""
    readers = [r for r in READERS if kind in r.GIVES]
    return [x for rel in files for r in readers for x in repo.records(r, rel) if isinstance(x, kind)]
