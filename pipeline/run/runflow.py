"""One benchmark run of one commit: checkout → discover → build → run → store.

Shared by `flopwatch run`, `compare`, `bisect` and `nightly`. Every outcome, a broken manifest
or a missing toolchain included, becomes a stored result; nothing is dropped.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ray

from pipeline.fleet import cluster, headwatch, local_probe, slots
from pipeline.project import checkout
from pipeline.project.config import LIMITS, Limits, load_config
from pipeline.project.discovery import discover
from pipeline.project.sweep import best_points
from pipeline.run import accounting, build_cache, schedule
from pipeline.run.accounting import busy_s
from pipeline.run.driver_clock import DriverClock
from pipeline.run.identity import measurement_identity
from pipeline.run.peers import builtin_peers
from pipeline.run.plan import BuildPlan, build_plan, jobs_for
from pipeline.run.progress import Progress
from pipeline.store import Store
from workers.core import status
from workers.core.params import family_of, mode_of, selects, sweep_family
from workers.core.records import BuildResult, InvalidVariant, Job, Result, Variant
from workers.isolation import containment
from workers.ops import static_work
from workers.toolkit import build_hints


@dataclass(frozen=True)
class RunOptions:
    kernel_dirs: tuple[str, ...] | None = None
    only: tuple[str, ...] = ()
    resume: bool = False
    budget_s: float | None = None
    timeout_s: float | None = None
    threads: int | None = None
    profile: bool = False
    with_peer: bool = True
    command: str = "run"
    # The cold path (a fresh interpreter per job) instead of the slot's warm runner: for measuring
    # what the warm runner saves.
    spawn_per_job: bool = False
    # Check every device of a node that has several against one peer measurement (`_Stream._choose_probes`).
    peer_check: bool = True
    # Shape keys ("M=256,N=256,K=256") or labels ("256×256×256") to keep; empty keeps all.
    # Bisect probes one series, so it should not pay for the other shapes.
    shapes: tuple[str, ...] = ()
    # GPU timing rule (`workers.measure.timing`): "adaptive" or "fixed".
    timing_method: str = "adaptive"
    # What one job may write and how long one build may take (pipeline/project/config.py).
    limits: Limits = LIMITS
    # Swept variants: "all" points, or each one's "best" stored point (`pipeline.project.sweep.best_points`).
    points: str = "all"


@dataclass
class RunOutcome:
    run_id: int
    commit: checkout.CommitInfo
    results: list[Result] = field(default_factory=list)
    builds: dict[str, BuildResult] = field(default_factory=dict)
    rebuilt: int = 0
    from_cache: int = 0
    resumed: int = 0
    # What a later paired measurement needs: the variants, the planned jobs, the artifact refs.
    variants: dict[str, Variant] = field(default_factory=dict)
    jobs: list[Job] = field(default_factory=list)
    artifacts: dict = field(default_factory=dict)
    # Per device slot: busy (GPU work) vs wall; and the peer check (see `pipeline.run.accounting`).
    accounting: list[dict] = field(default_factory=list)
    peer_check: dict = field(default_factory=dict)
    # (variant, shape key, dtype, device key) -> measurement identity, for every planned series
    identities: dict = field(default_factory=dict)
    # Ray nodes lost while this run used them: {"node_id", "slots", "retried", "given_up"}.
    lost_nodes: list[dict] = field(default_factory=list)
    # Per device kind: the shortest jobs wall any schedule could reach beside the one taken
    # (`accounting.bounds`).
    bounds: dict = field(default_factory=dict)

    def jobs_of(self, variant: str) -> list[Job]:
        return [j for j in self.jobs if j.variant == variant]


@dataclass
class Session:
    """What stays the same across the commits of one command: store, cache, cluster, probes."""

    store: Store
    workdir: Path
    # None until `ensure_cluster` starts Ray through `connect`: a command that may time nothing
    # (`open_session(defer_ray=True)`) plans with `local_resources` (what that local Ray will
    # advertise) and the probes of `pipeline.fleet.local_probe`, and starts Ray for its first job.
    cluster_info: cluster.ClusterInfo | None
    progress: Progress
    toolchains: dict = field(default_factory=dict)
    devices: dict = field(default_factory=dict)
    clock: DriverClock = field(default_factory=DriverClock)
    # The build cache's root (`--cache`, FLOPWATCH_CACHE); None: `<workdir>/cache`.
    cache: Path | None = None
    connect: Callable[[], cluster.ClusterInfo] | None = None
    local_resources: dict = field(default_factory=dict)
    # What the probes found of the slots kept on the cluster, and probed (`SlotPool.kept_summary`).
    kept: dict = field(default_factory=dict)
    # What the probe on this machine did, before any Ray: {"toolchains": {"source": "cache" or
    # "probed", ...}, "devices": {kind: "this machine"}} (`local_probe.probe`).
    probe_notes: dict = field(default_factory=dict)
    # Builds submitted before the run that needs them (`build_ahead`): build hash -> Ray ref.
    builds_ahead: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.cache is None:
            self.cache = self.workdir / "cache"

    def ensure_cluster(self) -> cluster.ClusterInfo:
        """The command's cluster, started or joined now if that was deferred."""
        if self.cluster_info is None:
            with self.clock.phase("ray_start"):
                self.cluster_info = self.connect()
        return self.cluster_info

    def has_kind(self, kind: str) -> bool:
        """Whether the cluster (or the local Ray still to be started) has a slot of `kind`."""
        if self.cluster_info is None:
            return slots.slot_count(self.local_resources, kind) >= 1
        return self.cluster_info.has_kind(kind)

    def ray_use(self) -> dict:
        """How this command used Ray, for `--json`: its mode and what connecting cost, or that
        it was never started (a deferred local Ray that nothing needed)."""
        info = self.cluster_info
        probed = {"probe": self.probe_notes} if self.probe_notes else {}
        if info is None:
            return {"mode": "not started", **probed}
        kept = {"slots": self._with_timeline(self.kept)} if self.kept else {}
        head = {"head": info.head} if info.head else {}
        return {"mode": info.mode, "connect_s": round(info.connect_s, 3), **head, **kept, **probed}

    def _with_timeline(self, kept: dict) -> dict:
        """The kept slots' summary with each slot's start-up marks as seconds into this command
        (when its process started, its runner's imports ended, its probes answered)."""
        if not kept.get("marks"):
            return kept
        timeline = {name: {step: self.clock.since_start(at) for step, at in sorted(marks.items(), key=lambda m: m[1])}
                    for name, marks in kept["marks"].items()}
        return {**{k: v for k, v in kept.items() if k != "marks"}, "timeline": timeline}

    def slots_line(self) -> str:
        """The phase line of the slots kept on the cluster ("slots: 1 found on 1 node, 0 probed"), or ""."""
        kept = self.cluster_info is not None and self.cluster_info.kept and self.kept
        return slots.kept_line(self.kept) if kept else ""

    def shutdown(self) -> None:
        """Stop this command's slots and leave the cluster, if one was started or joined."""
        if self.cluster_info is not None:
            with self.clock.phase("shutdown"):
                cluster.shutdown(self.cluster_info)

    @property
    def slots(self) -> slots.SlotPool:
        """The device slots of this driver's cluster (kept across the commits of a command, and
        across commands on flopwatch's own kept local Ray)."""
        info = self.ensure_cluster()
        return slots.pool(info.resources, persistent=info.kept)

    def probe(self, kinds: set[str] | None = None) -> None:
        """Toolchains, and the identity of each device kind that has work (`kinds`; all if None).
        Both are answered by the device slots as they start (`SlotPool.start`), the toolchains
        by a task on a build node where no kept slot answers them; before a deferred Ray is
        started, both are asked on this machine."""
        wanted = [k for k in ("cpu", "cuda", "rocm")
                  if (kinds is None or k in kinds) and k not in self.devices and self.has_kind(k)]
        with self.clock.phase("probe"):
            if self.cluster_info is None:
                try:
                    found, toolchains = local_probe.probe(wanted, with_toolchains=not self.toolchains,
                                                          notes=self.probe_notes)
                except RuntimeError:  # asked as before, by the slots, which report what fails
                    self.ensure_cluster()
                else:
                    self.devices.update(found)
                    self.toolchains = self.toolchains or toolchains
                    self.probe_notes["devices"] = {kind: "this machine" for kind in found}
                    return
            pool = self.slots
            # Every kind's slots start together (and the one asked for the toolchains), not one
            # kind after the other, each with one call that also carries the probes wanted of it:
            # the identity from each kind's first slot, the toolchains from a kept slot, else a task.
            tools = not self.toolchains
            from_slot = tools and pool.toolchains_from_slot()
            starting = [k for k in ("cpu", "cuda", "rocm")
                        if k in wanted or (tools and k == pool.toolchain_kind())]
            pool.start(starting, identify=wanted, toolchains=from_slot)
            pending = cluster.probe_toolchains_async() if tools and not from_slot else None
            for kind in wanted:
                self.devices[kind] = pool.identity(kind)
            if tools:
                self.toolchains = pool.toolchains() if from_slot else cluster.wait_probe(pending)
            if wanted or tools:
                self.kept = pool.kept_summary()


