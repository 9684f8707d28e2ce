"""The first build of the written drafts: their variants as the run discovers them (a swept or
multi-pass variant expanded into its points and passes) and the built-in peers the run adds for
their ops (one per pass), planned and hashed as `run` plans them (`pipeline.run.plan.build_plan`,
the toolchains as the run's local probe answers them), each distinct build done once and kept
in the project's build cache under that hash, so that the `run` after `new` takes every build
from the cache instead of compiling it again.

A build is `workers.backends.build.build_variant`, contained as a run's build task is (its own
process tree ended with it, the run's time limit). Containment allows one build per process at
a time, so the builds that run a compiler run side by side in a pool of worker processes, as
many as the machine's cores and memory allow; those that compile nothing (a Python entry's
files copied, a built-in peer named) take milliseconds and run here, where torch is already
imported, before the pool starts. A line per build is said as it finishes (name, outcome,
seconds)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.onboarding.write.project import Onboarded
from pipeline.project.config import LIMITS, load_config
from pipeline.project.discovery import discover
from pipeline.run import build_cache
from pipeline.run.peers import builtin_peers
from pipeline.run.plan import BuildPlan, build_plan
from workers.backends.build import build_variant, cached_toolchains
from workers.core.records import BuildResult, Variant
from workers.measure.fit import bytes_available

# What one build may take of the machine's memory: nvcc or g++ on a translation unit that
# includes torch's headers peaks near 2 GiB; a plain kernel takes far less.
BUILD_BYTES = 2 << 30


@dataclass
class _Build:
    """One build to do: that of written drafts' variants (`items`: the drafts whose outcome it
    is), or of the built-in peer of a draft's op."""

    plan: BuildPlan
    items: list[Onboarded] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.plan.variant.name


def build_all(root: Path, done: list[Onboarded], cache: Path | None = None,
              say: Callable[[str], None] | None = None) -> None:
    """Build each written draft on this machine as the next run would, the builds of its ops'
    built-in peers beside them; each outcome on its draft (`build`; a manifest that does not
    load: `invalid`), each build kept in `cache` (a build cache root, `None`: none kept) and
    said through `say` as it finishes."""
    drafted = {item.draft.folder: item for item in done if item.written}
    if not drafted:
        return
    config = load_config(root)
    variants, invalid = discover(root, config)  # as the run discovers them: every point and pass
    for bad in invalid:
        if bad.folder in drafted:
            drafted[bad.folder].invalid = bad.error
    tools, _ = cached_toolchains()
    mine = [(v, drafted[v.folder]) for v in variants if v.folder in drafted]
    ops = {v.op for v, _ in mine}
    peers = [p for p in builtin_peers(variants) if p.op in ops]  # a [reference] op's is in a draft's folder
    todo: dict[str, _Build] = {}  # build hash -> the build: the points and passes of a draft share one
    for variant, item in [*mine, *((p, None) for p in peers)]:
        ident = tools.get(variant.backend, {}).get("ident")
        if not ident:
            missing = f"no {variant.backend} toolchain here: {tools.get(variant.backend, {}).get('reason')}"
            if item is not None and missing not in item.notes:
                item.notes.append(missing)
            continue
        plan = build_plan(root, variant, config.include_dirs, ident)
        build = todo.setdefault(plan.build_hash, _Build(plan))
        if item is not None and item not in build.items:
            build.items.append(item)
    _build(list(todo.values()), builds_dir(cache), say or (lambda _line: None))


def builds_dir(cache: Path | None) -> Path | None:
    return build_cache.builds_dir(cache) if cache is not None else None


