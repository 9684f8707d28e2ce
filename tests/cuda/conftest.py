"""Shared fixtures of the CUDA backend's tests: the repo's cuda variants and a session-wide build
of them with nvcc (built once; tests that need nvcc skip without it)."""

from __future__ import annotations

import os
import subprocess
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.project.config import load_config
from workers.cuda import pybind_build, toolchain

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


@dataclass(frozen=True)
class Built:
    """One variant built here: its manifest, output file and nvcc's ptxas report."""

    folder: Path
    manifest: dict
    output: Path
    ptxas: str


def cuda_variant_dirs() -> list[Path]:
    return sorted(p.parent for p in ROOT.glob("kernels/*/cuda_*/variant.toml"))


def _build_one(folder: Path, manifest: dict, out_dir: Path, nvcc: str) -> Built:
    kind = manifest["binding"]["kind"]
    sources = [str(folder / s) for s in manifest["sources"]]
    flags = manifest.get("build", {}).get("flags", [])
    if kind == "pybind11":
        info = pybind_build.torch_build_info()
        if info.cuda is None:
            pytest.skip("torch is a CPU build: its headers lack c10/cuda/impl/cuda_cmake_macros.h")
        output = out_dir / pybind_build.output_name(manifest["binding"]["module"], info)
        cmd = pybind_build.pybind_command(nvcc, sources, manifest["binding"]["module"],
                                          manifest["arches"], info, str(output), flags)
    else:
        mode = "fatbin" if kind == "raw" else "shared-library"
        output = out_dir / (manifest["name"] + (".fatbin" if kind == "raw" else ".so"))
        # the project's shared include folders (flopwatch.toml), as a build gets them
        includes = [str(ROOT / d) for d in load_config(ROOT).include_dirs]
        cmd = toolchain.nvcc_command(nvcc, sources, includes, flags, manifest["arches"], str(output), mode)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{manifest['name']} failed to build:\n{done.stderr[-3000:]}"
    return Built(folder, manifest, output, done.stdout + done.stderr)


@pytest.fixture(scope="session")
def cuda_tools() -> toolchain.CudaTools:
    return toolchain.find_tools()


@pytest.fixture(scope="session")
def built_variants(cuda_tools, tmp_path_factory) -> dict[str, Built]:
    """Every non-pybind cuda variant built for its arches (pybind is built by its own test)."""
    if not cuda_tools.nvcc:
        pytest.skip("nvcc not found (CUDA_HOME, PATH)")
    out_dir = tmp_path_factory.mktemp("cuda_build")
    manifests = [(folder, tomllib.loads((folder / "variant.toml").read_text())) for folder in cuda_variant_dirs()]
    manifests = [(f, m) for f, m in manifests if m["binding"]["kind"] != "pybind11"]
    # nvcc is single-threaded and most of its time is ptxas: build the variants side by side.
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        done = pool.map(lambda fm: _build_one(fm[0], fm[1], out_dir, cuda_tools.nvcc), manifests)
        return {b.manifest["name"]: b for b in done}


@pytest.fixture(scope="session")
def build_variant(cuda_tools, tmp_path_factory):
    """Build one variant folder on demand (used for the pybind11 variant)."""
    def build(folder: Path) -> Built:
        if not cuda_tools.nvcc:
            pytest.skip("nvcc not found (CUDA_HOME, PATH)")
        manifest = tomllib.loads((folder / "variant.toml").read_text())
        return _build_one(folder, manifest, tmp_path_factory.mktemp("cuda_one"), cuda_tools.nvcc)
    return build
