"""The build cache verifies an entry's digest before anything of it is used
(pipeline/run/build_cache.py): a tampered artifact, an added file, an edited record or a missing
digest is refused with a message, removed and built again, never loaded. End to end: a planted
shared library whose constructor would leave a marker file is put in place of a cached build;
`flopwatch run` refuses it, rebuilds, measures, and the marker never appears."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from suite_repo import commit_blocked_gemm, init_repo

from pipeline import cli
from pipeline.run import build_cache
from pipeline.store import Store
from workers.core.records import BuildResult

ROOT = Path(__file__).resolve().parents[1]
RECORD = BuildResult(variant="v", build_hash="h1", ok=True, toolchain="g++ 12", seconds=1.5)
FILES = {"libv.so": b"\x7fELF" + bytes(range(256)) * 8, "meta/arch.txt": b"x86_64\n"}


def _entry(tmp_path) -> Path:
    folder = build_cache.builds_dir(tmp_path / "cache") / "h1"
    build_cache.save(folder, RECORD, FILES)
    return folder


def test_an_intact_entry_loads_as_it_was_stored(tmp_path):
    folder = _entry(tmp_path)
    record, files = build_cache.load(folder)
    assert record == RECORD and files == FILES
    assert len((folder / build_cache.DIGEST).read_text().strip()) == 64


@pytest.mark.parametrize(("tamper", "why"), [
    (lambda f: (f / "artifact" / "libv.so").write_bytes(b"\x7fELF planted"), "do not match the digest"),
    (lambda f: (f / "artifact" / "libextra.so").write_bytes(b"\x7fELF"), "do not match the digest"),
    (lambda f: (f / "artifact" / "meta" / "arch.txt").unlink(), "do not match the digest"),
    (lambda f: (f / "build.json").write_text((f / "build.json").read_text().replace('"ok": true', '"ok": false')),
     "do not match the digest"),
    (lambda f: (f / build_cache.DIGEST).unlink(), "it has no digest"),
    (lambda f: (f / build_cache.DIGEST).write_text("0" * 64), "do not match the digest"),
])
def test_a_tampered_entry_is_refused_removed_and_never_returned(tmp_path, capsys, tamper, why):
    folder = _entry(tmp_path)
    tamper(folder)
    assert build_cache.load(folder) is None
    err = capsys.readouterr().err
    assert err.startswith(f"flopwatch: build cache: refusing entry {folder}: ") and why in err
    assert "removed, building it again" in err
    assert not folder.exists() and list(folder.parent.iterdir()) == []  # nothing left beside it either
    build_cache.save(folder, RECORD, FILES)  # the rebuild takes its place
    assert build_cache.load(folder) == (RECORD, FILES)


def test_every_reader_of_the_cache_goes_through_the_verified_load():
    """run, compare, bisect and nightly all build through pipeline/run/runflow.py; no module but
    build_cache reads an entry's files, and runflow reads the cache only with build_cache.load."""
    readers = []
    for path in sorted(p for top in ("pipeline", "workers") for p in (ROOT / top).rglob("*.py")):
        text = path.read_text()
        if path.name != "build_cache.py" and ("build.json" in text or build_cache.DIGEST in text):
            readers.append(path.name)
        calls = {f"build_cache.{n.attr}" for n in ast.walk(ast.parse(text))
                 if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "build_cache"}
        if calls:
            assert calls <= {"build_cache.load", "build_cache.save", "build_cache.builds_dir"}, (path.name, calls)
    assert readers == []


PLANTED = r"""
#include <cstdio>
__attribute__((constructor)) static void planted() {
    if (FILE* f = std::fopen("MARKER", "w")) { std::fputs("loaded", f); std::fclose(f); }
}
extern "C" void gemm_blocked(const float*, const float*, float* C, int M, int N, int) {
    for (int i = 0; i < M * N; ++i) C[i] = 0.0f;
}
"""


@pytest.mark.slow
def test_flopwatch_run_never_loads_a_planted_artifact(ray_cluster, tmp_path, capsys):
    if shutil.which("g++") is None:
        pytest.skip("no g++ to build the planted library")
    root, cache = tmp_path / "kernels-repo", tmp_path / "cache"
    repo = init_repo(root)
    sha = commit_blocked_gemm(root, repo)
    args = ["run", sha, "--repo", str(root), "--cache", str(cache), "--budget", "0.3", "--no-report", "--json",
            "--variant", "cpp_blocked"]
    assert cli.main([*args, "--store", f"sqlite:///{tmp_path / 'first.db'}"]) == 0
    capsys.readouterr()
    (entry,) = [p for p in build_cache.builds_dir(cache).iterdir()
                if json.loads((p / "build.json").read_text())["variant"] == "cpp_blocked"]
    (library,) = [p for p in (entry / "artifact").rglob("*.so")]
    # The planted library: same name, same entry point, a constructor that shows it was loaded.
    marker = tmp_path / "planted-was-loaded"
    source = tmp_path / "planted.cpp"
    source.write_text(PLANTED.replace("MARKER", str(marker)))
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", "-o", str(library), str(source)], check=True, timeout=120)
    tampered = library.read_bytes()

    # A second store: the commit's jobs are to be measured again, so their build is looked up.
    url = f"sqlite:///{tmp_path / 'second.db'}"
    assert cli.main([*args, "--store", url]) == 0
    _out, err = capsys.readouterr()
    assert f"flopwatch: build cache: refusing entry {entry}: its files do not match the digest" in err
    assert not marker.exists(), "the planted library was loaded"
    with Store(url) as store:
        rows = [r for r in store.results() if r["variant"] == "cpp_blocked"]
    assert rows and all(r["status"] == "ok" for r in rows), [(r["status"], r["diagnostic"]) for r in rows]
    # the entry was built again from the sources: a different library, with a digest that holds
    (rebuilt,) = [p for p in (entry / "artifact").rglob("*.so")]
    assert rebuilt.read_bytes() != tampered and build_cache.load(entry) is not None
    assert json.loads((entry / "build.json").read_text())["ok"] is True

