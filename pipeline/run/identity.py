"""Measurement identity: everything that can move one series' number, as one hash.

Two results with the same identity measured the same binary, through the same harness, at the
same shape and dtype, on the same device model: a second measurement could differ from the
first only by noise. `compare` and `bisect` use it to leave unchanged series untimed
("nothing changed, nothing timed"); `--all` measures them anyway.

What goes in:
- the build hash: the variant folder's files (manifest included), the project's shared include
  folders, node-side include folders as this machine sees them, flags, arches, binding and
  toolchain version (`pipeline.run.plan.build_plan`);
- the flopwatch worker code: every file of the `workers` package, which holds the harness, the
  correctness checks, the timing rule and the built-in ops with their references and peers
  (a new flopwatch measures everything again);
- the op's own source (built in, or declared by the benchmarked repository);
- the series: shape, dtype, device model (`cuda:NVIDIA H200`), the host threads asked for, and the
  pass measured (`mode`: backward and full; a forward's identity has no mode in it).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import workers
from workers.ops import op_source_digest

# Files of the workers package that can change a measurement (sources and the data tables
# the analysers read); caches and compiled files are not.
_CODE_SUFFIXES = (".py", ".toml", ".h", ".c", ".cpp", ".cu")


@functools.lru_cache(maxsize=1)
def worker_code_digest() -> str:
    """Hash of the worker code this driver ships with. Nodes run the same flopwatch version
    (README, "Clusters"), so the driver's copy stands for theirs."""
    root = Path(workers.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in _CODE_SUFFIXES and "__pycache__" not in path.parts:
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\1")
    return h.hexdigest()[:16]


def op_digest(op_name: str, repo_op: dict | None = None) -> str:
    """Hash of the op's source: its inputs, reference, work counts and peer (a built-in op's
    module and the op modules it imports; a repository op's `op.py`, as its variant carries it)."""
    if not repo_op:
        return _builtin_op_digest(op_name)
    return hashlib.sha256(op_source_digest(repo_op).encode()).hexdigest()[:16]


@functools.cache
def _builtin_op_digest(op_name: str) -> str:
    """A built-in op's digest, once per process: its files ship with this flopwatch and do not
    change under it, and a run asks for it once per series (parsing the op's module each time
    was most of planning a run)."""
    return hashlib.sha256(op_source_digest(op_name).encode()).hexdigest()[:16]


def measurement_identity(build_hash: str, op: str, shape_key: str, dtype: str, device_key: str,
                         threads: int | None = None, repo_op: dict | None = None, mode: str = "forward") -> str:
    """The identity of one series' measurement (module docstring). The pass (`mode`) is part of
    it: a backward pass of the same build measures something else than its forward (a forward
    keeps the identity it had before passes existed)."""
    parts = (build_hash, worker_code_digest(), op, op_digest(op, repo_op), shape_key, dtype, device_key,
             str(threads or ""), *((mode,) if mode != "forward" else ()))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]
