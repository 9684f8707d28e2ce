"""A repository's benchmark script run under a recorder: the calls it makes to given targets,
at the sizes it computes at run time (model configurations, memory probes: Liger-Kernel's
benchmark/scripts), which reading the script cannot tell.

    recording = record_calls(repo_root, "benchmark/scripts/benchmark_rms_norm.py",
                             ["liger_kernel.ops.rms_norm:LigerRMSNormFunction"], argv=["--model", "llama_3_8b"])
    for r in recording.records:   # one CallRecord per distinct signature, first call first
        r.site, r.argument(0).shape, r.argument("eps")

The contract:
- **Where it runs.** A copy of the repository's files (no `.git`, no `__pycache__`, no file over
  `MAX_COPY_FILE_BYTES`) in a temporary folder, so the script's own output files (Liger writes
  `benchmark/data/all_benchmark_data.csv`) never touch the checkout; the script runs as
  `__main__` (`runpy`) from its own folder with `sys.argv = [script, *argv]`, its folder first on
  `sys.path` (as `python script.py` has it), then the import roots (`import_roots`).
- **Containment**, as a build's or a setup.py run's: a sandboxed child
  (`workers.isolation.sandbox.run_child`) in its own session, with a job child's environment
  (`workers.job.runner.child_env`: no tokens, flopwatch's code first on `PYTHONPATH`); every file
  it writes capped at `sandbox.MAX_FILE_BYTES`, all its writes together at
  `RecordLimits.write_bytes`; whatever it starts (daemons included) killed when it ends and
  counted in `left_behind`.
- **The uninstalled package.** Where `importlib.metadata` does not know the repository's
  distribution (name and version read from pyproject.toml / setup.cfg / setup.py), the child
  alone gets a stand-in dist-info (`workers.recorder.distribution`).
- **Targets** (`package.module:name`): functions, autograd Functions (`apply`), nn.Module classes
  (`forward`), replaced before the script runs (`workers.recorder.targets`). A target that
  cannot be imported is named in `notes`; the others are still watched.
- **What is kept.** The first call of each signature (tensor shapes, dtypes, devices; other
  arguments' values; a module's parameters and attributes), made for real (later sizes may
  depend on it), with its call site. Later calls of a known signature are not made
  (`workers.recorder.bench_child`), and `triton.testing.do_bench` calls its function once:
  a timing loop costs one call.
- **When it stops**: the script ends (`finished`); with `RecordLimits.stop_on_wrap`, it goes
  back to a size it recorded before (`swept`); `RecordLimits.time_s` after it started
  (`time_limit`); a signature beyond `RecordLimits.max_records` arrives (`record_limit`); the
  script raises or exits non-zero (`error`, `detail` its exception's last lines); the child dies
  (`crashed`) or writes too much (`write_limit`). The records made before the end are always
  returned. Nothing the repository's code does raises here; only the caller's own mistakes (a
  script outside the repository, a malformed target) raise ValueError.

`detail` and `notes` hold the repository's text: make them safe for their destination
(`workers.core.untrusted`) before showing them.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workers.recorder.calls import CallRecord
from workers.recorder.targets import parse_target

# A larger file is not copied for the script (data sets, weights): a benchmark script sizes its
# inputs from code, not from such files.
MAX_COPY_FILE_BYTES = 64 << 20
_SKIPPED_FOLDERS = (".git", "__pycache__", ".flopwatch", ".mypy_cache", ".pytest_cache", ".ruff_cache")
# Folders tried for a target's top package, in order, before the repository is searched.
DEFAULT_ROOTS = (".", "src")
# How deep the repository is searched for a target's top package outside DEFAULT_ROOTS.
SEARCH_DEPTH = 3
# stderr lines kept in `detail` where the child itself failed.
STDERR_LINES = 8
ENDED = ("finished", "swept", "time_limit", "record_limit", "error", "crashed", "write_limit")


@dataclass(frozen=True)
class RecordLimits:
    """What one recording may use.

    time_s: the script's run, from its first line (Liger's scripts probe memory and compile Triton
    kernels per size: minutes on a GPU node); startup_s: what the child may take beyond that
    (its imports before the script starts, and a script stuck in native code past its time,
    which is then killed: records made until then are kept); max_records: distinct signatures
    kept, all targets together; write_bytes: everything the child's processes write; stop_on_wrap:
    end the script once it goes back to a size it recorded before (a repeat of a signature two
    newer ones followed: the sweep's next mode or its memory pass), ended `swept` — a caller that
    wants the sizes only needs no more of the script."""

    time_s: float = 300.0
    max_records: int = 64
    write_bytes: int = 256 << 20
    startup_s: float = 120.0
    stop_on_wrap: bool = False


@dataclass(frozen=True)
class Recording:
    """What one run of a benchmark script under the recorder captured and how it ended.

    records: one per distinct signature, in the order the script first made them. ended: one of
    `ENDED`; detail: the script's exception (its last lines) for `error`, the child's last
    stderr lines for `crashed`, the limit for `time_limit` / `write_limit` / `record_limit`.
    notes: targets not watched (with why), the stand-in distribution, do_bench replaced.
    seconds: the whole child (its imports included); script_seconds: the script itself, from
    its first line to its end (0 where the child died first). left_behind: processes the
    script left running, killed at its end."""

    script: str
    argv: tuple[str, ...]
    records: tuple[CallRecord, ...]
    ended: str
    detail: str = ""
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    script_seconds: float = 0.0
    left_behind: int = 0

    def of(self, target: str) -> tuple[CallRecord, ...]:
        """The records of one target."""
        return tuple(r for r in self.records if r.target == target)

    def to_dict(self) -> dict:
        return {"script": self.script, "argv": list(self.argv), "records": [r.to_dict() for r in self.records],
                "ended": self.ended, "detail": self.detail, "notes": list(self.notes), "seconds": self.seconds,
                "script_seconds": self.script_seconds, "left_behind": self.left_behind}

    @classmethod
    def from_dict(cls, data: dict) -> Recording:
        return cls(script=data["script"], argv=tuple(data.get("argv") or ()),
                   records=tuple(CallRecord.from_dict(r) for r in data.get("records") or ()),
                   ended=data["ended"], detail=data.get("detail", ""), notes=tuple(data.get("notes") or ()),
                   seconds=float(data.get("seconds", 0.0)), script_seconds=float(data.get("script_seconds", 0.0)),
                   left_behind=int(data.get("left_behind", 0)))


def record_calls(repo_root: Path | str, script: str, targets: list[str] | tuple[str, ...], argv=(),
                 limits: RecordLimits = RecordLimits(), roots: tuple[str, ...] = ()) -> Recording:
    """Run `script` (relative to `repo_root`) with `argv` in a sandboxed child and record its
    calls to `targets` (see the module's contract). `roots`: repository-relative import roots
    to put first (a manifest's shared folders); `import_roots` adds the others. Raises
    ValueError only for the caller's own mistakes: a script that is not a file inside the
    repository, a malformed target."""
    from workers.isolation.sandbox import run_child
    from workers.job.runner import child_env

    repo = Path(repo_root).resolve()
    path = (repo / script).resolve()
    if not path.is_relative_to(repo) or not path.is_file():
        raise ValueError(f"script {script!r} is not a file inside {repo}")
    for target in targets:
        parse_target(target)
    rel = path.relative_to(repo).as_posix()
    with tempfile.TemporaryDirectory(prefix="flopwatch-record-") as tmp:
        work = Path(tmp)
        copy = work / "repo"
        copy_repository(repo, copy)
        request = {"root": str(copy), "script": rel, "argv": [str(a) for a in argv], "targets": list(targets),
                   "roots": [str((copy / r).resolve()) for r in import_roots(repo, targets, roots)],
                   "time_s": limits.time_s, "max_records": limits.max_records, "stop_on_wrap": limits.stop_on_wrap,
                   "records": str(work / "records.jsonl"), "end": str(work / "end.json"),
                   "dist_dir": str(work / "dist")}
        (work / "request.json").write_text(json.dumps(request))
        outcome = run_child([sys.executable, "-m", "workers.recorder.bench_child", "request.json"],
                            limits.time_s + limits.startup_s, work, child_env(), max_write_bytes=limits.write_bytes)
        records = read_records(work / "records.jsonl")
        end_file = work / "end.json"
        end = json.loads(end_file.read_text()) if end_file.is_file() else None
    ended, detail = _ending(end, outcome, limits)
    here = str(copy) + "/"  # the copy's paths, as the repository's own
    notes = tuple(n.replace(here, "") for n in (end.get("notes") or ())) if end else ()
    return Recording(script=rel, argv=tuple(str(a) for a in argv), records=records, ended=ended,
                     detail=detail.replace(here, ""), notes=notes, seconds=outcome.seconds,
                     script_seconds=float(end.get("script_s", 0.0)) if end else 0.0, left_behind=outcome.left_behind)


def _ending(end: dict | None, outcome, limits: RecordLimits) -> tuple[str, str]:
    """How the run ended, from the child's end file and the sandbox's outcome (pure)."""
    stderr = "\n".join(outcome.stderr_tail.rstrip().splitlines()[-STDERR_LINES:])
    if outcome.write_limit_hit:
        return "write_limit", (f"stopped: the script's processes wrote more than {limits.write_bytes >> 20} MiB "
                               f"(RecordLimits.write_bytes)")
    if outcome.timed_out:
        return "time_limit", (f"the script did not stop at its {limits.time_s:g} s limit; its processes were "
                              f"killed after {limits.time_s + limits.startup_s:g} s")
    if end is None:
        how = outcome.signal_name or f"exit code {outcome.returncode}"
        return "crashed", f"the recording process ended ({how}) before the script did:\n{stderr}".rstrip()
    ended, detail = end.get("ended", "crashed"), end.get("detail", "")
    if ended == "time_limit":
        detail = f"stopped after {limits.time_s:g} s (RecordLimits.time_s)"
    elif ended == "record_limit":
        detail = f"stopped at the first signature beyond {limits.max_records} (RecordLimits.max_records)"
    elif ended == "error" and detail.startswith("SystemExit") and stderr:
        detail = f"{detail}\n{stderr}"  # argparse and friends say why on stderr
    return ended, detail


def read_records(path: Path) -> tuple[CallRecord, ...]:
    """The records the child wrote, one JSON line each; a line cut short by the child's end is
    left out."""
    if not path.is_file():
        return ()
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(CallRecord.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            continue
    return tuple(out)


def copy_repository(repo: Path, dest: Path) -> None:
    """The repository's files for the script to run among (see `MAX_COPY_FILE_BYTES`)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n in _SKIPPED_FOLDERS}
        for name in names:
            p = Path(folder, name)
            if not p.is_symlink() and p.is_file() and p.stat().st_size > MAX_COPY_FILE_BYTES:
                skipped.add(name)
        return skipped

    shutil.copytree(repo, dest, symlinks=True, ignore=ignore)


def import_roots(repo: Path, targets, roots: tuple[str, ...] = ()) -> list[str]:
    """Repository-relative folders to put on `sys.path`: `roots` as given; then, per target, the
    first of `DEFAULT_ROOTS` holding its top package (or module), else the folder `_search`
    finds; then `DEFAULT_ROOTS` that exist."""
    out = [r for r in roots]
    for target in targets:
        top = parse_target(target)[0].split(".")[0]
        where = next((r for r in DEFAULT_ROOTS if _holds(repo / r, top)), None) or _search(repo, top)
        if where is not None and where not in out:
            out.append(where)
    out += [r for r in DEFAULT_ROOTS if r not in out and (repo / r).is_dir()]
    return out


def _holds(folder: Path, top: str) -> bool:
    return (folder / top).is_dir() or (folder / f"{top}.py").is_file()


def _search(repo: Path, top: str) -> str | None:
    """The folder holding `top` (a package folder or module), at most `SEARCH_DEPTH` deep: the
    shallowest outside test folders, then the shallowest inside them."""
    found = []
    for depth in range(1, SEARCH_DEPTH + 1):
        for folder in repo.glob("/".join(["*"] * depth)):
            if folder.is_dir() and not any(p in _SKIPPED_FOLDERS for p in folder.parts) and _holds(folder, top):
                rel = folder.relative_to(repo).as_posix()
                found.append(("test" in rel.lower(), depth, rel))
    return min(found)[2] if found else None