def _own_paths(session: Session) -> tuple[Path, ...]:
    """What this command writes besides `.flopwatch/`, should it lie in the repository: the build
    cache and a SQLite store with its journal files."""
    store = session.store.path
    files = (store, *(store.with_name(store.name + end) for end in ("-wal", "-shm", "-journal"))) if store else ()
    return (session.cache, *files)


def checkout_commit(session: Session, repo, rev: str | None) -> tuple[Path, checkout.CommitInfo]:
    with session.clock.phase("checkout"):
        if rev is None:
            root, info = checkout.working_tree(repo, _own_paths(session))
        else:
            root, info = checkout.materialise(repo, rev, session.workdir / "checkouts")
    with session.clock.phase("store"):
        session.store.record_commit(info.sha, info.subject, info.author, info.authored_at, list(info.parents))
    return root, info


@dataclass
class PlannedCommit:
    """What a run of one commit would do, known before anything is built: its variants, jobs,
    build plans, and the measurement identity of every series (`pipeline.run.identity`), keyed
    by (variant, shape key, dtype, device key)."""

    root: Path
    info: checkout.CommitInfo
    config: object
    variants: list[Variant]
    invalid: list[InvalidVariant]
    jobs: list[Job]
    plans: dict[str, BuildPlan]
    identities: dict[tuple, str]
    # The series of variants without a toolchain here: their identity with the toolchain named
    # as missing (never stored: only compared between two commits planned on this machine).
    untooled: dict[tuple, str] = field(default_factory=dict)

    def series(self, job: Job, session: Session) -> tuple[str, str, str, str]:
        return job.variant, job.shape.key, job.dtype, device_key(session, job.device_kind)

    def jobs_in(self, series, session: Session) -> list[Job]:
        """The planned jobs of `series` (a set of series keys)."""
        return [j for j in self.jobs if self.series(j, session) in series]


def plan_commit(session: Session, repo, rev: str | None, options: RunOptions) -> PlannedCommit:
    """Check out `rev`, discover its variants, plan its builds and jobs, and name each series'
    measurement identity. Nothing is built or run."""
    root, info = checkout_commit(session, repo, rev)
    with session.clock.phase("plan"):
        return _plan(session, root, info, options)


def build_ahead(session: Session, planned: PlannedCommit, series: set, options: RunOptions) -> int:
    """Submit now the builds that a later `run_commit(planned, series)` would submit, so that
    they compile while this command does something else (a compare builds its head while its
    base runs: the two commits' builds and the base's jobs overlap instead of following each
    other). Only builds missing from the cache; the run takes over their refs as its own. Starts
    the command's Ray if a build is needed. Returns how many were submitted."""
    names = {j.variant for j in planned.jobs_in(series, session)}
    cache = build_cache.builds_dir(session.cache)
    missing = [plan for name, plan in planned.plans.items()
               if name in names and plan.build_hash not in session.builds_ahead
               and build_cache.load(cache / plan.build_hash) is None]
    if missing:
        session.ensure_cluster()
    for plan in missing:
        session.builds_ahead[plan.build_hash] = submit_build(session, plan, options)
    return len(missing)


