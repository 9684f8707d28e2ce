"""run: the benchmark scripts that compute their sizes as they run (a model table, a memory
probe: Liger-Kernel's `benchmark/scripts`), run under the recorder (`workers.recorder`) for the
entries about to be drafted, so that a draft is timed at the sizes the repository benchmarks.

For each entry of a module: what is watched (what the entry passes its parameters on to —
`LigerRMSNormFunction.apply`, which the script's `LigerRMSNorm` module calls too — else the
entry itself), and which scripts may reach it: a benchmark script that runs as a script,
imports the entry's package and names the entry, what it passes them on to, or a class or
function of its package that names either (`conventions.bench_script`). An entry whose sizes a script's text or a Triton sweep already
gives is not recorded; neither is one this node cannot run (Triton or CUDA code, no GPU here):
its draft says so. The scripts run several at a time, each with a time limit, a line each on
the progress stream; a script stops once it goes back to a size it recorded (its next mode).
Each recorded call is read back as the entry's own arguments
(`workers.recorder.entry_args.entry_arguments`) and becomes a `Sweep` (how = "recorded") of
the entry's `RunSizes`."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import PurePosixPath

from pipeline.onboarding.conventions import bench_script, found, module_entries
from pipeline.onboarding.conventions.ref_names import common_prefix, stems
from pipeline.onboarding.decide.bench_sizes import static_sweeps
from pipeline.onboarding.decide.scaling import gpu_here
from pipeline.onboarding.source.py_values import dotted
from pipeline.onboarding.source.records import (
    Arg,
    BenchScript,
    Definition,
    Entry,
    Equivalent,
    Forwarded,
    RunSizes,
    Sweep,
    Where,
)
from workers.recorder.bench_record import RecordLimits, record_calls
from workers.recorder.calls import Arg as Recorded
from workers.recorder.entry_args import entry_arguments

# Per script: Liger's scripts import torch, Triton and transformers, probe the device's memory
# and compile each size's kernels; a recording stops at the sweep's second mode.
LIMITS = RecordLimits(time_s=120.0, max_records=64, startup_s=60.0, stop_on_wrap=True)
# All the recordings of one `new` / `init` together: Liger-Kernel's functional module reaches 25
# scripts, and on an H100 node, two at a time, they ran past nine minutes with the GPU idle
# (imports, memory probes, Triton compiling each size). Past the budget no script starts; an
# entry left without a recording takes the test's sizes scaled, and its draft says why.
RECORD_BUDGET_S = 240.0
_budget_s = [RECORD_BUDGET_S]


@contextmanager
def recording_budget(seconds: float) -> Iterator[None]:
    """The wall time every script recording of the drafts made inside may take together
    (`new` / `init --record-budget`; 0: no script is run)."""
    before = _budget_s[0]
    _budget_s[0] = max(0.0, float(seconds))
    try:
        yield
    finally:
        _budget_s[0] = before
_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "int64",
           "int32": "int32", "bool": "bool"}


def jobs_here(gpu: bool) -> int:
    """Scripts run at once: two on a GPU node (a script sizes its sweep from a share of the
    device's memory: Liger's take 40% each), else half the cores, at most four."""
    return 2 if gpu else max(1, min(4, (os.cpu_count() or 2) // 2))


def passed_to(repo, entry: Entry) -> Forwarded | None:
    """What the entry passes its parameters on to: what it only forwards to, else the call in
    its body passing the most of its parameters by position, at least two of them
    (`loss, z_loss, ... = LigerCrossEntropyFunction.apply(input, target, weight, ...)`, the
    result then unpacked); None where it makes no such call."""
    if entry.forwards is not None:
        return entry.forwards
    tree = repo.tree(entry.file)
    fn = next((n for n in (tree.body if tree is not None else []) if isinstance(n, ast.FunctionDef)
               and n.name == entry.name), None)
    params = {*entry.params, *entry.keywords}
    best, most = None, 2
    for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)) if fn is not None else ():
        name = dotted(call.func)
        if not name or name in dir(builtins) or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        passed = tuple(a.id if isinstance(a, ast.Name) and a.id in params else "" for a in call.args)
        if sum(map(bool, passed)) >= most:  # the call passing the most of the entry's parameters
            parts = name.split(".")
            callee = tuple(parts[-2:]) if parts[-1] == "apply" and len(parts) > 1 else (parts[-1],)
            best, most = Forwarded(callee, passed), sum(map(bool, passed)) + 1
    return best


def target_of(entry: Entry, forward: Forwarded | None, module: str,
              imports: dict[str, str]) -> tuple[str, dict] | None:
    """(`package.module:name` to watch, where the entry passes each of its parameters in that
    call) — what it passes them on to where it does (`passed_to`), else the entry itself; None
    where neither is importable by a dotted name."""
    if forward is not None:
        # imported into the entry's module, else defined there (a Function beside its entry)
        origin = imports.get(forward.callee[0], "") or (f"{module}.{forward.callee[0]}" if module else "")
        if "." not in origin:
            return None
        where, _, name = origin.rpartition(".")
        return f"{where}:{name}", {p: i for i, p in enumerate(forward.params) if p}
    if not module:
        return None
    return f"{module}:{entry.name}", {p: p for p in (*entry.params, *entry.keywords)}


def reach(repo, entry: Entry, forward: Forwarded | None, package: str) -> frozenset:
    """The names a script may call to reach the entry: its own, what it passes its parameters
    on to, and the classes and functions of its package that name either."""
    names = {entry.name} | ({forward.callee[0]} if forward else set())
    files = [p for p in repo.scripts if package and p.startswith(package + "/") and not bench_script.is_bench(p)]
    for d in found(repo, Definition, files):
        if d.words & names:
            names.add(d.name)
    return frozenset(names)


def run_sizes(repo, rel: str, where: Where, entries: list[Entry], same_as: dict[str, list[Equivalent]],
              say: Callable[[str], None] | None = None, gpu: bool | None = None) -> dict[str, RunSizes]:
    """Entry name → what running the benchmark scripts gave it (nothing where no script reaches
    it or a sweep's text gives its sizes)."""
    say = say or (lambda line: print(f"flopwatch new: {line}", file=sys.stderr, flush=True))
    scripts = [s for s in found(repo, BenchScript, [p for p in repo.scripts if bench_script.is_bench(p)])
               if s.runnable]
    if not scripts:
        return {}
    root, module = repo.import_root(rel)
    imports = module_entries.module_imports(repo.tree(rel)) if repo.tree(rel) is not None else {}
    package = repo.package_of(rel)
    prefix = common_prefix([e.name for e in entries])
    gpu = gpu_here() if gpu is None else gpu
    needs_gpu = where.backend == "triton" or "cpu" not in where.devices
    out: dict[str, RunSizes] = {}
    wanted: dict[str, list[tuple[Entry, str, dict]]] = {}  # script → (entry, target, passes)
    benchmarks: set[str] = set()  # the scripts named after an entry: recorded first
    for entry in entries:
        if static_sweeps(repo, same_as[entry.name]):
            continue
        forward = passed_to(repo, entry)
        names = reach(repo, entry, forward, package)
        top = module.split(".")[0]  # a script reaches the entry through its package, imported
        touching = [s.file for s in scripts if top in s.imports and s.words & names]
        # a script named after the entry (benchmark_rms_norm.py for liger_rms_norm) is its benchmark:
        # the others that reach it (a model's MLP, a fused variant) are not run for it
        named = [f for f in touching if _named_after(f, entry.name, prefix)]
        benchmarks.update(named)
        touching = named or touching
        watched = target_of(entry, forward, module, imports)
        if not touching or watched is None:
            continue
        if needs_gpu and not gpu:
            out[entry.name] = RunSizes(entry.name, note=(
                f"{touching[0]}{f' (and {len(touching) - 1} more)' if len(touching) > 1 else ''} computes its sizes "
                f"as it runs and needs a GPU ({'Triton' if where.backend == 'triton' else 'GPU-only'} code): run "
                f"`flopwatch new` on a GPU node to take them from the script"))
            continue
        for script in touching:
            wanted.setdefault(script, []).append((entry, *watched))
    if not wanted:
        return out
    roots = (root,) if root and root != "." else ()
    recorded = _record_all(repo, wanted, roots, say, jobs_here(gpu), _budget_s[0], benchmarks)
    for script, watches in wanted.items():
        recording = recorded.get(script)
        for entry, target, passes in watches:
            sweeps = [_sweep(entry, r, passes) for r in recording.of(target)] if recording else []
            sweeps = [s for s in sweeps if s is not None]
            prior = out.get(entry.name, RunSizes(entry.name))
            note = prior.note
            if not sweeps and not note and recording is not None:
                note = f"{script} was run ({recording.ended}) and made no call of {target}"
            elif not sweeps and not note and script not in recorded:
                note = (f"{script} was not run: the scripts' recording budget of {_budget_s[0]:.0f} s was spent "
                        "(`--record-budget SECONDS` for more)")
            out[entry.name] = RunSizes(entry.name, prior.sweeps + tuple(sweeps), note if not prior.sweeps and
                                       not sweeps else "")
    return out


def _named_after(script: str, entry: str, prefix: str) -> bool:
    """Whether a script's name, benchmark words aside, is one the entry goes by."""
    stem = PurePosixPath(script).stem.lower()
    for word in ("benchmark_", "bench_", "_benchmark", "_bench"):
        stem = stem.replace(word, "")
    return stem in stems(entry, prefix)


def _record_all(repo, wanted: dict, roots: tuple, say, jobs: int, budget_s: float = RECORD_BUDGET_S,
                first: set[str] = frozenset()) -> dict:
    """Each script run once under the recorder with the targets of every entry it may reach,
    `jobs` at a time, a progress line as each starts and ends; the scripts in `first` (named
    after an entry) first. A script starts only while `budget_s` of wall time is left, and may take what is
    left; those never started are absent from the answer."""
    began = time.monotonic()
    order = sorted(wanted, key=lambda script: script not in first)  # stable: the repository's order otherwise

    def one(script: str):
        left = budget_s - (time.monotonic() - began)
        if left < 1.0:
            return script, "not run"
        targets = sorted({t for _, t, _ in wanted[script]})
        say(f"recording {script} (watching {', '.join(targets)})")
        limits = dataclasses.replace(LIMITS, time_s=min(LIMITS.time_s, left))
        t0 = time.monotonic()
        try:
            rec = record_calls(repo.root, script, targets, limits=limits, roots=roots)
        except (ValueError, OSError) as exc:
            say(f"{script}: not run ({exc})")
            return script, None
        sizes = len({r.target + str([a.shape for a in r.args]) for r in rec.records})
        detail = f": {rec.detail.splitlines()[-1]}" if rec.ended in ("error", "crashed") and rec.detail else ""
        say(f"{script}: {rec.ended} after {time.monotonic() - t0:.1f} s, {sizes} call size(s) recorded{detail}")
        return script, rec

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        answers = dict(pool.map(one, order))
    skipped = [s for s, rec in answers.items() if isinstance(rec, str)]
    if skipped:
        say(f"{len(skipped)} script(s) not run: the recording budget of {budget_s:.0f} s was spent "
            f"({', '.join(skipped[:3])}{', ...' if len(skipped) > 3 else ''}); their entries take the test's sizes, "
            "scaled (`--record-budget SECONDS` for more)")
    return {s: rec for s, rec in answers.items() if not isinstance(rec, str)}


def _sweep(entry: Entry, record, passes: dict) -> Sweep | None:
    """A recorded call as a one-point `Sweep` of the entry's own parameters."""
    args = entry_arguments(record, passes)
    kwargs = {p: _arg(a) for p, a in args.items()}
    if not any(a.tensor for a in kwargs.values()):
        return None
    file, _, line = record.site.rpartition(":")
    return Sweep(file or record.site, int(line) if line.isdigit() else 0, entry.name, {}, "", "recorder",
                 ({},), (), kwargs, "recorded")


def _arg(a: Recorded) -> Arg:
    if a.kind == "tensor":
        return Arg(a.text(), shape=tuple(a.shape or ()), dtype=_DTYPES.get(a.dtype or "", a.dtype or ""), tensor=True)
    if a.kind == "value":
        return Arg(a.text(), value=a.value)
    return Arg(a.text())
