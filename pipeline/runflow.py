"""One benchmark run of one commit: checkout → discover → build → run → store.

Shared by `flopwatch run`, `compare`, `bisect` and `nightly`. Every outcome, a broken manifest
or a missing toolchain included, becomes a stored result; nothing is dropped.
"""

from __future__ import annotations

import json
import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import ray

from pipeline import checkout, cluster
from pipeline.config import load_config
from pipeline.discovery import discover
from pipeline.plan import BuildPlan, build_plan, jobs_for
from pipeline.progress import Progress
from pipeline.store import Store
from workers import status
from workers.bundle import pack, unpack
from workers.ops import get_op
from workers.records import BuildResult, InvalidVariant, Job, Result, Variant


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
    # Shape keys ("M=256,N=256,K=256") or labels ("256×256×256") to keep; empty keeps all.
    # Bisect probes one series, so it should not pay for the other shapes.
    shapes: tuple[str, ...] = ()


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


@dataclass
class Session:
    """What stays the same across the commits of one command: store, cache, cluster, probes."""

    store: Store
    workdir: Path
    cluster_info: cluster.ClusterInfo
    progress: Progress
    toolchains: dict = field(default_factory=dict)
    devices: dict = field(default_factory=dict)

    def probe(self) -> None:
        if not self.toolchains:
            self.toolchains = cluster.probe_toolchains()
        for kind in ("cpu", "cuda", "rocm"):
            if kind not in self.devices and self.cluster_info.has_kind(kind):
                self.devices[kind] = cluster.probe_device(kind)


def checkout_commit(session: Session, repo, rev: str | None) -> tuple[Path, checkout.CommitInfo]:
    if rev is None:
        root, info = checkout.working_tree(repo)
    else:
        root, info = checkout.materialise(repo, rev, session.workdir / "checkouts")
    session.store.record_commit(info.sha, info.subject, info.author, info.authored_at, list(info.parents))
    return root, info


def run_commit(session: Session, repo, rev: str | None, options: RunOptions) -> RunOutcome:
    root, info = checkout_commit(session, repo, rev)
    config = load_config(root)
    # Discover everything: a peer's shapes come from the other variants even when only the
    # peer was asked for. The filters apply to jobs, and only variants with jobs are built.
    variants, invalid = discover(root, config, options.kernel_dirs)
    invalid = [bad for bad in invalid if not options.only or bad.name in options.only]
    all_jobs = jobs_for(variants)
    jobs = [j for j in all_jobs if _wanted(j, options)]
    if options.only and options.with_peer:  # the peer rows of the selected shapes come along
        peers = {v.name for v in variants if v.peer}
        chosen = {(j.op, j.shape.key, j.dtype, j.device_kind) for j in jobs}
        jobs += [j for j in all_jobs if j.variant in peers and j.variant not in options.only
                 and (j.op, j.shape.key, j.dtype, j.device_kind) in chosen]
    variants = [v for v in variants if any(j.variant == v.name for j in jobs)]
    session.probe()
    store = session.store
    run_id = store.start_run(info.sha, info.dirty, options.command, str(root), platform.node(), options.command)
    outcome = RunOutcome(run_id, info)
    done = store.done_keys(info.sha) if options.resume else set()

    def keep(r: Result) -> None:
        store.record_result(run_id, info.sha, info.dirty, r)
        outcome.results.append(r)

    for bad in invalid:
        if not (options.resume and (bad.name, "", "", "", "") in done):
            keep(_invalid_result(bad))
    plans = {v.name: build_plan(root, v, config.include_dirs, _toolchain_ident(session, v))
             for v in variants if _toolchain_ident(session, v)}
    builds, artifacts = _build_all(session, plans, outcome)
    outcome.builds, outcome.artifacts = builds, artifacts
    outcome.variants, outcome.jobs = {v.name: v for v in variants}, jobs
    pending, submitted = [], {}
    for job in jobs:
        v = next(x for x in variants if x.name == job.variant)
        pre = _precheck(session, v, job, builds.get(v.name))
        key = (job.variant, job.shape.key, job.dtype, device_key(session, job.device_kind),
               builds[v.name].build_hash if v.name in builds else "")
        if options.resume and key in done:
            outcome.resumed += 1
            continue
        if pre is not None:
            keep(pre)
            continue
        settings = {"timing": _timing(config, options), "timeout_s": options.timeout_s, "threads": options.threads,
                    "profile": options.profile,
                    "device_key": device_key(session, job.device_kind)}
        ref = cluster.submit_run(job, v, builds[v.name], artifacts[v.name], settings)
        pending.append(ref)
        submitted[ref] = (job, v, builds[v.name])
    with session.progress.task(f"run {info.short}", len(pending)) as advance:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            r = _collect(session, ready[0], *submitted[ready[0]])
            keep(r)
            advance(f"{r.variant} {r.shape} {r.status}")
    store.finish_run(run_id)
    return outcome


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