def submit_build(session: Session, plan: BuildPlan, options: RunOptions):
    """The Ray ref of `plan`'s build: the one `build_ahead` submitted, else a new one."""
    ahead = session.builds_ahead.pop(plan.build_hash, None)
    return ahead if ahead is not None else cluster.submit_build(
        plan.variant, plan.bundle, plan.build_hash, plan.include_dirs, options.limits.build_timeout_s)


def keep_build(session: Session, record: BuildResult, files: dict) -> None:
    """A finished build into the build cache and the store."""
    with session.clock.phase("cache"):
        build_cache.save(build_cache.builds_dir(session.cache) / record.build_hash, record, files)
    with session.clock.phase("store"):
        session.store.record_build(record)


def built_artifacts(session: Session, planned: PlannedCommit, series: set,
                    options: RunOptions) -> tuple[dict[str, Variant], dict]:
    """The builds of `series`' variants, for a paired timing, without running their jobs: from
    the cache, from a build submitted ahead (`build_ahead`), or built now; each new build cached
    and stored as a run's are. ({name: variant}, {name: artifact ref}) of those that built."""
    names = {j.variant for j in planned.jobs_in(series, session)}
    by_name = {v.name: v for v in planned.variants}
    cache = build_cache.builds_dir(session.cache)
    found: dict[str, tuple] = {}
    pending = {}
    for name, plan in planned.plans.items():
        if name not in names:
            continue
        with session.clock.phase("cache"):
            entry = build_cache.load(cache / plan.build_hash)
        if entry:
            found[name] = entry
            continue
        session.ensure_cluster()
        pending[submit_build(session, plan, options)] = name
    for ref, name in pending.items():
        try:
            record_dict, files = ray.get(ref)
        except ray.exceptions.RayError:
            continue  # no build, no pairing: the series keeps its own numbers
        record = BuildResult.from_dict(record_dict)
        keep_build(session, record, files)
        found[name] = (record, files)
    ok = {name: files for name, (record, files) in found.items() if record.ok}
    if ok:
        session.ensure_cluster()
    return {name: by_name[name] for name in ok}, {name: ray.put(files) for name, files in ok.items()}


class SelectionError(ValueError):
    """A `--variant` or `--shape` selector that selects nothing at the commit; `flopwatch run` prints it and
    exits 2."""


def _selects_nothing(sel: str, sha: str, variants: list[Variant]) -> str:
    """What to tell the user of a selector that selects nothing: the names nearest to it."""
    names = sorted({v.name for v in variants} | {family_of(v.name) for v in variants})
    near = difflib.get_close_matches(sel, names, n=5, cutoff=0.6) or \
        difflib.get_close_matches(family_of(sel), names, n=5, cutoff=0.6)
    hint = f"; near names: {', '.join(near)}" if near else f"; `flopwatch ls` lists the {len(names)} names"
    return (f"--variant {sel!r} selects no variant at {sha[:10]}{hint} (a swept variant's points: NAME, or "
            "NAME[AXIS=value,...] with the values as the manifest writes them)")


def _shape_selects_nothing(shape: str, sha: str, jobs: list[Job], limit: int = 12) -> str:
    """What to tell the user of a `--shape` no job of the selected variants has: their shapes."""
    labels = sorted({j.shape.label for j in jobs})
    near = difflib.get_close_matches(shape, labels, n=3, cutoff=0.6)
    listed = near + [x for x in labels if x not in near]
    more = f" and {len(listed) - limit} more" if len(listed) > limit else ""
    return (f"--shape {shape!r} selects no job at {sha[:10]}; shapes of the selected variants: "
            f"{', '.join(listed[:limit])}{more} (give one as 512x512x512 or M=512,N=512,K=512)")


def _plan(session: Session, root: Path, info: checkout.CommitInfo, options: RunOptions) -> PlannedCommit:
    config = load_config(root)
    # Discover everything: a peer's shapes come from the other variants even when only the
    # peer was asked for. The filters apply to jobs, and only variants with jobs are built.
    variants, invalid = discover(root, config, options.kernel_dirs)
    variants += builtin_peers(variants)  # every op gets a peer; the repository's own wins
    for sel in options.only:
        if not any(selects(sel, v.name) for v in variants) and family_of(sel) not in {b.name for b in invalid}:
            problem = _selects_nothing(sel, info.sha, variants)
            # `run` stops before anything is built or stored: a misspelt name would otherwise pass
            # with an empty table. compare and bisect go on: the variant may exist at one commit only.
            if options.command == "run":
                raise SelectionError(problem)
            print(f"flopwatch: {problem}", file=sys.stderr)
    invalid = [bad for bad in invalid if not options.only or bad.name in {family_of(sel) for sel in options.only}]
    all_jobs = jobs_for(variants)
    chosen_variants = [j for j in all_jobs if not options.only or _selected(j.variant, options)]
    for shape in options.shapes:
        if chosen_variants and not any(shape in (j.shape.key, j.shape.label) for j in chosen_variants):
            problem = _shape_selects_nothing(shape, info.sha, chosen_variants)
            if options.command == "run":  # as a --variant that selects nothing, above
                raise SelectionError(problem)
            print(f"flopwatch: {problem}", file=sys.stderr)
    jobs = [j for j in all_jobs if _wanted(j, options)]
    if options.points == "best":
        jobs = _best_points_only(session, variants, jobs)
    if options.only and options.with_peer:  # the peer rows of the selected shapes come along
        peers = {v.name for v in variants if v.peer}
        chosen = {(j.op, j.shape.key, j.dtype, j.device_kind, mode_of(j.variant)) for j in jobs}
        jobs += [j for j in all_jobs if j.variant in peers and not _selected(j.variant, options)
                 and (j.op, j.shape.key, j.dtype, j.device_kind, mode_of(j.variant)) in chosen]
    variants = [v for v in variants if any(j.variant == v.name for j in jobs)]
    session.probe({j.device_kind for j in jobs})
    plans = {v.name: build_plan(root, v, config.include_dirs, _toolchain_ident(session, v))
             for v in variants if _toolchain_ident(session, v)}
    # A variant with no toolchain here cannot be built, so it has no identity; its build inputs
    # are still hashed (the toolchain named as missing): equal at two commits, they say that
    # the series did not change there whatever toolchain would build it (`compare`).
    untooled = {v.name: build_plan(root, v, config.include_dirs, f"no {v.backend} toolchain")
                for v in variants if v.name not in plans}
    identities, sources = {}, {}
    for j in jobs:
        plan = plans.get(j.variant) or untooled[j.variant]
        dev = device_key(session, j.device_kind)
        (identities if j.variant in plans else sources)[(j.variant, j.shape.key, j.dtype, dev)] = \
            measurement_identity(plan.build_hash, j.op, j.shape.key, j.dtype, dev, options.threads,
                                 repo_op=plan.variant.repo_op, mode=plan.variant.mode)
    return PlannedCommit(root, info, config, variants, invalid, jobs, plans, identities, sources)


