"""Ray execution: start or join a cluster, and the remote tasks for probing, building and running.

Builds are CPU tasks that can land on any node. Runs go to device slots (`pipeline.fleet.slots`):
actors holding the device's resource, `flopwatch_cpu` (one per node, so CPU timings never
overlap on a node) or a GPU plus `flopwatch_cuda` / `flopwatch_rocm`, so an AMD job never
lands on an NVIDIA node.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ray

from pipeline.fleet import headwatch, local_ray, ray_access, slots
from pipeline.fleet.ray_access import ClusterError
from workers.backends import build as build_stage
from workers.core.records import Variant

CPU_RESOURCE = slots.CPU_RESOURCE
GPU_RESOURCE = slots.GPU_RESOURCE
__all__ = ["ClusterError", "ClusterInfo", "connect", "shutdown"]

# How this command got its Ray (ClusterInfo.mode).
EXISTING = "existing"  # the caller had already called ray.init; flopwatch leaves it alone
JOINED = "joined"  # a cluster by address (--ray-address, FLOPWATCH_RAY_ADDRESS, RAY_ADDRESS)
PRIVATE = "private"  # a local Ray of this command only (Ray's address="local"), stopped at the end
STARTED = "started"  # flopwatch's kept local Ray, started by this command
REUSED = "reused"  # flopwatch's kept local Ray, started by an earlier command


@dataclass(frozen=True)
class ClusterInfo:
    address: str
    mode: str
    resources: dict
    connect_s: float = 0.0  # what starting or attaching cost this command (a driver phase)
    # A kept local Ray this command started: where its start went (`local_ray.HeadRecord.startup`),
    # how long this driver waited for it ("waited") and joining it then ("join").
    head: dict = field(default_factory=dict)

    @property
    def started_here(self) -> bool:
        return self.mode == PRIVATE

    @property
    def kept(self) -> bool:
        """A cluster that outlives the command (joined by address, or flopwatch's own kept local
        Ray): its device slots are kept too (`slots`, "Kept slots"). Not a private Ray, nor
        one the caller started (its lifetime is the caller's)."""
        return self.mode in (STARTED, REUSED, JOINED)

    def has_kind(self, kind: str) -> bool:
        return slots.slot_count(self.resources, kind) >= 1

    def driver_line(self) -> str:
        """The driver's Ray phase for the end of a run: what it did and what it cost. For a kept
        head this command started, the whole is the head's start on one clock, from its launch to
        this driver joined (`head_account`), and its parts add up to it."""
        what = {EXISTING: "was already connected", JOINED: f"joined the cluster at {self.address}",
                PRIVATE: "started a local Ray for this command", STARTED: "started flopwatch's local Ray",
                REUSED: "attached to flopwatch's local Ray"}[self.mode]
        if not self.head:
            return f"driver: {what} in {self.connect_s:.1f} s"
        whole, parts = head_account(self.head, self.connect_s)
        line = f"driver: {what} in {whole:.1f} s ({', '.join(f'{label} {s:.1f} s' for label, s in parts)}"
        line += f"; {self.head['slots']} device slot(s) readied beside)" if self.head.get("slots") else ")"
        before = whole - self.connect_s
        if before >= 0.05:  # started ahead of the command's imports: the command waited for the rest only
            line += f"; {before:.1f} s of it before this command's connect, beside its imports"
        return line


# The timed steps of a kept head's start, in the order they run (`local_ray.serve`).
HEAD_STEPS = (("python", "its python and imports"), ("resources", "resources"), ("ray_import", "Ray's import"),
              ("ray_init", "ray.init"))


def head_account(head: dict, connect_s: float) -> tuple[float, list[tuple[str, float]]]:
    """(whole, [(label, seconds)]) of a kept head's start as this command saw it, parts adding
    up to the whole at one decimal. The whole runs from the head's launch (`launched_at`, on the
    head's side) to this driver joined (`joined_at`): a head started ahead of the command's
    imports (`pipeline.fleet.head_ahead`) began before the command's connect, so measured from
    the connect (`connect_s`) its own steps exceeded the whole (ray.init 17.2 s in a 15.6 s start).
    Between its timed steps and the join: its folder and token, runner seeds, the slots it began
    readying, its record, and the driver's poll for it ("its other steps")."""
    steps = [(label, round(float(head[key]), 1)) for key, label in HEAD_STEPS if key in head]
    join = round(float(head.get("join", 0.0)), 1)
    if "launched_at" in head and "joined_at" in head:
        span = round(max(0.0, head["joined_at"] - head["launched_at"]), 1)
    else:  # a record without the launch: the connect's own time
        span = round(connect_s, 1)
    span = max(span, round(sum(s for _, s in steps) + join, 1))
    # A head this command launched itself: the connect's own work before the launch (its lock,
    # the key) is part of the whole too.
    before = round(connect_s - span, 1) if connect_s - span >= 0.05 else 0.0
    rest = round(span - sum(s for _, s in steps) - join, 1)
    parts = [("this command before launching it", before)] if before else []
    return round(span + before, 1), [*parts, *steps, ("its other steps", max(0.0, rest)), ("joined", join)]


# The kept head this process is attached to, the folder of its private local Ray's token, and
# the auth variables to put back afterwards.
_lease: local_ray.Lease | None = None
_token_folder: Path | None = None
_auth_before: dict | None = None


def _say(line: str) -> None:
    print(f"flopwatch: {line}", file=sys.stderr, flush=True)


def connect(address: str | None, num_gpus: int | None = None, *, reuse: bool = False,
            idle_s: float = local_ray.DEFAULT_IDLE_S, announce: Callable[[str], None] = _say) -> ClusterInfo:
    """Join the cluster at `address` (else $FLOPWATCH_RAY_ADDRESS, else $RAY_ADDRESS), or use a
    local Ray: flopwatch's kept head when `reuse` (`pipeline.fleet.local_ray`), else one of this
    command's own, started with Ray's address="local" whatever else runs on the machine.

    Raises ClusterError (one line: the address, what is wrong, what to set) when the cluster
    cannot be reached or refuses this driver; never passes a cluster resources to advertise."""
    global _lease, _auth_before
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    began = time.monotonic()
    if ray.is_initialized():
        return ClusterInfo(address or EXISTING, EXISTING, ray.cluster_resources())
    target = ray_access.resolve_address(address)
    if target is not None:
        if num_gpus is not None:
            raise ClusterError(f"--num-gpus is for a local Ray; the nodes of the cluster at {target} advertise "
                               f"their GPUs themselves (`ray start --num-gpus N`)")
        ray_access.check(target)
        _join(f"{target.host}:{target.port}", str(target))
        announce(f"joined the Ray cluster at {target} (from {target.source})")
        return ClusterInfo(str(target), JOINED, ray.cluster_resources(), time.monotonic() - began)
    if reuse:
        lease = local_ray.acquire(num_gpus, idle_s, announce=announce)
        waited = time.monotonic() - began
        _auth_before = local_ray.use_head_token(lease.token_path)
        _lease = lease
        try:
            _join(lease.record.address, f"flopwatch's local Ray ({lease.folder})")
        except BaseException:
            _release()
            raise
        spent = time.monotonic() - began
        head = {**lease.record.startup, "waited": round(waited, 3), "join": round(spent - waited, 3),
                "joined_at": round(time.time(), 3), "ahead": lease.ahead} if lease.started else {}
        if lease.started:
            whole, _parts = head_account(head, spent)
            announce(f"started flopwatch's local Ray at {lease.record.address} in {whole:.1f} s (token auth; it "
                     f"stops after {idle_s:g} s without a command; --no-ray-reuse for a private one)")
        else:
            announce(f"attached to flopwatch's local Ray at {lease.record.address} in {spent:.1f} s")
        return ClusterInfo(lease.record.address, STARTED if lease.started else REUSED, ray.cluster_resources(),
                           spent, head)
    announce('starting a local Ray for this command (Ray\'s address="local"; --ray-address or RAY_ADDRESS '
             'joins a cluster)')
    _start_private(num_gpus)
    return ClusterInfo("local", PRIVATE, ray.cluster_resources(), time.monotonic() - began)


def _start_private(num_gpus: int | None) -> None:
    """A local Ray of this command only, with the kept head's token handling: Ray listens on every
    interface, so without a token any process that reaches its ports, from any machine, runs
    code as this user. Token mode is set here whatever RAY_AUTH_MODE the shell has (Ray up to
    2.58 started a local Ray without one unless told; RAY_AUTH_MODE=disabled still does), with a
    fresh token of this Ray's own (`local_ray.private_token_folder`), removed when it stops."""
    global _token_folder, _auth_before
    local_ray.require_token_auth()
    _token_folder = local_ray.private_token_folder()
    _auth_before = local_ray.use_head_token(_token_folder / local_ray.TOKEN)
    resources, gpus = local_ray.advertised_resources(num_gpus)
    try:
        # Its session (sockets, logs) in the same private folder, as the kept head's: Ray's default
        # /tmp/ray is open to every user, who could read its logs or put a socket of theirs there.
        ray.init(address="local", _temp_dir=str(_token_folder / local_ray.RAY_TEMP), namespace="flopwatch",
                 resources=resources, num_gpus=gpus, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
    except BaseException:
        _release()
        raise


def starts_local_ray(address: str | None, num_gpus: int | None, reuse: bool) -> bool:
    """Whether `connect` would start a local Ray (no cluster to join, not connected, no kept
    head up): the start a command that may run nothing can put off (`pipeline.fleet.local_probe`)."""
    if ray.is_initialized() or ray_access.resolve_address(address) is not None:
        return False
    return not reuse or local_ray.serving_head(num_gpus) is None


def _join(address: str, name: str) -> None:
    """ray.init against a running cluster; what Ray raises becomes one line. Nothing to
    advertise is passed: Ray refuses resources from a driver that joins."""
    from ray.exceptions import AuthenticationError

    try:
        ray.init(address=address, namespace="flopwatch", log_to_driver=False, logging_level="ERROR")
    except (ConnectionError, RuntimeError, AuthenticationError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ClusterError(f"joining {name} at {address} failed: {first[:300]}") from None


def _release() -> None:
    global _lease, _token_folder, _auth_before
    if _lease is not None:
        _lease.release()
        _lease = None
    if _token_folder is not None:
        shutil.rmtree(_token_folder, ignore_errors=True)
        _token_folder = None
    if _auth_before is not None:
        local_ray.restore_auth(_auth_before)
        _auth_before = None


# Set by the `flopwatch` program (`pipeline.cli.entry`), whose process ends right after the
# command: a connection to a Ray that stays up then closes with the process.
_LEAVING_WITH_PROCESS = False


def leave_with_process() -> None:
    global _LEAVING_WITH_PROCESS
    _LEAVING_WITH_PROCESS = True


def shutdown(info: ClusterInfo) -> None:
    """Stop this driver's device slots (and their warm runners) and disconnect; a private local
    Ray stops with it, a cluster and flopwatch's kept local Ray stay up."""
    if ray.is_initialized() and not headwatch.lost():  # with the head gone there is nobody to ask
        slots.close_all()
    if info.mode == PRIVATE or (info.mode != EXISTING and not _LEAVING_WITH_PROCESS):
        ray.shutdown()
    headwatch.stop()
    if info.mode != EXISTING:  # an outer connect's Ray (a test's, a caller's): its token and lease are its own
        _release()


def run_options(kind: str) -> dict:
    """Ray options of a device slot of `kind` (see `pipeline.fleet.slots`)."""
    return slots.slot_options(kind)


@ray.remote(num_cpus=0)
def _probe_toolchains() -> dict:
    return build_stage.cached_toolchains()[0]


@ray.remote(num_cpus=1)
def _build(variant: dict, bundle: dict, build_hash: str, include_dirs: list,
           timeout_s: float | None = None) -> tuple[dict, dict]:
    result, artifact = build_stage.build_variant(Variant.from_dict(variant), bundle, build_hash, include_dirs,
                                                 timeout_s)
    return result.to_dict(), artifact


def probe_toolchains(timeout: float = 120) -> dict:
    return wait_probe(_probe_toolchains.remote(), timeout)


def probe_toolchains_async():
    """Start the toolchain probe; `wait_probe` collects it (so other start-up work overlaps it)."""
    return _probe_toolchains.remote()


def wait_probe(ref, timeout: float = 120) -> dict:
    return _answer(ref, timeout, "the toolchain probe on a build node")


def probe_device(info: ClusterInfo, kind: str, timeout: float = 300) -> dict:
    """Identity of the first device of `kind`, asked by its slot (which holds the device). A
    run's probe has it from the slot's start instead (`SlotPool.identity`), without this call."""
    pool = slots.pool(info.resources, persistent=info.kept)
    slot = pool.slots_of(kind)[0]
    return _answer(slot.actor.probe.remote(), timeout, f"the device probe of slot {slot.name}")


def _answer(ref, timeout: float, what: str):
    """A probe's answer; one line instead of Ray's traceback when none comes in time."""
    try:
        return ray.get(ref, timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        raise ClusterError(f"{what} did not answer in {timeout:g} s (the node may be overloaded or its "
                           f"worker stuck: `flopwatch doctor` shows the cluster)") from None


def submit_build(variant: Variant, bundle: dict, build_hash: str, include_dirs: tuple[str, ...],
                 timeout_s: float | None = None):
    """A build task holds one CPU: Ray runs as many compiles at once as the build nodes have
    cores (each compile is one compiler process per translation unit). `timeout_s`: the
    build's limit (`pipeline.project.config.Limits.build_timeout_s`)."""
    return _build.remote(variant.to_dict(), bundle, build_hash, list(include_dirs), timeout_s)