def _build(todo: list[_Build], cache: Path | None, say: Callable[[str], None]) -> None:
    """Build `todo`, a build found in `cache` taken from there; every outcome said and kept."""
    count, finished = len(todo), 0

    def finish(b: _Build, record: BuildResult, files: dict | None) -> None:
        nonlocal finished
        finished += 1
        if files is not None and cache is not None:  # a new build: kept as a run keeps its builds
            build_cache.save(cache / b.plan.build_hash, record, files)
        for item in b.items:  # a draft of several builds (a swept variant's points) shows one that failed
            if item.build is None or item.build.ok:
                item.build = record
        say(progress_line(b, record, finished, count))

    pending = []
    for b in todo:
        found = build_cache.load(cache / b.plan.build_hash) if cache is not None else None
        if found is not None:
            finish(b, BuildResult.from_dict({**found[0].to_dict(), "cached": True, "variant": b.name}), None)
        else:
            pending.append(b)
    compiling = [b for b in pending if compiles(b.plan.variant)]
    workers = pool_size(len(compiling))
    # Here, one after the other, as a run's build task builds: what compiles nothing (a Python
    # entry's files copied, a built-in peer named), and everything where one build runs at a
    # time. Before the pool starts: a build's containment takes every process that appears below
    # this one while it runs, the pool's workers included.
    for b in pending if workers <= 1 else [b for b in pending if b not in compiling]:
        finish(b, *build_variant(b.plan.variant, b.plan.bundle, b.plan.build_hash, list(b.plan.include_dirs),
                                 LIMITS.build_timeout_s))
    if workers <= 1:
        return
    with ProcessPoolExecutor(workers, mp_context=_workers_context()) as pool:
        running = {pool.submit(_build_in_worker, b.plan.variant.to_dict(), b.plan.bundle, b.plan.build_hash,
                               list(b.plan.include_dirs), LIMITS.build_timeout_s): b for b in compiling}
        while running:
            ready, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in ready:
                b = running.pop(future)
                try:
                    record, files = future.result()
                except BrokenProcessPool as exc:  # a worker died (killed for memory): no result for what it held
                    msg = f"the build's process ended without a result: {exc}"
                    finish(b, BuildResult(b.name, b.plan.build_hash, False, "", msg, msg), None)
                    continue
                finish(b, BuildResult.from_dict(record), files)


def _workers_context():
    """Workers forked from a server process that has imported this module and torch once (each
    build's toolchain check imports torch): not forked from this process, which may have threads
    (the toolchain probe's) or a GPU runtime started, neither of which survives a fork; nor each
    spawned afresh, paying the imports once per worker."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, "torch"])
    return context


def compiles(variant: Variant) -> bool:
    """Whether the build runs a compiler: not for a Python entry or a built-in peer, whose build
    copies files or names the op, unless they build torch extensions."""
    return variant.backend not in ("python", "builtin") or bool(variant.extensions)


def _build_in_worker(variant: dict, bundle: dict, build_hash: str, include_dirs: list,
                     timeout_s: float) -> tuple[dict, dict]:
    """One build in a pool's worker process (records cross as dicts, as they cross Ray)."""
    result, artifact = build_variant(Variant.from_dict(variant), bundle, build_hash, include_dirs, timeout_s)
    return result.to_dict(), artifact


def pool_size(builds: int, cores: int | None = None, memory: int | None = None, load: float | None = None) -> int:
    """How many builds run at once: one per core this process may use that the rest of the
    machine leaves free (its one-minute load average, less this command's own process), as many
    as the memory available holds at BUILD_BYTES each, never more than there are builds. A busy
    core is not counted (as `make -l` does): two compiles sharing one core with other work
    finish later than one after the other (measured on a loaded 2-core machine: 150 s side by
    side against 112 s in turn for two builds)."""
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    memory = memory if memory is not None else bytes_available("cpu")
    load = load if load is not None else os.getloadavg()[0]
    free = int(cores - max(0.0, load - 1.0))
    return max(1, min(builds, free, memory // BUILD_BYTES))


def progress_line(b: _Build, record: BuildResult, finished: int, count: int) -> str:
    """`[3/20] fused_silu_mul: built, 12.4 s` (a peer's name says it is the built-in peer)."""
    state = ("built" if record.ok else "skipped" if record.skip_reason else "build_failed")
    how = "from the build cache" if record.cached else f"{record.seconds:.1f} s"
    who = b.name if b.items else f"{b.name} (built-in peer)"
    return f"[{finished}/{count}] {who}: {state}, {how}"