def run_commit(session: Session, repo, rev: str | None, options: RunOptions,
               planned: PlannedCommit | None = None, series: set | None = None,
               beside_jobs: Callable[[], None] | None = None) -> RunOutcome:
    """Build, check, time and store the jobs of one commit (`planned`, or planned here).
    `series`: run only the jobs of these (variant, shape key, dtype, device key) series;
    broken manifests are recorded whatever it says. `beside_jobs`: called once the jobs of
    cached builds are handed out to the slots (work of the driver's own that can go on while the
    devices run, such as preparing the report); not called when the run has no jobs."""
    planned = planned or plan_commit(session, repo, rev, options)
    root, info, config, invalid = planned.root, planned.info, planned.config, planned.invalid
    jobs = planned.jobs if series is None else planned.jobs_in(series, session)
    variants = [v for v in planned.variants if any(j.variant == v.name for j in jobs)]
    plans = {name: plan for name, plan in planned.plans.items() if any(v.name == name for v in variants)}
    store, clock = session.store, session.clock
    with clock.phase("store"):
        run_id = store.start_run(info.sha, info.dirty, options.command, str(root), platform.node(), options.command)
        done = _done_keys(store, info.sha) if options.resume else set()
    outcome = RunOutcome(run_id, info, identities=planned.identities)

    def keep(r: Result) -> None:
        r = dataclasses.replace(r, identity=planned.identities.get((r.variant, r.shape, r.dtype, r.device), ""))
        with clock.phase("store"):
            store.record_result(run_id, info.sha, info.dirty, r)
        outcome.results.append(r)

    for bad in invalid:
        if not (options.resume and (bad.name, "", "", "", "") in done):
            keep(_invalid_result(bad))
    outcome.variants = {v.name: v for v in variants}
    # Before a deferred Ray is started, the jobs no slot could run and that need no build (no
    # toolchain here; no device of their kind and the build in the cache) are recorded here:
    # HIP series on an NVIDIA runner must not start Ray for a compare that times nothing.
    settled = _settled_without_cluster(session, variants, plans, jobs) if session.cluster_info is None else {}
    for r in settled.values():
        keep(r)
    outcome.jobs = [j for j in jobs if id(j) not in settled]
    # Without jobs (a compare whose series are all unchanged) nothing is built or run, and no
    # cluster is needed: the run records its broken manifests only.
    if outcome.jobs:
        stream = _Stream(session, options, config, outcome, keep, done, beside_jobs)
        try:
            with clock.phase("builds_and_jobs"):
                stream.go(variants, plans)
        except headwatch.HeadLost as exc:
            raise headwatch.HeadLost(f"{exc}; the {len(outcome.results)} result(s) this run finished are stored "
                                     f"in {store.location.shown}; start the cluster again and run `flopwatch run "
                                     "--resume` to measure the rest") from None
        outcome.accounting = accounting.summarise(stream.measured, stream.first_submit, stream.last_result)
        outcome.peer_check = accounting.peer_check(stream.peer_rows)
        outcome.lost_nodes = stream.lost_nodes()
        outcome.bounds = accounting.bounds(stream.measured, stream.slot_counts(), outcome.accounting)
    else:
        outcome.accounting, outcome.peer_check = accounting.summarise([], None, {}), accounting.peer_check([])
    outcome.jobs = jobs
    with clock.phase("store"):
        store.finish_run(run_id, {"devices": outcome.accounting, "peer_check": outcome.peer_check,
                                  "driver": clock.as_dict(), "lost_nodes": outcome.lost_nodes,
                                  "bounds": outcome.bounds, "resumed": outcome.resumed})
    return outcome


