"""Device slots: one Ray actor per device (a GPU, or a node's CPU timing slot), each hosting
the warm runner (`workers.job.zygote`) of that device, and the driver's dispatcher that feeds
every idle slot the next job of its kind.

Why actors: an actor holds its device for its whole life (`num_gpus=1` plus the flopwatch
resource), so Ray's CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES of that GPU is in the actor's
environment, the zygote started from it inherits it, and so does every job child it forks.
A Ray task per job would land in a worker process whose visible devices change from task to
task, and a warm process could not be kept per device. The driver, not Ray's queue, decides
which slot runs what: that is how a pinned job (the peer check on every GPU of a node) and
"no slot idles while work of its kind remains" are both possible.

A node lost mid-run: a call whose actor fails parks its job and stops feeding that slot; once
Ray's cluster view says the slot's node is dead (`settle`), the slot is dropped and its job is
queued once more for the slots of its kind on the other nodes, or given up as lost with the
node's id when no other node has a slot of that kind (or it was already retried once).

Kept slots: on a cluster the command does not own (one joined by address, or flopwatch's own
kept local Ray) the slots are named, detached actors that outlive the driver, so the next
command finds them with their runner warm and their probes answered (a joined cluster paid
8-18 s of probe per command before, issue 39). Their name holds the node's id, the device kind
and index, and a key of the flopwatch source and Ray version and of the cluster's token (a
digest: the token itself is never in a name), so a slot of another flopwatch or another token
is never reused. Such a slot is stopped by the next driver that finds it: it holds its
device's resource for ever, and left alone it would keep this driver's slot of that device
from ever starting. Only one flopwatch version drives a cluster at a time (CI installs the
default branch's driver), so what is stopped is an earlier version's.

A driver's probe of such a cluster is one read of its nodes, one lookup by name per slot, and
one call per slot, all sent at once (`SlotPool.start`): the call that finds where the slot is
also carries the device's identity (the first slot of each kind that has work) and the node's
toolchains (one slot), answered from memory by a slot found kept, and what the run says it
found and probed (`kept_summary`) is made from those answers. Asked apart, kind after kind,
with a second round of calls for the summary, a second driver's probe took 0.63 s on a 4-GPU
node with every answer in memory.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import heapq
import itertools
import json
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from pipeline.fleet.code_key import own_digest
from pipeline.fleet.ray_access import ClusterError
from pipeline.fleet.slot_resources import CPU_RESOURCE, GPU_RESOURCE  # noqa: F401 (slots.CPU_RESOURCE: read elsewhere)
from workers.core.process_age import process_age_s
from workers.core.records import BuildResult, Job, Variant
from workers.isolation import affinity
from workers.job import runner
from workers.measure import smi
from workers.measure.smi import visible_devices


def slot_options(kind: str) -> dict:
    """Ray options of the actor of one device slot of `kind`."""
    # A slot holds its device, not a core. Slots live for the whole run, and a core held by
    # each would be taken from the builds that stream beside the runs (on a 2-core node the
    # builds ran one at a time), and a node with fewer free cores than GPUs could not start all
    # its GPU slots. CPU timing is kept off the compilers by the driver instead: CPU jobs start
    # once the builds are done (`runflow._Stream`). Ray sets OMP_NUM_THREADS=1 for these
    # actors as it did for the one-CPU run tasks before; `--threads` sets torch's threads.
    if kind == "cpu":
        return {"num_cpus": 0, "resources": {CPU_RESOURCE: 1}}
    return {"num_cpus": 0, "num_gpus": 1, "resources": {GPU_RESOURCE[kind]: 1}}


def slot_count(resources: dict, kind: str) -> int:
    """How many slots of `kind` the cluster has: its flopwatch resource (GPUs are also bounded by `GPU`)."""
    if kind == "cpu":
        return int(resources.get(CPU_RESOURCE, 0))
    return int(min(resources.get(GPU_RESOURCE[kind], 0), resources.get("GPU", 0)))



# The most host threads a GPU job gets by default. Each job makes its inputs and checks on the
# host with torch, beside the next job's process preparing and the node's CPU slot. On a
# 32-core node with two H100s (docs/benchmarks.md, "Many GPUs"): one GPU's jobs took 100.2 s of
# device time with 32 threads and 100.1 s with 8; two GPUs' took 102.8 s with 16 threads each
# and 101.4 s with 8 (their checks and warm-ups waited less on the host).
GPU_JOB_MAX_THREADS = 8


def gpu_job_threads(cpus: float, gpus: float) -> int:
    """Host threads for a job on one of a node's GPUs: the node's cores over its GPUs, at most
    `GPU_JOB_MAX_THREADS`. Two GPUs' jobs each asking for every core slowed both by 5-17%."""
    return max(1, min(GPU_JOB_MAX_THREADS, int(cpus // max(1.0, gpus))))


def job_cpus(kind: str, env: dict, sysfs: str | Path = "/sys", proc: str | Path = "/proc") -> frozenset[int] | None:
    """The CPUs a GPU slot's processes are pinned to (`workers.isolation.affinity`): its GPU's
    local CPUs, shared with the other GPUs of that NUMA node. Its GPU is the one Ray's visible
    devices name (an index in bus-id order, or a UUID). None: not pinned (a CPU slot, a ROCm
    one, a GPU the driver's lists do not show, `FLOPWATCH_PIN_CPUS=0`)."""
    if kind != "cuda" or not affinity.wanted(env):
        return None
    gpus = smi.node_gpus(proc)
    row = smi.pick_row(gpus, token=smi.physical_token(smi.VENDORS[kind], env))
    if not row:
        return None
    return affinity.gpu_cpus(row["pci_bus_id"], [g["pci_bus_id"] for g in gpus], sysfs)


def pinned_threads(threads: int, cpus: frozenset[int] | None) -> int:
    """A GPU job's host threads, at most one per CPU its slot is pinned to."""
    return max(1, min(threads, len(cpus))) if cpus else threads


class DeviceSlot:
    """Ray actor body: one device, one zygote, one job at a time."""

    def __init__(self, kind: str, name: str, warm: bool = True, readying: bool = False):
        """`readying`: started by flopwatch's local Ray, which calls `prepare` next; a driver's
        first `describe` waits for that call, whichever of the two reaches the actor first."""
        self.kind, self.name, self.warm = kind, name, warm
        self._readied = threading.Event()
        if not readying:
            self._readied.set()
        self.zygote = None
        self._share: int | None = None  # host threads per GPU job on this node, asked once
        self._cpus: tuple | None = None  # (the CPUs its processes are pinned to, or None), found once
        # A slot kept between commands (flopwatch's own local Ray) answers these from memory:
        # its device does not change, and its node's toolchains only with their fingerprint.
        self._identity: dict | None = None
        # Its device's identity as its first measured job read it, for its next jobs to reuse.
        self._device_identity: dict | None = None
        self._toolchains: tuple[str, dict] | None = None
        self._making = threading.Lock()  # two calls run at once (`_Actor`): one makes the runner
        # Held by `prepare` (flopwatch's local Ray readying its slots as it starts): a driver's
        # `describe` waits for it, so no job starts beside the slot's probe.
        self._preparing = threading.Lock()
        self.prepared = False  # readied by `prepare` before any driver asked for it
        self.commands = 0  # drivers that asked for this slot (more than one: a kept slot was found)
        self.probes = 0  # device and toolchain probes this slot has run (a driver counts what it caused)
        self._counting = threading.Lock()  # the two probes of one `describe` run side by side
        self.toolchain_source = ""  # where its last toolchain answer came from: "cache" or "probed"
        # When this slot's start-up steps ended (epoch seconds; `timeline`): where a first
        # command's wait for its slots goes, step by step.
        self.marks: dict[str, float] = {"process": time.time() - (process_age_s() or 0.0), "actor": time.time()}
        if warm:
            # The runner starts with the actor, not with its first call: that call came 0.2-0.7 s
            # after the actor was up on a fresh 4-GPU node, and the runner's imports are the
            # longest step before the first job. `_warm` waits for it (a failure is raised there).
            threading.Thread(target=self._start_runner, name="flopwatch-runner-start", daemon=True).start()

    def _start_runner(self) -> None:
        try:
            self._ensure_runner()
        except Exception:  # noqa: BLE001 — `_warm` starts it again and raises what fails
            pass

    def _ensure_runner(self) -> None:
        with self._making:
            self._zygote().ensure_started()

    def _launcher(self, settings: dict):
        if not self.warm or settings.get("spawn_per_job"):
            return runner.spawn
        with self._making:
            return self._zygote().run

    def _zygote(self):
        if self.zygote is None:
            from workers.isolation import device_lock
            from workers.job.runner_process import ENV_SOCKET
            from workers.job.spare import ENV_KIND
            from workers.job.zygote import Zygote

            # A GPU slot's runner prepares each next job's process while a job runs (`workers.job.spare`);
            # the device lock keeps that out of timing loops and, held here, out of the profiler's run.
            if self.kind != "cpu" and not device_lock.path():
                os.environ[device_lock.ENV] = device_lock.new_path()
            self._job_cpus()
            # On flopwatch's local Ray the first runner may be one the head started before Ray (`workers.job.seed`).
            self.zygote = Zygote({**runner.child_env(), ENV_KIND: self.kind}, seeds=os.environ.get(ENV_SOCKET),
                                 code_key=own_digest())
        return self.zygote

    def describe(self, prewarm: bool = True, name: str | None = None, identity: bool = False,
                 toolchains: bool = False) -> dict:
        """Where this slot is and what its processes see (the test of the visible-devices path).
        Starts the zygote, so that its imports overlap the builds instead of the first job.
        `name`: this driver's name of the slot (a kept slot found again may have had another).
        `identity`, `toolchains`: also answer the device's identity (`probe`) and the node's
        toolchains (`toolchains`), from memory where already asked: a driver's whole probe is
        then one call per slot (`SlotPool.start`). "probed" counts the probes this call ran."""
        if name:
            self.name = name
        if prewarm:
            self.commands += 1
        # A slot the head is readying (`prepare`): wait for it, so its probes are the head's, not this call's.
        if prewarm:
            self._readied.wait(READYING_WAIT_S)
        with self._preparing if prewarm else contextlib.nullcontext():
            if prewarm:
                self._warm()
            before = self.probes
            answers = self._answers(identity, toolchains)
        return {"name": self.name, "kind": self.kind, "node_id": ray.get_runtime_context().get_node_id(),
                "visible": visible_devices(dict(os.environ)), "pid": os.getpid(),
                "zygote_starts": self.zygote.started if self.zygote else 0, "commands": self.commands,
                "probes": self.probes, "probed": self.probes - before, "prepared": self.prepared,
                "toolchain_source": self.toolchain_source, "marks": dict(self.marks), **answers}

    def _answers(self, identity: bool, toolchains: bool) -> dict:
        """The toolchains and the identity asked of `describe`, side by side (the toolchain probe
        runs the node's compilers, the device probe a child of the runner). A failure comes back
        as "<what>_error", its text as the driver would have read it: raised here, it would
        lose the slot's description with it and reach the driver as Ray's task error."""
        asks = [(key, what, ask) for key, what, ask, wanted in
                (("toolchains", "toolchain probe", self.toolchains, toolchains),
                 ("identity", "device probe", self.probe, identity)) if wanted]
        answers: dict = {}

        def answer(key: str, what: str, ask) -> None:
            try:
                answers[key] = ask()
            except Exception as exc:  # noqa: BLE001 (returned to the driver, which raises it)
                answers[f"{key}_error"] = str(exc) if isinstance(exc, RuntimeError) else \
                    f"{what} on {self.name} failed: {type(exc).__name__}: {exc}"

        beside = [threading.Thread(target=answer, args=ask, name="flopwatch-probe", daemon=True)
                  for ask in asks[1:]]
        for thread in beside:
            thread.start()
        if asks:
            answer(*asks[0])
        for thread in beside:
            thread.join()
        return answers

    def _warm(self) -> None:
        """Start the warm runner (the runner imports torch; the actor needs none: a job's byte
        counts come from `workers.ops.DTYPE_BYTES`, and the actor's own import only added a
        process importing torch beside each runner at a fresh node's start)."""
        if self.warm:
            self._ensure_runner()
            for step, at in self.zygote.marks.items():
                self.marks.setdefault(f"runner_{step}", at)

    def prepare(self, probe: bool = True, toolchains: bool = False) -> dict:
        """Ready this slot before any driver asks for it: the warm runner, the device's identity
        (`probe`) and the node's toolchains (`toolchains`, asked of one slot per node). Called by
        flopwatch's local Ray as it starts (`pipeline.fleet.local_ray.serve`), beside the first
        command's own start; not counted as a command. A failing probe is left for the
        driver's own call to report."""
        try:
            with self._preparing:
                self.prepared = True
                # The toolchain probe needs no runner: it runs beside the runner's start (on a
                # fresh 4-GPU node it answered 5 s after the runner was ready, and the first
                # command's builds wait for it). The device probe needs the runner.
                tools = threading.Thread(target=self._answers, args=(False, toolchains), daemon=True,
                                         name="flopwatch-toolchain-probe") if toolchains else None
                if tools is not None:
                    tools.start()
                self._warm()
                # A failure is left for the driver's own call to report.
                self._answers(probe, False)
                if tools is not None:
                    tools.join()
        finally:
            self._readied.set()
        return self.describe(False)

    def child_env_probe(self) -> dict:
        """What a job child forked by this slot's zygote sees: the visible-devices variables."""
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory(prefix="flopwatch-probe-") as tmp:
            outcome = self._launcher({})(["--env", "env.json"], 60.0, Path(tmp))
            data = json.loads((Path(tmp) / "env.json").read_text()) if (Path(tmp) / "env.json").exists() else {}
        return {"returncode": outcome.returncode, "pid_parent": os.getpid(), **data}

    def toolchains(self) -> dict:
        """The build toolchains of this slot's node (`workers.backends.build.toolchains`), probed again
        only when their fingerprint changed since the last probe."""
        from workers.backends import build

        mark = build.toolchain_fingerprint()
        if self._toolchains is None or self._toolchains[0] != mark:
            found, how = build.cached_toolchains()
            self.toolchain_source = how["source"]
            with self._counting:
                self.probes += how["source"] == "probed"
            self._toolchains = (mark, found)
            self.marks.setdefault("toolchains", time.time())
        return self._toolchains[1]

    def probe(self) -> dict:
        """The device's identity, asked once in a child of the warm runner (or a fresh process):
        the actor itself never creates a GPU context (it would hold device memory for the slot's
        whole life), and a fresh interpreter would pay `import torch` again."""
        if self._identity is None:
            with self._counting:
                self.probes += 1
            self._identity = self._probe()
            self.marks.setdefault("probe", time.time())
        return self._identity

    def _probe(self) -> dict:
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory(prefix="flopwatch-probe-") as tmp:
            out = Path(tmp) / "device.json"
            outcome = self._launcher({})(["--probe", self.kind, out.name], 300.0, Path(tmp))
            if not out.exists():
                raise RuntimeError(f"device probe on {self.name} failed ({outcome.signal_name or outcome.returncode}): "
                                   f"{outcome.stderr_tail.strip()[-2000:]}")
            return {**json.loads(out.read_text()), "slot": self.name}

    def _job_settings(self, settings: dict) -> dict:
        """A GPU job's settings with its share of the host's cores, unless `--threads` was given,
        and its device's identity once a job of this slot has read it (`device.reusable_identity`)."""
        if self.kind == "cpu":
            return settings
        known = {"device_identity": self._device_identity} if self._device_identity else {}
        if settings.get("threads"):
            return {**settings, **known}
        return {**settings, **known, "threads": pinned_threads(self._cpu_share(), self._job_cpus())}

    def _job_cpus(self) -> frozenset[int] | None:
        """The CPUs of this slot's jobs (`job_cpus`), found once and named to the processes it
        starts (`affinity.ENV_CPUS`): its warm runner pins itself to them, and its jobs inherit them."""
        if self._cpus is None:
            cpus = job_cpus(self.kind, dict(os.environ))
            self._cpus = (cpus,)
            if cpus:
                os.environ[affinity.ENV_CPUS] = affinity.format_cpulist(cpus)
            else:
                os.environ.pop(affinity.ENV_CPUS, None)
        return self._cpus[0]

    def _cpu_share(self) -> int:
        if self._share is None:
            node = ray.get_runtime_context().get_node_id()
            res = next((n["Resources"] for n in ray.nodes() if n.get("NodeID") == node), {})
            self._share = gpu_job_threads(res.get("CPU", os.cpu_count() or 1), res.get("GPU", 1.0))
        return self._share

    def run(self, job: dict, variant: dict, build: dict, artifact: dict, settings: dict) -> dict:
        started_at = time.time()
        settings = self._job_settings(settings)
        result = runner.execute_job(Job.from_dict(job), Variant.from_dict(variant), BuildResult.from_dict(build),
                                    artifact, settings, self._launcher(settings))
        return self._measured_here(result, started_at)

    def run_batch(self, jobs: list, variant: dict, build: dict, artifact: dict, settings: dict) -> list[dict]:
        """The jobs of one variant in one process of this slot (`workers.job.batch`)."""
        from workers.job.batch import execute_batch

        started_at = time.time()
        settings = self._job_settings(settings)
        results = execute_batch([Job.from_dict(j) for j in jobs], Variant.from_dict(variant),
                                BuildResult.from_dict(build), artifact, settings, self._launcher(settings))
        return [self._measured_here(r, started_at) for r in results]

    def _measured_here(self, result, started_at: float) -> dict:
        """`result` as a record, with which Ray node and which slot measured it (where a number
        came from) and when this slot's call began."""
        d = result.to_dict()
        if self.kind != "cpu" and self._device_identity is None and (d["device_info"] or {}).get("uuid"):
            from workers.measure.device import reusable_identity

            self._device_identity = reusable_identity(d["device_info"])
        d["device_info"] = {**d["device_info"], "ray_node_id": ray.get_runtime_context().get_node_id(),
                            "slot": self.name, "cpus": affinity.format_cpulist(self._job_cpus() or ())}
        d["phases"] = {**d["phases"], "started_at": started_at}
        return d

    def run_pair(self, job: dict, variants: list, artifact_a: dict, artifact_b: dict, settings: dict) -> dict:
        settings = self._job_settings(settings)
        return runner.execute_pair(Job.from_dict(job), tuple(Variant.from_dict(v) for v in variants),
                                   (artifact_a, artifact_b), settings, self._launcher(settings))

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()


# How long a driver's first call waits for the head's `prepare` of a slot it started (the
# driver's own wait for its slots is as long: 600 s).
READYING_WAIT_S = 600.0

# Two calls at a time: a GPU slot's runner holds the next job while one runs (`SlotPool.depth`).
_Actor = ray.remote(max_restarts=-1, max_task_retries=0, max_concurrency=2)(DeviceSlot)

OVERLAP_ENV = "FLOPWATCH_OVERLAP"  # "0": one job per GPU slot at a time (to measure what overlap saves)


def overlap_wanted(env: dict) -> bool:
    return env.get(OVERLAP_ENV) != "0"


# A slot whose actor failed while its node still looks alive is given this long to answer
# again (an actor restarted by Ray on the same node answers in seconds) before it counts as lost.
# Ray's own health check declares a silent node dead after about 15 s.
UNREACHABLE_S = 120.0


@dataclass
class Slot:
    kind: str
    name: str
    actor: object
    node_id: str = ""
    visible: dict = field(default_factory=dict)
    running: int = 0  # calls handed to it and not yet finished
    pinned: deque = field(default_factory=deque)
    # Set when a call on this slot failed in Ray (not in the job): no work is handed to it
    # until `settle` knows whether its node is gone or the actor is back.
    suspect_since: float | None = None
    parked: list = field(default_factory=list)  # the calls that failed on it, waiting for that verdict
    ping: object = None  # a describe() call: answered means the actor is back
    # The calls handed to it and not finished, oldest (running) first, and when they are
    # expected to be done (the pool's clock; from the calls' expected costs).
    held: list = field(default_factory=list)
    busy_until: float = 0.0
    found: bool = False  # a kept slot an earlier driver started
    prepared: bool = False  # a kept slot flopwatch's local Ray readied as it started, first asked by this driver
    probed: bool = False  # a device or toolchain probe ran on it for this driver
    toolchain_source: str = ""  # where its node's toolchains came from, as its last answer said
    # What its describe calls answered of the probes: "identity", "toolchains", or "<that>_error".
    answers: dict = field(default_factory=dict)
    marks: dict = field(default_factory=dict)  # when its start-up steps ended (`DeviceSlot.marks`), epoch seconds


ANSWERS = ("identity", "identity_error", "toolchains", "toolchains_error")


@dataclass
class _Pending:
    method: str
    args: tuple
    tag: object
    enqueued_at: float
    cost_s: float = 0.0
    work: float = 0.0
    retried: bool = False
    first: bool = False


@dataclass(frozen=True)
class GivenUp:
    """A call that will not run: its slot's node was lost and no other slot could take it
    (`tag` as submitted; `slot` and `node_id` where it was running, empty for a call that was
    still queued; `reason` in words, naming the lost node)."""

    tag: object
    slot: str
    node_id: str
    reason: str


class SlotPool:
    """The driver's side: slots per kind, a queue per kind, pinned queues per slot.

    `submit` queues a call; it starts at once on an idle slot of its kind. `finished(ref)`
    releases the slot of a completed call and starts the next queued one there, so no slot
    idles while work of its kind remains. A slot takes its pinned work before the shared queue.
    The shared queue hands out the longest expected job first (`cost_s`, ties in arrival order):
    longest-processing-time-first scheduling, so that a 30 s job does not start last on one GPU
    while the others have nothing left to do (a 2-GPU run ended 4 s apart before this). A slot
    takes a second call to hold behind its running one only when no other slot is expected to be
    free sooner: a short call must not wait behind a long one while another card idles (on 8
    slots with few calls, the slot of the longest job took a second call in the first round).
    `pipeline.run.schedule.replay` runs this pool with expected costs to predict a run's wall."""

    def __init__(self, resources: dict, warm: bool = True, make_actor=None, persistent: bool = False, view=None,
                 clock=time.monotonic):
        self.resources = resources
        self.warm = warm
        # Persistent slots outlive the command (a joined cluster, flopwatch's own kept local
        # Ray): detached, named actors that the next command finds with their warm runner,
        # device identity and toolchain probe ready (module docstring, "Kept slots").
        self.persistent = persistent
        self.stopped_stale = 0  # kept slots of another flopwatch or token that this driver stopped
        self._stale_checked = False
        # What starting and probing the slots cost (`kept_summary`): the calls made to them (one
        # per slot: its describe call carries the probes, `start`), the seconds spent finding or
        # creating the kept slots by name, and those the driver waited for the slots' answers.
        self.calls = 0
        self.lookup_s = 0.0
        self.answer_s = 0.0
        self._make_actor = make_actor or self._ray_actor
        self.slots: dict[str, list[Slot]] = {}
        self._starting: dict[str, tuple] = {}  # kind -> (slots, their describe calls, kept): `start`
        self.queues: dict[str, list] = {}  # heaps of (not first, -cost, -work, arrival, pending)
        self._arrival = itertools.count()
        self._held = False
        self.inflight: dict = {}  # ref -> (slot, pending)
        self.dispatched: list[tuple[str, object]] = []  # (slot name, tag) in dispatch order
        # Nodes whose slots were dropped, in the order they were found lost: {"node_id", "slots",
        # "retried", "given_up"}; a run reports the ones lost while it ran.
        self.lost_nodes: list[dict] = []
        self.view = view or RayView()
        self.clock = clock  # for when held calls are expected to end (a replay gives its own)
        # Whether GPU slots hold a second call (`depth`); a command turns it off where a job's
        # end must not overlap the next job's start (the profiler runs after its job's child).
        self.overlap = overlap_wanted(dict(os.environ))

    def _ray_actor(self, kind: str, name: str, warm: bool):
        return _Actor.options(**slot_options(kind), name=None).remote(kind, name, warm)

    def kept_slots(self, kinds, readying: bool = False) -> dict[str, list[Slot]]:
        """{kind: its kept slots} (`_kept_slots`), the cluster's nodes read once for all the
        kinds, after the stale slots are stopped (once per pool). `readying`: the caller
        (flopwatch's local Ray) calls `prepare` on each next (`DeviceSlot`)."""
        began = time.perf_counter()
        nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeID"])
        self._stop_stale(nodes)
        made = {kind: self._kept_slots(kind, nodes, readying) for kind in kinds}
        self.lookup_s += time.perf_counter() - began
        return made

    def _kept_slots(self, kind: str, nodes: list[dict], readying: bool = False) -> list[Slot]:
        """The kept slots of `kind` on these live nodes, node by node: found where an earlier
        driver of this key left them, else started there (pinned to the node, so that the name
        tells where it is). Each is a lookup by name in the cluster's control store."""
        key, made = kept_key(), []
        for node in nodes:
            for i in range(slot_count(node.get("Resources", {}), kind)):
                name = f"{kind}/{len(made)}"
                here = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
                actor = _Actor.options(**slot_options(kind), name=kept_name(key, node["NodeID"], kind, i, self.warm),
                                       namespace=KEPT_NAMESPACE, lifetime="detached", get_if_exists=True,
                                       scheduling_strategy=here).remote(kind, name, self.warm, readying)
                made.append(Slot(kind, name, actor))
        return made

    def _stop_stale(self, nodes: list[dict]) -> None:
        """Stop the kept slots of another key, or of a node not among the live `nodes` (once per pool)."""
        if self._stale_checked:
            return
        self._stale_checked = True
        ours = f"{KEPT_PREFIX}{kept_key()}-"
        alive = {n["NodeID"][:NODE_CHARS] for n in nodes}
        for name in ray.util.list_named_actors():  # this driver's namespace, flopwatch's
            if not name.startswith(KEPT_PREFIX) or (name.startswith(ours) and
                                                     name[len(ours):len(ours) + NODE_CHARS] in alive):
                continue
            try:
                ray.kill(ray.get_actor(name, namespace=KEPT_NAMESPACE), no_restart=True)
                self.stopped_stale += 1
            except ValueError:  # gone meanwhile
                pass

    def start(self, kinds, identify=(), toolchains: bool = False) -> None:
        """Start the slots of these kinds at once without waiting for them (`slots_of` waits):
        asked one kind after the other, a node's CPU slot and then its GPU slots each paid a
        worker's start, `import torch` and a zygote in turn (issue 39).

        Each slot gets one call, which also carries what the driver needs of it: the device's
        identity from the first slot of each kind in `identify`, the node's toolchains from
        the first slot of `toolchain_kind` when `toolchains` (`identity`, `toolchains` read
        the answers). Asked apart, kind after kind, they were round trips a kept cluster's
        driver paid on every command (module docstring, "Kept slots")."""
        new = [k for k in dict.fromkeys(kinds) if k not in self.slots and k not in self._starting]
        if not new:
            return
        real = self._make_actor == self._ray_actor
        if self.persistent and real:
            made = self.kept_slots(new)
        else:
            made = {kind: [Slot(kind, f"{kind}/{i}", self._make_actor(kind, f"{kind}/{i}", self.warm))
                           for i in range(slot_count(self.resources, kind))] for kind in new}
        # Asking also starts the actors; each on its node with its devices. Stand-in actors (a
        # replay's, a test's) are asked only when a probe is wanted of them.
        ask = real or bool(identify) or toolchains
        for kind in new:
            refs = [self._describe(s, True, s.name, kind in identify and i == 0,
                                   toolchains and kind == self.toolchain_kind() and i == 0)
                    for i, s in enumerate(made[kind])] if ask else []
            self._starting[kind] = (made[kind], refs, self.persistent and real)

    def _describe(self, slot: Slot, *args):
        """A describe call to `slot` (`DeviceSlot.describe`), counted in `calls`."""
        self.calls += 1
        return slot.actor.describe.remote(*args)

    def _answered(self, refs: list, timeout: float) -> list[dict]:
        """The answers of describe calls; the wait is counted in `answer_s`."""
        began = time.perf_counter()
        try:
            return self.view.results(refs, timeout)
        finally:
            self.answer_s += time.perf_counter() - began

    def slots_of(self, kind: str) -> list[Slot]:
        if kind not in self.slots:
            self.start([kind])
            made, refs, kept = self._starting.pop(kind)
            if refs:
                try:
                    described = self._answered(refs, 600)
                except ray.exceptions.GetTimeoutError:
                    raise RuntimeError(f"the {len(made)} {kind} device slot(s) of the cluster did not all start in "
                                       f"600 s (resources {self.resources})") from None
                for slot, d in zip(made, described):
                    slot.node_id, slot.visible = d["node_id"], d["visible"]
                    slot.found = kept and d["commands"] > 1
                    slot.prepared = kept and d.get("prepared", False) and d["commands"] == 1
                    _take(slot, d)
            self.slots[kind] = made
            self.queues[kind] = []
        return self.slots[kind]

    def identity(self, kind: str) -> dict:
        """The identity of the first device of `kind` (what `DeviceSlot.probe` returns), as its
        slot answered it in `start`, else asked of it now. Its probe's failure is raised here,
        where the identity is needed ("device probe on ... failed (...): ...")."""
        return self._answer(self.slots_of(kind)[0], "identity", "device probe", 300)

    def toolchains(self) -> dict:
        """The toolchains of the node of the first slot of `toolchain_kind` (a kept slot answers
        from memory between commands), as it answered them in `start`, else asked of it now."""
        return self._answer(self.slots_of(self.toolchain_kind())[0], "toolchains", "toolchain probe", 120)

    def _answer(self, slot: Slot, key: str, what: str, timeout: float) -> dict:
        if key not in slot.answers and f"{key}_error" not in slot.answers:  # not asked when it started
            ref = self._describe(slot, False, None, key == "identity", key == "toolchains")
            try:
                (d,) = self._answered([ref], timeout)
            except ray.exceptions.GetTimeoutError:
                raise ClusterError(f"the {what} of slot {slot.name} did not answer in {timeout:g} s (the "
                                   f"node may be overloaded or its worker stuck: `flopwatch doctor` shows "
                                   f"the cluster)") from None
            _take(slot, d)
        if f"{key}_error" in slot.answers:
            raise RuntimeError(slot.answers[f"{key}_error"])
        return slot.answers[key]

    def submit(self, kind: str, method: str, args: tuple, tag, slot: Slot | None = None,
               cost_s: float = 0.0, work: float = 0.0, first: bool = False) -> None:
        """`cost_s`: the job's expected device seconds (from its last stored run; 0 if unknown);
        `work`: its FLOPs or bytes, which orders jobs of unknown cost (a larger shape first);
        `first`: ahead of the longest (the peer check's reference: its result starts the
        re-times on the other slots, which must not come last)."""
        pending = _Pending(method, args, tag, time.time(), cost_s, work, first=first)
        if slot is not None:
            slot.pinned.append(pending)
        else:
            self.slots_of(kind)
            self._queue(kind, pending)
        self._dispatch(kind)

    def _queue(self, kind: str, pending: _Pending) -> None:
        heapq.heappush(self.queues[kind], (not pending.first, -pending.cost_s, -pending.work, next(self._arrival),
                                           pending))

    @contextlib.contextmanager
    def held(self):
        """Queue without dispatching until the block ends, so that work submitted together
        (every job of cached builds) is handed out longest first, not in submission order."""
        self._held = True
        try:
            yield
        finally:
            self._held = False
            for kind in list(self.slots):
                self._dispatch(kind)

    def refs(self) -> list:
        return list(self.inflight)

    def has_work(self) -> bool:
        """Calls in flight, parked on a suspect slot, or queued: the driver's loop goes on."""
        return bool(self.inflight or any(s.parked or s.pinned for slots in self.slots.values() for s in slots)
                    or any(self.queues.values()))

    def finished(self, ref) -> tuple[object, float, Slot]:
        """Release the slot of a completed call; returns (tag, enqueued_at, slot). When the call
        failed in Ray itself (its actor died or cannot be reached), the call is parked and the
        tag returned is None: `settle` decides later whether it runs again elsewhere."""
        slot, pending = self.inflight.pop(ref)
        slot.running -= 1
        slot.held.remove(pending)
        # The call after it began now: the slot is expected free once what it still holds is done.
        slot.busy_until = self.clock() + sum(p.cost_s for p in slot.held)
        if self.view.call_failed(ref):
            slot.suspect_since = slot.suspect_since or time.monotonic()
            slot.parked.append(pending)
            return None, pending.enqueued_at, slot
        self._dispatch(slot.kind)
        return pending.tag, pending.enqueued_at, slot

    def settle(self) -> list[GivenUp]:
        """Decide about the slots whose calls failed: a slot whose node is dead (or that has not
        answered for `UNREACHABLE_S`) is dropped and its calls are queued once more for the
        other slots of their kind; an actor that answers again gets its calls back. Returns the
        calls that will not run, including queued work of a kind no slot is left for."""
        given_up: list[GivenUp] = []
        alive = None
        for kind, slots in list(self.slots.items()):
            for slot in [s for s in slots if s.suspect_since is not None]:
                alive = alive if alive is not None else self.view.nodes_alive()
                if slot.node_id and alive.get(slot.node_id) is False:
                    given_up += self._drop(slot, f"node {slot.node_id} was lost")
                elif self._answers(slot):
                    slot.suspect_since = None
                    for pending in slot.parked:  # the actor restarted on a live node: run them again, once
                        given_up += self._retry(slot, pending, f"slot {slot.name} failed twice")
                    slot.parked.clear()
                elif time.monotonic() - slot.suspect_since > UNREACHABLE_S:
                    given_up += self._drop(slot, f"slot {slot.name} on node {slot.node_id} did not answer "
                                                 f"for {UNREACHABLE_S:g} s")
            if not slots:  # nothing can run this kind any more
                for *_, pending in self.queues.get(kind, ()):
                    lost = self.lost_nodes[-1]["node_id"] if self.lost_nodes else ""
                    given_up.append(GivenUp(pending.tag, "", "", f"no node with a {kind} slot is left "
                                                                 f"(node {lost} was lost)"))
                self.queues[kind] = []
            self._dispatch(kind)
        return given_up

    def _answers(self, slot: Slot) -> bool:
        if slot.ping is None:
            slot.ping = slot.actor.describe.remote(False)
        answer = self.view.answered(slot.ping)
        if answer is not None:
            slot.ping = None
        return bool(answer)

    def _drop(self, slot: Slot, why: str) -> list[GivenUp]:
        """Take a lost slot out of the pool; its parked calls go to another slot of the kind."""
        self.slots[slot.kind].remove(slot)
        self.view.kill(slot.actor)
        record = next((n for n in self.lost_nodes if n["node_id"] == slot.node_id), None)
        if record is None:
            record = {"node_id": slot.node_id, "slots": [], "retried": 0, "given_up": 0}
            self.lost_nodes.append(record)
        record["slots"].append(slot.name)
        given_up = []
        for pending in slot.parked:
            given_up += self._retry(slot, pending, why)
        record["retried"] += len(slot.parked) - len(given_up)
        record["given_up"] += len(given_up)
        # Pinned work belongs to that one slot (the peer check of its device): it has no other place.
        given_up += [GivenUp(p.tag, slot.name, slot.node_id, why) for p in slot.pinned]
        slot.parked.clear()
        slot.pinned.clear()
        return given_up

    def _retry(self, slot: Slot, pending: _Pending, why: str) -> list[GivenUp]:
        """Queue a failed call once more for the live slots of its kind, or give it up."""
        if pending.retried or not self.slots.get(slot.kind):
            return [GivenUp(pending.tag, slot.name, slot.node_id,
                            why + ("; it had already been retried once" if pending.retried
                                   else f"; no other node has a {slot.kind} slot"))]
        pending.retried = True
        self._queue(slot.kind, pending)
        return []

    def _dispatch(self, kind: str) -> None:
        if self._held:
            return
        depth = self.depth(kind)
        # Round by round, so that two idle slots each get one of the longest jobs before either
        # gets its second; rounds go on while one hands something out (a slot that let a call
        # go to a slot expected free sooner may take the next one).
        handed = True
        while handed:
            handed = False
            for slot in self.slots_of(kind):
                if slot.running >= depth or slot.suspect_since is not None:
                    continue
                if slot.pinned:
                    pending = slot.pinned.popleft()
                elif self.queues[kind] and not (slot.running and self._later_than_another(slot, kind)):
                    pending = heapq.heappop(self.queues[kind])[-1]
                else:
                    continue
                slot.running += 1
                handed = True
                slot.held.append(pending)
                slot.busy_until = max(self.clock(), slot.busy_until) + pending.cost_s
                ref = getattr(slot.actor, pending.method).remote(*pending.args)
                self.inflight[ref] = (slot, pending)
                self.dispatched.append((slot.name, pending.tag))

    def _later_than_another(self, slot: Slot, kind: str) -> bool:
        """Would a call held behind this slot's running one start later than on another slot?"""
        others = [s.busy_until for s in self.slots[kind] if s is not slot and s.suspect_since is None]
        return bool(others) and slot.busy_until > min(others) + 1e-9

    def depth(self, kind: str) -> int:
        """Calls in flight per slot of `kind`: a GPU slot holds the next job while one runs
        (`workers.job.handoff`: its runner starts it when the running job has timed), unless
        `overlap` is off; a CPU slot runs one job at a time (CPU timings share the host's cores)."""
        return 2 if self.overlap and kind != "cpu" else 1

    def idle_while_queued(self) -> list[str]:
        """Slots that have room although work of their kind waits (always empty: the invariant)."""
        return [s.name for kind, slots in self.slots.items() for s in slots
                if s.running < self.depth(kind) and s.suspect_since is None and (s.pinned or self.queues[kind])]

    def close(self) -> None:
        """Stop the slots of this command; persistent ones stay for the next command."""
        starting = [made for made, _, _ in self._starting.values()]
        self._starting.clear()
        for slots in [*self.slots.values(), *starting]:
            for s in slots:
                if self.persistent:
                    continue
                try:
                    ray.kill(s.actor)
                except Exception:  # an actor of a cluster already gone
                    pass
        self.slots.clear()

    def toolchain_kind(self) -> str | None:
        """The kind of the slot a kept cluster's toolchain probe is asked of: CPU, else a GPU."""
        return next((k for k in ("cpu", "cuda", "rocm") if slot_count(self.resources, k) >= 1), None)

    def toolchains_from_slot(self) -> bool:
        """Whether a slot answers the toolchain probe (`toolchains`): a kept one (a CPU slot, else
        a GPU one: it answers from memory between commands); if not, the caller runs the probe task."""
        return self.persistent and self.toolchain_kind() is not None

    def kept_summary(self) -> dict:
        """What this driver found of the kept slots and what it had probed: {"slots", "found",
        "nodes" (those found on), "probed" (slots whose probe ran for this driver), "stopped"
        (stale slots stopped), "calls" (made to the slots to start and probe them), "lookup_s"
        (finding them by name), "answer_s" (waiting for their answers)}. From the slots' own
        answers to this driver's calls: it asks nothing more."""
        made = [s for kind in self.slots.values() for s in kind]
        if not made:
            return {}
        summary = {"slots": len(made), "found": sum(s.found for s in made),
                   "nodes": len({s.node_id for s in made if s.found}), "probed": sum(s.probed for s in made),
                   "stopped": self.stopped_stale, "calls": self.calls, "lookup_s": round(self.lookup_s, 3),
                   "answer_s": round(self.answer_s, 3)}
        if any(s.prepared for s in made):
            summary["prepared"] = sum(s.prepared for s in made)
        sources = sorted({s.toolchain_source for s in made if s.toolchain_source})
        if sources:
            summary["toolchains"] = "/".join(sources)
        marks = {s.name: s.marks for s in made if s.marks}
        if marks:
            summary["marks"] = marks
        return summary


KEPT_PREFIX, KEPT_NAMESPACE = "flopwatch-slot-", "flopwatch"
NODE_CHARS = 16  # of a node id in a kept slot's name (56 hex digits in all; 16 tell nodes apart)


def kept_name(key: str, node_id: str, kind: str, index: int, warm: bool) -> str:
    return f"{KEPT_PREFIX}{key}-{node_id[:NODE_CHARS]}-{kind}-{index}-{'warm' if warm else 'cold'}"


def kept_key(env=None) -> str:
    """The part of a kept slot's name that must match for a driver to use it: the flopwatch
    source (driver and node code) with Ray's version, and the cluster's token, each as a digest."""
    return f"v{_code_key()}t{token_digest(env)}"


@functools.cache
def _code_key() -> str:
    return hashlib.sha256(f"{own_digest()}\0{ray.__version__}".encode()).hexdigest()[:10]


def token_digest(env=None) -> str:
    """A digest of the token this driver presents, found where Ray looks (RAY_AUTH_TOKEN, else
    the file RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token), or "none" without token mode. Only
    the digest leaves this function (a slot's name holds it); the token is never printed,
    stored or named."""
    env = os.environ if env is None else env
    if env.get("RAY_AUTH_MODE") != "token":
        return "none"
    token = env.get("RAY_AUTH_TOKEN", "")
    if not token:
        path = env.get("RAY_AUTH_TOKEN_PATH") or os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
        try:
            with open(path) as handle:
                token = handle.read()
        except OSError:
            token = ""
    return hashlib.sha256(b"flopwatch kept slot\0" + token.strip().encode()).hexdigest()[:10]


def kept_line(summary: dict) -> str:
    """The run's phase line of its kept slots: "slots: 1 found on 1 node, 0 probed"; a slot that
    flopwatch's local Ray readied as it started is "prepared", and where the slots' toolchains
    came from is named ("toolchains from the cache" or "probed")."""
    new = summary["slots"] - summary["found"]
    nodes = f"{summary['nodes']} node" + ("s" if summary["nodes"] != 1 else "")
    line = f"slots: {summary['found']} found on {nodes}" + (f", {new} started" if new else "")
    if summary.get("prepared"):
        line += f" ({summary['prepared']} readied and probed as flopwatch's local Ray started)"
    line += f", {summary['probed']} probed"
    # A slot found kept answers from memory: where its toolchains once came from is not this command's
    if summary.get("toolchains") and (new or summary["probed"] or summary.get("prepared")):
        line += f"; toolchains {'from the cache' if summary['toolchains'] == 'cache' else summary['toolchains']}"
    if summary.get("stopped"):
        line += f"; {summary['stopped']} kept slot(s) of another flopwatch version or token stopped"
    return line


def _take(slot: Slot, described: dict) -> None:
    """What a slot's describe answer says of its probes: their answers, whether one ran for
    this driver, where its toolchains came from."""
    slot.probed = slot.probed or described.get("probed", 0) > 0
    slot.toolchain_source = described.get("toolchain_source", "")
    slot.marks = described.get("marks") or slot.marks
    slot.answers.update({key: described[key] for key in ANSWERS if key in described})


class RayView:
    """What the pool asks Ray about its slots: their answers and health (a stand-in replaces
    it in unit tests)."""

    @staticmethod
    def results(refs: list, timeout: float) -> list:
        """The values of these calls, in order (Ray's GetTimeoutError past `timeout`)."""
        return ray.get(refs, timeout=timeout)

    @staticmethod
    def call_failed(ref) -> bool:
        """Did this finished call fail in Ray itself (its actor died or cannot be reached),
        rather than return a value or raise in the job's code?"""
        if not isinstance(ref, ray.ObjectRef):
            return False
        try:
            ray.get(ref, timeout=0)
        # Unschedulable: a kept slot is pinned to its node, so with the node gone Ray cannot
        # restart it anywhere (an unpinned actor would be restarting: RayActorError).
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError):
            return True
        except Exception:
            return False
        return False

    @staticmethod
    def nodes_alive() -> dict[str, bool]:
        """{node id: alive} as the cluster's control store sees it now."""
        return {n["NodeID"]: bool(n.get("Alive")) for n in ray.nodes()}

    @staticmethod
    def answered(ref) -> bool | None:
        """None while a call runs; then whether it returned (rather than failed in Ray)."""
        if not ray.wait([ref], timeout=0)[0]:
            return None
        return not RayView.call_failed(ref)

    @staticmethod
    def kill(actor) -> None:
        try:
            ray.kill(actor, no_restart=True)  # Ray would otherwise wait for the lost node forever
        except Exception:  # the actor is already gone with its node
            pass


_POOL: dict = {}


def pool(resources: dict, warm: bool = True, persistent: bool = False) -> SlotPool:
    """The pool of this driver's Ray connection: the slots (and their warm runners) live across
    the commits of one command (compare, bisect, nightly) instead of starting per commit, and
    across commands when `persistent`. A cluster whose resources changed (a node lost or added)
    gets a fresh pool."""
    ctx = ray.get_runtime_context()
    key = (ctx.get_node_id(), ctx.get_job_id(), warm, persistent)
    if key in _POOL and _POOL[key].resources != resources:
        close_all()
    if key not in _POOL:
        close_all()
        _POOL[key] = SlotPool(resources, warm, persistent=persistent)
    return _POOL[key]


def close_all() -> None:
    for p in _POOL.values():
        p.close()
    _POOL.clear()