def _wanted(job: Job, options: RunOptions) -> bool:
    if options.only and job.variant not in options.only:
        return False
    return not options.shapes or bool({job.shape.key, job.shape.label} & set(options.shapes))


def _toolchain_ident(session: Session, v: Variant) -> str | None:
    return session.toolchains.get(v.backend, {}).get("ident")


def device_key(session: Session, kind: str) -> str:
    d = session.devices.get(kind)
    return f"{kind}:{d['name']}" if d else kind


def _timing(config, options: RunOptions) -> dict:
    return {"budget_s": options.budget_s if options.budget_s is not None else config.timing_budget_s}


def _precheck(session: Session, v: Variant, job: Job, build: BuildResult | None) -> Result | None:
    """A result that needs no run: no toolchain here, build failed, or no such device."""
    op = get_op(v.op)
    base = dict(variant=v.name, op=v.op, backend=v.backend, shape=job.shape.key, dtype=job.dtype,
                device=device_key(session, job.device_kind), peer=v.peer, flops=op.flops(job.shape.dims))
    if build is None:
        reason = session.toolchains.get(v.backend, {}).get("reason", "not found")
        return Result(**base, status=status.SKIPPED, diagnostic=f"no {v.backend} toolchain on the build nodes ({reason})")
    base.update(build_hash=build.build_hash, toolchain=build.toolchain, resources=build.analysis)
    if build.skip_reason:
        return Result(**base, status=status.SKIPPED, diagnostic=build.skip_reason)
    if not build.ok:
        return Result(**base, status=status.BUILD_FAILED, diagnostic=build.first_errors, stderr_tail=build.log[-4000:])
    if not session.cluster_info.has_kind(job.device_kind):
        return Result(**base, status=status.SKIPPED,
                      diagnostic=f"no {job.device_kind} device in the cluster to run it (the build and its "
                                 f"static analysis are stored)")
    return None


def _invalid_result(bad: InvalidVariant) -> Result:
    return Result(variant=bad.name, op="", backend="", shape="", dtype="", device="", status=status.INVALID,
                  diagnostic=bad.error)


def _build_all(session: Session, plans: dict[str, BuildPlan], outcome: RunOutcome):
    """Build what is not cached (in parallel, as Ray tasks); returns records and artifact refs."""
    cache = session.workdir / "cache" / "builds"
    builds: dict[str, BuildResult] = {}
    artifacts: dict = {}
    pending = {}
    for name, plan in plans.items():
        cached = _load_cached(cache / plan.build_hash)
        if cached:
            record, files = cached
            builds[name] = BuildResult.from_dict({**record.to_dict(), "cached": True, "variant": name})
            artifacts[name] = ray.put(files)
            outcome.from_cache += 1
        else:
            pending[cluster.submit_build(plan.variant, plan.bundle, plan.build_hash, plan.include_dirs)] = name
    with session.progress.task("build", len(pending)) as advance:
        refs = list(pending)
        while refs:
            ready, refs = ray.wait(refs, num_returns=1)
            record_dict, files = ray.get(ready[0])
            record = BuildResult.from_dict(record_dict)
            name = pending[ready[0]]
            _save_cached(cache / record.build_hash, record, files)
            session.store.record_build(record)
            builds[name] = record
            artifacts[name] = ray.put(files)
            outcome.rebuilt += 1
            advance(f"{name} {'ok' if record.ok else 'FAILED'}")
    return builds, artifacts


def _load_cached(folder: Path):
    meta = folder / "build.json"
    if not meta.exists():
        return None
    return BuildResult.from_dict(json.loads(meta.read_text())), pack(folder / "artifact")


def _save_cached(folder: Path, record: BuildResult, files: dict) -> None:
    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    unpack(files, tmp / "artifact")
    (tmp / "build.json").write_text(json.dumps(record.to_dict()))
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