class _Stream:
    """Builds stream into runs: a variant's jobs go to the device slots as soon as its own build
    is done (or found in the cache), while other builds are still compiling; the driver waits
    on builds and results together."""

    def __init__(self, session: Session, options: RunOptions, config, outcome: RunOutcome, keep, done: set,
                 beside_jobs: Callable[[], None] | None = None):
        self.session, self.options, self.config, self.outcome = session, options, config, outcome
        self.keep, self.done, self.beside_jobs = keep, done, beside_jobs
        self.pool = session.slots
        # The profiler runs in the slot after its job's child has ended, holding the GPU: the
        # next job must not start beside it. A spawned child per job has no runner to queue at.
        self.pool.overlap = slots.overlap_wanted(dict(os.environ)) and not (options.profile or options.spawn_per_job)
        self.batched = batch_kinds(dict(os.environ), options)
        self.cache = build_cache.builds_dir(session.cache)
        self.first_submit: float | None = None
        self.last_result: dict[str, float] = {}  # slot -> driver time of its last result
        self.measured: list[tuple[str, Result]] = []  # (slot, result) of everything a slot ran
        self.peer_rows: list[dict] = []
        # Per device kind: the one peer job whose result, from whichever slot ran it, is the
        # reference the node's other slots re-time (`_peer_probe`).
        self.probes: dict[str, tuple] = {}
        # (variant, device kind) -> the calls its jobs run in, as lists of job keys (`_plan_calls`).
        self.parts: dict[tuple[str, str], list[list[tuple]]] = {}
        self.costs: dict[tuple, float] = {}  # job key -> expected device seconds (`_expected_costs`)
        self.advance = lambda _msg="": None
        self.builds: dict = {}  # build ref -> variant name, while compiling
        self.same_build: dict[str, list[str]] = {}  # variant being built -> the variants its build serves too
        self.deferred: list[tuple] = []  # CPU jobs held until the builds are done
        self.expected = expected_costs(session.store)
        self.launch_s = launch_times(session.store)
        self._lost_before = len(self.pool.lost_nodes)  # nodes the pool lost in earlier runs of this command

    def lost_nodes(self) -> list[dict]:
        return [dict(n) for n in self.pool.lost_nodes[self._lost_before:]]

    def go(self, variants: list[Variant], plans: dict[str, BuildPlan]) -> None:
        by_name = {v.name: v for v in variants}
        cached, builds = {}, self.builds
        # Variants of one build hash (the passes of one entry: `modes`) wait for one build.
        submitted: dict[str, str] = {}
        for name, plan in plans.items():
            with self.session.clock.phase("cache"):
                found = build_cache.load(self.cache / plan.build_hash)
            if found:
                cached[name] = found
            elif plan.build_hash in submitted:
                self.same_build.setdefault(submitted[plan.build_hash], []).append(name)
            else:  # the ref `build_ahead` submitted earlier, else a new build
                builds[submit_build(self.session, plan, self.options)] = name
                submitted[plan.build_hash] = name
        total = len(builds) + len(self.outcome.jobs)
        self.costs = self._expected_costs(self.outcome.jobs)
        self._plan_calls()
        self._choose_probes()
        with self.session.progress.task(f"build + run {self.outcome.commit.short}", total) as self.advance:
            with self.pool.held():  # the jobs of cached builds are handed out longest first
                for name, (record, files) in cached.items():
                    self.outcome.from_cache += 1
                    self._release(by_name[name], BuildResult.from_dict({**record.to_dict(), "cached": True,
                                                                        "variant": name}), files)
                for v in variants:  # no toolchain: their rows are recorded without a build
                    if v.name not in plans:
                        self._release(v, None, None)
            if self.beside_jobs is not None:
                # After the first calls are handed out (the slots are busy), not before: the
                # driver's work beside them must not hold up the first submissions.
                self.beside_jobs()
            headwatch.start()
            while builds or self.pool.has_work():
                waiting = list(builds) + self.pool.refs()
                ready = ray.wait(waiting, num_returns=1, timeout=_POLL_S)[0] if waiting else []
                headwatch.check()
                for given_up in self.pool.settle():  # calls of slots on lost nodes
                    self._given_up(given_up)
                if not ready:
                    if not waiting:
                        time.sleep(_POLL_S)
                    continue
                ref = ready[0]
                if ref in builds:
                    name = builds.pop(ref)
                    others = self.same_build.pop(name, [])
                    try:
                        record_dict, files = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        for lost in (name, *others):
                            self._build_lost(by_name[lost], exc)
                        continue
                    record = BuildResult.from_dict(record_dict)
                    keep_build(self.session, record, files)
                    self.outcome.rebuilt += 1
                    self.advance(f"built {name} {'ok' if record.ok else 'FAILED'}")
                    self._release(by_name[name], record, files)
                    for other in others:
                        self._release(by_name[other], dataclasses.replace(record, variant=other), files)
                    if not builds:
                        for deferred in self.deferred:
                            self._submit(*deferred)
                        self.deferred.clear()
                    continue
                tag, enqueued_at, slot = self.pool.finished(ref)
                if tag is None:
                    continue  # its slot failed in Ray: `settle` retries it elsewhere or gives it up
                self.last_result[slot.name] = time.time()
                collected = _collect_batch(self.session, ref, *tag[1:4]) if tag[0] == "batch" else \
                    [_collect(self.session, ref, *tag[1:4])]
                for r in collected:
                    r = _with_queue(r, enqueued_at)
                    self.measured.append((slot.name, r))
                    if tag[0] != "peer_check" and self._is_probe(r, tag):
                        self._peer_probe(r, slot, tag)
                    if tag[0] == "peer_check":
                        self.peer_rows.append(_peer_row(slot, r))
                        continue
                    self.keep(r)
                    self.advance(f"{r.variant} {r.shape} {r.status}")

    def _given_up(self, g: slots.GivenUp) -> None:
        """A job whose slot's node was lost and that no other slot could run: recorded `lost`
        with the node named, so the run completes and `--resume` measures it later."""
        if g.tag[0] not in ("job", "batch"):
            return  # a peer-check measurement of the lost device: nothing to record
        what, job, v, build = g.tag
        for one in job if what == "batch" else [job]:
            self.keep(_lost_result(self.session, one, v, build, g.reason, g.node_id, g.slot))
            self.advance(f"{v.name} {one.shape.key} lost")

    def _build_lost(self, v: Variant, exc: Exception) -> None:
        """The build task failed in Ray (its node was lost and Ray's retries ran out, or its
        worker died): nothing is cached, and its jobs are `lost` so that `--resume` builds again."""
        first = str(exc).strip().splitlines()
        why = f"its build task failed in Ray: {type(exc).__name__}: {first[0] if first else ''}"[:600]
        self.advance(f"build of {v.name} lost")
        for job in self.outcome.jobs_of(v.name):
            if not (self.options.resume and self._done(job, "")):
                self.keep(_lost_result(self.session, job, v, None, why, "", ""))

    def _done(self, job: Job, build_hash: str) -> bool:
        return (job.variant, job.shape.key, job.dtype, device_key(self.session, job.device_kind), build_hash) \
            in self.done

    def _release(self, v: Variant, build: BuildResult | None, files) -> None:
        """The build of `v` is known: record its rows that need no run, queue the others."""
        if build is not None:
            self.outcome.builds[v.name] = build
            if build.ok:
                self.outcome.artifacts[v.name] = ray.put(files)
        session, options = self.session, self.options
        runnable: dict[str, list[Job]] = {}
        for job in self.outcome.jobs_of(v.name):
            key = (job.variant, job.shape.key, job.dtype, device_key(session, job.device_kind),
                   build.build_hash if build else "")
            if options.resume and key in self.done:
                self.outcome.resumed += 1
                self.advance()
                continue
            pre = _precheck(session, v, job, build)
            if pre is not None:
                self.keep(pre)
                self.advance(f"{pre.variant} {pre.shape} {pre.status}")
                continue
            runnable.setdefault(job.device_kind, []).append(job)
        for kind, jobs in runnable.items():
            # A variant with check points shares a process on the CPU too: they run once per
            # process (`workers.job.check_points`), not once per shape.
            shared = kind in self.batched or bool(v.check_points and self.batched)
            calls = self._calls_of(v.name, kind, jobs) if shared else [[j] for j in jobs]
            for call in calls:  # a variant's shapes in one process (`workers.job.batch`) unless split
                tag = ("batch", call, v, build) if len(call) > 1 else ("job", call[0], v, build)
                first = any(_job_key(j) == self.probes.get(kind) for j in call)
                self._submit(tag, kind, self._settings(call[0]), first=first)

    def _plan_calls(self) -> None:
        """Which of a variant's shapes share a process: all of them (one process per variant
        saves a context and first uses per shape), unless splitting them across the kind's slots
        shortens the wall replayed from the jobs' expected costs (`schedule.split`): on many GPUs
        a variant of long shapes would otherwise bound the run."""
        for kind in self.batched:
            count = slots.slot_count(self.pool.resources, kind)
            groups: dict[str, list[Job]] = {}
            for j in self.outcome.jobs:
                if j.device_kind == kind:
                    groups.setdefault(j.variant, []).append(j)
            if count < 2 or not groups:
                continue
            names = list(groups)
            parts = schedule.split([[self.costs[_job_key(j)] for j in groups[n]] for n in names], count)
            for name, split in zip(names, parts):
                self.parts[(name, kind)] = [[_job_key(groups[name][i]) for i in p] for p in split]

    def _expected_costs(self, jobs: list[Job]) -> dict[tuple, float]:
        """{job key: expected device seconds}: its last stored busy time; a job never measured
        counts as the median of those that were (1 s when none was), so that a first run still
        spreads and the dispatcher still knows when a slot will be free."""
        known = {_job_key(j): self.expected.get(self._series(j)) for j in jobs}
        measured = sorted(c for c in known.values() if c)
        fallback = measured[len(measured) // 2] if measured else 1.0
        return {k: c or fallback for k, c in known.items()}

    def _series(self, job: Job) -> tuple:
        return job.variant, job.shape.key, job.dtype, device_key(self.session, job.device_kind)

    def _calls_of(self, name: str, kind: str, jobs: list[Job]) -> list[list[Job]]:
        """`jobs` (a variant's runnable jobs of `kind`) grouped into the calls `_plan_calls` chose."""
        planned = self.parts.get((name, kind))
        if not planned:
            return [jobs]
        by_key = {_job_key(j): j for j in jobs}
        calls = [[by_key[k] for k in part if k in by_key] for part in planned]
        placed = {k for part in planned for k in part}
        calls.append([j for j in jobs if _job_key(j) not in placed])
        return [c for c in calls if c]

    def _choose_probes(self) -> None:
        """The peer check's reference per device kind, where some node has several slots of that
        kind: the peer job whose launches are longest (its newest stored median; the largest work
        when none is stored). Another process on a card shares it in time slices, and only a
        launch that spans them shows it: on an H100 beside a bf16 GEMM loop, launches of 2 ms and
        more took 50-97% longer, those of 1 ms and less 0-6% (docs/benchmarks.md). Its own run is
        the measurement of the slot that ran it; each other slot of a node re-times it once
        (`_peer_probe`): one job per extra card, where re-timing every op's peer on every card
        cost ops × cards jobs."""
        if not self.options.peer_check:
            return
        variants = self.outcome.variants
        for j in self.outcome.jobs:
            if not variants[j.variant].peer or slots.slot_count(self.pool.resources, j.device_kind) < 2:
                continue
            rank = (self.launch_s.get(self._series(j), 0.0), _work(variants[j.variant], j))
            if j.device_kind not in self.probes or rank > self.probes[j.device_kind][0]:
                self.probes[j.device_kind] = (rank, _job_key(j))
        self.probes = {kind: key for kind, (_, key) in self.probes.items()}

    def _is_probe(self, r: Result, tag: tuple) -> bool:
        jobs = tag[1] if tag[0] == "batch" else [tag[1]]
        return any(_job_key(j) == self.probes.get(j.device_kind) and (r.variant, r.shape, r.dtype) == _job_key(j)[:3]
                   for j in jobs)

    def _peer_probe(self, r: Result, ran_on, tag: tuple) -> None:
        """On each node with several slots of the probe's kind, every slot has one measurement of
        the probe: the slot that ran it has its own result, each other slot re-times it once,
        pinned to it."""
        v, build = tag[2], tag[3]
        job = next(j for j in (tag[1] if tag[0] == "batch" else [tag[1]]) if (j.variant, j.shape.key, j.dtype) ==
                   (r.variant, r.shape, r.dtype))
        per_node: dict[str, list] = {}
        for s in self.pool.slots_of(job.device_kind):
            per_node.setdefault(s.node_id, []).append(s)
        settings = accounting.retime_settings(self._settings(job))
        cost = min(self.costs.get(_job_key(job), 0.0), accounting.PEER_RETIME_BUDGET_S + _RETIME_OVERHEAD_S)
        for node_slots in per_node.values():
            if len(node_slots) < 2:
                continue
            for s in node_slots:
                if s is ran_on:
                    self.peer_rows.append(_peer_row(ran_on, r))
                else:
                    self._submit(("peer_check", job, v, build), job.device_kind, settings, slot=s, cost_s=cost)

    def slot_counts(self) -> dict[str, int]:
        """Slots per device kind this run used."""
        return {kind: len(found) for kind, found in self.pool.slots.items() if found}

    def _settings(self, job: Job) -> dict:
        o = self.options
        return {"timing": _timing(self.config, o), "timeout_s": o.timeout_s, "threads": o.threads,
                "profile": o.profile, "device_key": device_key(self.session, job.device_kind),
                "spawn_per_job": o.spawn_per_job, "limits": o.limits.to_dict()}

    def _submit(self, tag: tuple, kind: str, settings: dict, slot=None, first: bool = False,
                cost_s: float | None = None) -> None:
        if kind == "cpu" and self.builds:
            # CPU timings must not share the cores with compilers: they start when the builds end.
            self.deferred.append((tag, kind, settings, slot, first, cost_s))
            return
        what, job, v, build = tag
        if self.first_submit is None:
            self.first_submit = time.time()
        jobs = job if what == "batch" else [job]
        job_arg = [j.to_dict() for j in jobs] if what == "batch" else job.to_dict()
        args = (job_arg, v.to_dict(), build.to_dict(), self.outcome.artifacts[v.name], settings)
        cost = sum(self.costs.get(_job_key(j), 0.0) for j in jobs) if cost_s is None else cost_s
        self.pool.submit(kind, "run_batch" if what == "batch" else "run", args, tag, slot=slot, cost_s=cost,
                         work=sum(_work(v, j) for j in jobs), first=first)


# A re-time's device time besides its sampling: load, correctness, warm-up (the 8192^3 reference
# on an H100: 0.3 s).
_RETIME_OVERHEAD_S = 0.35

# How often the driver's loop wakes without a result: to notice a lost node or a lost head.
_POLL_S = 1.0


def _job_key(job: Job) -> tuple:
    return job.variant, job.shape.key, job.dtype, job.device_kind


def _peer_row(slot, r: Result) -> dict:
    """A peer-check measurement: which slot of which node, and the peer's median there."""
    return {"slot": slot.name, "node_id": slot.node_id, "variant": r.variant, "shape": r.shape, "dtype": r.dtype,
            "status": r.status, "median_s": r.median_s, "uuid": r.device_info.get("uuid", ""),
            "pci_bus_id": r.device_info.get("pci_bus_id", "")}


def _done_keys(store: Store, commit_sha: str) -> set[tuple]:
    """What `--resume` skips: every stored result of the commit except those `lost` with a node
    (they are what resume is for)."""
    rows = store.results(columns=("variant", "shape", "dtype", "device", "build_hash", "status"),
                         commit_sha=commit_sha)
    return {(r["variant"], r["shape"], r["dtype"], r["device"], r["build_hash"]) for r in rows
            if r["status"] != status.LOST}


def _lost_result(session: Session, job: Job, v: Variant, build: BuildResult | None, why: str, node_id: str,
                 slot: str) -> Result:
    return Result(variant=v.name, op=v.op, backend=v.backend, shape=job.shape.key, dtype=job.dtype,
                  device=device_key(session, job.device_kind), status=status.LOST, peer=v.peer,
                  build_hash=build.build_hash if build else "", toolchain=build.toolchain if build else "",
                  flops=static_work(v, job.shape.dims)[0], diagnostic=f"not measured: {why}",
                  device_info={"ray_node_id": node_id, "slot": slot} if node_id else {})


def expected_costs(store: Store) -> dict[tuple, float]:
    """Expected device seconds of each (variant, shape, dtype, device): the busy phases of its
    latest stored result. The dispatcher starts the longest jobs first with these."""
    # Only the newest row of each key is read: a year of history must not be decoded per commit.
    rows = store.newest_per_series(("variant", "shape", "dtype", "device", "phases"), with_phases=True)
    return {(r["variant"], r["shape"], r["dtype"], r["device"]): busy_s(r["phases"] or {}) for r in rows}


def launch_times(store: Store) -> dict[tuple, float]:
    """The newest stored median of each (variant, shape, dtype, device): how long one launch takes."""
    rows = store.newest_per_series(("variant", "shape", "dtype", "device", "median_s"))
    return {(r["variant"], r["shape"], r["dtype"], r["device"]): r["median_s"] or 0.0 for r in rows}


def _work(v: Variant, job: Job) -> float:
    flops, bytes_moved = static_work(v, job.shape.dims)
    if v.repo_op:  # its counts are its code's, run only in the sandbox: the problem size will do
        return float(math.prod(job.shape.dims.values()))
    return flops or bytes_moved


def _with_queue(r: Result, enqueued_at: float) -> Result:
    """Queue time: from the job becoming runnable (its build known) to its slot starting it."""
    phases = dict(r.phases)
    started = phases.get("started_at")
    if started:
        phases["queue_s"] = round(max(0.0, started - enqueued_at), 4)
    return dataclasses.replace(r, phases=phases)


def _collect(session: Session, ref, job: Job, v: Variant, build: BuildResult) -> Result:
    """The result of a run task; a task that itself failed (a node lost, a bug on the node)
    still becomes a recorded `crashed` result, so the driver and the other jobs go on."""
    try:
        return Result.from_dict(ray.get(ref))
    except (ray.exceptions.RayError, ValueError) as exc:
        first = str(exc).strip().splitlines()
        return Result(variant=v.name, op=v.op, backend=v.backend, shape=job.shape.key, dtype=job.dtype,
                      device=device_key(session, job.device_kind), status=status.CRASHED, peer=v.peer,
                      build_hash=build.build_hash, toolchain=build.toolchain,
                      diagnostic=f"the run task failed on its node: {type(exc).__name__}: "
                                 f"{first[-1] if first else ''}"[:600], stderr_tail=str(exc)[-4000:])


def _collect_batch(session: Session, ref, jobs: list[Job], v: Variant, build: BuildResult) -> list[Result]:
    """The results of a `run_batch` call, in its jobs' order; a call that failed in Ray makes
    each of its jobs a recorded `crashed` result, as `_collect` does for one."""
    try:
        return [Result.from_dict(d) for d in ray.get(ref)]
    except (ray.exceptions.RayError, ValueError):
        return [_collect(session, ref, job, v, build) for job in jobs]


BATCH_ENV = "FLOPWATCH_BATCH"  # "0": a process per job; "all": CPU variants' shapes share one too


def batch_kinds(env: dict, options: RunOptions) -> set[str]:
    """The device kinds whose variants run their shapes in one process (`workers.job.batch`): the
    GPUs, where a process costs a context and first uses. Not when profiling: the profiler
    replays each job's call in a process of its own after the job."""
    if env.get(BATCH_ENV) == "0" or options.profile or options.spawn_per_job:
        return set()
    return {"cuda", "rocm", "cpu"} if env.get(BATCH_ENV) == "all" else {"cuda", "rocm"}


def _wanted(job: Job, options: RunOptions) -> bool:
    if options.only and not _selected(job.variant, options):
        return False
    return not options.shapes or bool({job.shape.key, job.shape.label} & set(options.shapes))


def _best_points_only(session: Session, variants: list[Variant], jobs: list[Job]) -> list[Job]:
    """`--points best`: each swept variant's jobs at its best stored point only."""
    selected = {j.variant for j in jobs}
    swept = {v.name: sweep_family(v.name)[0] for v in variants if v.params and v.name in selected}
    rows = session.store.newest_per_series(columns=("variant", "shape", "dtype", "device", "status", "median_s"))
    # Only the points the manifest has now, and the run selected, compete: one it dropped (or a
    # selector left out) must not leave its family untimed.
    best = best_points([r for r in rows if r["variant"] in swept])
    return [j for j in jobs if j.variant not in swept or swept[j.variant] not in best
            or best[swept[j.variant]] == j.variant]


def _selected(name: str, options: RunOptions) -> bool:
    """`--variant` names a variant, every point of a swept one, or some of its points."""
    return any(selects(sel, name) for sel in options.only)


def _toolchain_ident(session: Session, v: Variant) -> str | None:
    return session.toolchains.get(v.backend, {}).get("ident")


def device_key(session: Session, kind: str) -> str:
    d = session.devices.get(kind)
    return f"{kind}:{d['name']}" if d else kind


WARM_BESIDE_STEP_ENV = "FLOPWATCH_WARM_BESIDE_STEP"  # "0": a GPU loop waits idle for a preparation step


def _timing(config, options: RunOptions) -> dict:
    timing = {"budget_s": options.budget_s if options.budget_s is not None else config.timing_budget_s,
              "method": options.timing_method}
    if os.environ.get(WARM_BESIDE_STEP_ENV) == "0":
        timing["warm_beside_step"] = False
    return timing


def _settled_without_cluster(session: Session, variants: list[Variant], plans: dict[str, BuildPlan],
                             jobs: list[Job]) -> dict[int, Result]:
    """{id(job): its result} for the jobs `_precheck` answers without a slot or a build task:
    their variant has no toolchain here, or no slot of their device kind would exist and their
    build is in the cache."""
    by_name = {v.name: v for v in variants}
    cache = build_cache.builds_dir(session.cache)
    out: dict[int, Result] = {}
    for job in jobs:
        v, plan = by_name[job.variant], plans.get(job.variant)
        if plan is None:
            out[id(job)] = _precheck(session, v, job, None)
        elif not session.has_kind(job.device_kind):
            with session.clock.phase("cache"):
                found = build_cache.load(cache / plan.build_hash)
            if found:
                record, _files = found
                build = BuildResult.from_dict({**record.to_dict(), "cached": True, "variant": v.name})
                out[id(job)] = _precheck(session, v, job, build)
    return out


def _precheck(session: Session, v: Variant, job: Job, build: BuildResult | None) -> Result | None:
    """A result that needs no run: no toolchain here, build failed, or no such device."""
    base = dict(variant=v.name, op=v.op, backend=v.backend, shape=job.shape.key, dtype=job.dtype,
                device=device_key(session, job.device_kind), peer=v.peer, flops=static_work(v, job.shape.dims)[0])
    if build is None:
        reason = session.toolchains.get(v.backend, {}).get("reason", "not found")
        return Result(**base, status=status.SKIPPED, diagnostic=f"no {v.backend} toolchain on the build nodes ({reason})")
    base.update(build_hash=build.build_hash, toolchain=build.toolchain, resources=build.analysis)
    # What the build left running was killed with it; a failed build's errors say so already.
    left = f"; its build {containment.note(build.left_behind)}" if build.left_behind and build.ok else ""
    if build.skip_reason:
        return Result(**base, status=status.SKIPPED, diagnostic=build.skip_reason + left)
    if not build.ok:
        # Read from the log on the driver, so a failed build cached before this check is sorted too.
        limit = build_hints.resource_limit(build.log)
        return Result(**base, status=status.DOES_NOT_FIT if limit else status.BUILD_FAILED,
                      diagnostic=limit or build.first_errors, stderr_tail=build.log[-4000:])
    if not session.has_kind(job.device_kind):
        return Result(**base, status=status.SKIPPED, diagnostic=_no_slot(session, job.device_kind) + left)
    return None


def _no_slot(session: Session, kind: str) -> str:
    """Why no slot of `kind` runs a job: the cluster has no such device, or it has them but
    no node offers them to flopwatch (a node started without flopwatch's resource, as
    `ray start --num-gpus 4` alone: its GPUs are Ray's, not a flopwatch slot's)."""
    resources = session.cluster_info.resources if session.cluster_info is not None else session.local_resources
    ray_has = resources.get("GPU" if kind != "cpu" else "CPU", 0)
    if session.cluster_info is not None and ray_has and (kind == "cpu" or kind in slots.GPU_RESOURCE):
        name = slots.CPU_RESOURCE if kind == "cpu" else slots.GPU_RESOURCE[kind]
        unit = "CPU(s)" if kind == "cpu" else "GPU(s)"
        count = 1 if kind == "cpu" else int(ray_has)
        example = ("" if kind == "cpu" else f"--num-gpus {count} ") + f"--resources '{json.dumps({name: count})}'"
        return (f"the cluster's nodes offer {int(ray_has)} {unit} to Ray but no {name} resource, so flopwatch has "
                f"no {kind} slot there: start those nodes with `ray start ... {example}` (README, Clusters); "
                f"the build and its static analysis are stored")
    return f"no {kind} device in the cluster to run it (the build and its static analysis are stored)"


def _invalid_result(bad: InvalidVariant) -> Result:
    return Result(variant=bad.name, op="", backend="", shape="", dtype="", device="", status=status.INVALID,
                  diagnostic=bad.error)
