"""Device slots: one Ray actor per device (a GPU, or a node's CPU timing slot), each hosting
the warm runner (`workers.zygote`) of that device, and the driver's dispatcher that feeds
every idle slot the next job of its kind.

Why actors: an actor holds its device for its whole life (`num_gpus=1` plus the flopwatch
resource), so Ray's CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES of that GPU is in the actor's
environment, the zygote started from it inherits it, and so does every job child it forks.
A Ray task per job would land in a worker process whose visible devices change from task to
task, and a warm process could not be kept per device. The driver, not Ray's queue, decides
which slot runs what: that is how a pinned job (the peer check on every GPU of a node) and
"no slot idles while work of its kind remains" are both possible.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import os
import time
from collections import deque
from dataclasses import dataclass, field

import ray

from workers import runner
from workers.records import BuildResult, Job, Variant
from workers.smi import visible_devices

CPU_RESOURCE = "flopwatch_cpu"
GPU_RESOURCE = {"cuda": "flopwatch_cuda", "rocm": "flopwatch_rocm"}


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


class DeviceSlot:
    """Ray actor body: one device, one zygote, one job at a time."""

    def __init__(self, kind: str, name: str, warm: bool = True):
        self.kind, self.name, self.warm = kind, name, warm
        self.zygote = None
        self._share: int | None = None  # host threads per GPU job on this node, asked once
        # A slot kept between commands (flopwatch's own local Ray) answers these from memory:
        # its device does not change, and its node's toolchains only with their fingerprint.
        self._identity: dict | None = None
        self._toolchains: tuple[str, dict] | None = None

    def _launcher(self, settings: dict):
        if not self.warm or settings.get("spawn_per_job"):
            return runner.spawn
        if self.zygote is None:
            from workers.zygote import Zygote

            self.zygote = Zygote(runner.child_env())
        return self.zygote.run

    def describe(self, prewarm: bool = True) -> dict:
        """Where this slot is and what its processes see (the test of the visible-devices path).
        Starts the zygote, so that its imports overlap the builds instead of the first job."""
        if prewarm:
            import torch  # noqa: F401  (the runner's dtype sizes: not on the first job's clock; no device touched)

            if self.warm:
                self._launcher({})
                if not self.zygote.alive():
                    self.zygote.start()
        return {"name": self.name, "kind": self.kind, "node_id": ray.get_runtime_context().get_node_id(),
                "visible": visible_devices(dict(os.environ)), "pid": os.getpid(),
                "zygote_starts": self.zygote.started if self.zygote else 0}

    def child_env_probe(self) -> dict:
        """What a job child forked by this slot's zygote sees: the visible-devices variables."""
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory(prefix="flopwatch-probe-") as tmp:
            outcome = self._launcher({})(["--env", "env.json"], 60.0, Path(tmp))
            data = json.loads((Path(tmp) / "env.json").read_text()) if (Path(tmp) / "env.json").exists() else {}
        return {"returncode": outcome.returncode, "pid_parent": os.getpid(), **data}

    def toolchains(self) -> dict:
        """The build toolchains of this slot's node (`workers.build.toolchains`), probed again
        only when their fingerprint changed since the last probe."""
        from workers import build

        mark = build.toolchain_fingerprint()
        if self._toolchains is None or self._toolchains[0] != mark:
            self._toolchains = (mark, build.toolchains())
        return self._toolchains[1]

    def probe(self) -> dict:
        """The device's identity, asked once in a child of the warm runner (or a fresh process):
        the actor itself never creates a GPU context (it would hold device memory for the slot's
        whole life), and a fresh interpreter would pay `import torch` again."""
        if self._identity is None:
            self._identity = self._probe()
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

    def _with_host_threads(self, settings: dict) -> dict:
        """A GPU job's settings with its share of the host's cores, unless `--threads` was given."""
        if self.kind == "cpu" or settings.get("threads"):
            return settings
        return {**settings, "threads": self._cpu_share()}

    def _cpu_share(self) -> int:
        """Host threads for a job on this GPU: the node's cores over its GPUs. Each job makes its
        inputs and checks on the host with torch; two GPUs' jobs each asking for every core
        slowed both by 5-17% on a 2-GPU node."""
        if self._share is None:
            node = ray.get_runtime_context().get_node_id()
            res = next((n["Resources"] for n in ray.nodes() if n.get("NodeID") == node), {})
            self._share = max(1, int(res.get("CPU", os.cpu_count() or 1) // max(1.0, res.get("GPU", 1.0))))
        return self._share

    def run(self, job: dict, variant: dict, build: dict, artifact: dict, settings: dict) -> dict:
        started_at = time.time()
        settings = self._with_host_threads(settings)
        result = runner.execute_job(Job.from_dict(job), Variant.from_dict(variant), BuildResult.from_dict(build),
                                    artifact, settings, self._launcher(settings)).to_dict()
        # Which Ray node and which slot measured it: the record of where a number came from.
        result["device_info"] = {**result["device_info"], "ray_node_id": ray.get_runtime_context().get_node_id(),
                                 "slot": self.name}
        result["phases"] = {**result["phases"], "started_at": started_at}
        return result

    def run_pair(self, job: dict, variants: list, artifact_a: dict, artifact_b: dict, settings: dict) -> dict:
        settings = self._with_host_threads(settings)
        return runner.execute_pair(Job.from_dict(job), tuple(Variant.from_dict(v) for v in variants),
                                   (artifact_a, artifact_b), settings, self._launcher(settings))

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()


_Actor = ray.remote(max_restarts=-1, max_task_retries=0)(DeviceSlot)


@dataclass
class Slot:
    kind: str
    name: str
    actor: object
    node_id: str = ""
    visible: dict = field(default_factory=dict)
    busy: bool = False
    pinned: deque = field(default_factory=deque)


@dataclass
class _Pending:
    method: str
    args: tuple
    tag: object
    enqueued_at: float
    cost_s: float = 0.0


class SlotPool:
    """The driver's side: slots per kind, a queue per kind, pinned queues per slot.

    `submit` queues a call; it starts at once on an idle slot of its kind. `finished(ref)`
    releases the slot of a completed call and starts the next queued one there, so no slot
    idles while work of its kind remains. A slot takes its pinned work before the shared queue.
    The shared queue hands out the longest expected job first (`cost_s`, ties in arrival order):
    longest-processing-time-first scheduling, so that a 30 s job does not start last on one GPU
    while the others have nothing left to do (a 2-GPU run ended 4 s apart before this)."""

    def __init__(self, resources: dict, warm: bool = True, make_actor=None, persistent: bool = False):
        self.resources = resources
        self.warm = warm
        # Persistent slots outlive the command (flopwatch's own local Ray, kept between
        # commands): detached, named actors that the next command finds with their warm
        # runner, device identity and toolchain probe ready, instead of starting them again.
        self.persistent = persistent
        self._make_actor = make_actor or self._ray_actor
        self.slots: dict[str, list[Slot]] = {}
        self.queues: dict[str, list] = {}  # heaps of (-cost, -work, arrival, pending)
        self._arrival = itertools.count()
        self._held = False
        self.inflight: dict = {}  # ref -> (slot, pending)
        self.dispatched: list[tuple[str, object]] = []  # (slot name, tag) in dispatch order

    def _ray_actor(self, kind: str, name: str, warm: bool):
        if self.persistent:
            return _Actor.options(**slot_options(kind), name=persistent_name(name, warm), namespace="flopwatch",
                                  lifetime="detached", get_if_exists=True).remote(kind, name, warm)
        return _Actor.options(**slot_options(kind), name=None).remote(kind, name, warm)

    def slots_of(self, kind: str) -> list[Slot]:
        if kind not in self.slots:
            n = slot_count(self.resources, kind)
            made = [Slot(kind, f"{kind}/{i}", self._make_actor(kind, f"{kind}/{i}", self.warm)) for i in range(n)]
            if made and self._make_actor == self._ray_actor:
                # Waiting here also starts the actors; each on its node with its devices.
                try:
                    described = ray.get([s.actor.describe.remote() for s in made], timeout=600)
                except ray.exceptions.GetTimeoutError:
                    raise RuntimeError(f"the {n} {kind} device slot(s) of the cluster did not all start in 600 s "
                                       f"(resources {self.resources})") from None
                for slot, d in zip(made, described):
                    slot.node_id, slot.visible = d["node_id"], d["visible"]
            self.slots[kind] = made
            self.queues[kind] = []
        return self.slots[kind]

    def submit(self, kind: str, method: str, args: tuple, tag, slot: Slot | None = None,
               cost_s: float = 0.0, work: float = 0.0) -> None:
        """`cost_s`: the job's expected device seconds (from its last stored run; 0 if unknown);
        `work`: its FLOPs or bytes, which orders jobs of unknown cost (a larger shape first)."""
        pending = _Pending(method, args, tag, time.time(), cost_s)
        if slot is not None:
            slot.pinned.append(pending)
        else:
            self.slots_of(kind)
            heapq.heappush(self.queues[kind], (-cost_s, -work, next(self._arrival), pending))
        self._dispatch(kind)

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

    def finished(self, ref) -> tuple[object, float, Slot]:
        """Release the slot of a completed call; returns (tag, enqueued_at, slot)."""
        slot, pending = self.inflight.pop(ref)
        slot.busy = False
        self._dispatch(slot.kind)
        return pending.tag, pending.enqueued_at, slot

    def _dispatch(self, kind: str) -> None:
        if self._held:
            return
        for slot in self.slots_of(kind):
            if slot.busy:
                continue
            if slot.pinned:
                pending = slot.pinned.popleft()
            elif self.queues[kind]:
                pending = heapq.heappop(self.queues[kind])[-1]
            else:
                continue
            slot.busy = True
            ref = getattr(slot.actor, pending.method).remote(*pending.args)
            self.inflight[ref] = (slot, pending)
            self.dispatched.append((slot.name, pending.tag))

    def idle_while_queued(self) -> list[str]:
        """Slots that are idle although work of their kind waits (always empty: the invariant)."""
        return [s.name for kind, slots in self.slots.items() for s in slots
                if not s.busy and (s.pinned or self.queues[kind])]

    def close(self) -> None:
        """Stop the slots of this command; persistent ones stay for the next command."""
        for slots in self.slots.values():
            for s in slots:
                if self.persistent:
                    continue
                try:
                    ray.kill(s.actor)
                except Exception:  # an actor of a cluster already gone
                    pass
        self.slots.clear()

    def toolchains_ref(self):
        """The toolchain probe, from the node's CPU slot when slots persist (it answers from
        memory between commands), else None (the caller runs the probe task)."""
        if not self.persistent or slot_count(self.resources, "cpu") < 1:
            return None
        return self.slots_of("cpu")[0].actor.toolchains.remote()


def persistent_name(slot: str, warm: bool) -> str:
    return f"flopwatch-slot-{slot.replace('/', '-')}-{'warm' if warm else 'cold'}"


_POOL: dict = {}


def pool(resources: dict, warm: bool = True, persistent: bool = False) -> SlotPool:
    """The pool of this driver's Ray connection: the slots (and their warm runners) live across
    the commits of one command (compare, bisect, nightly) instead of starting per commit, and
    across commands when `persistent`."""
    ctx = ray.get_runtime_context()
    key = (ctx.get_node_id(), ctx.get_job_id(), warm, persistent)
    if key not in _POOL:
        close_all()
        _POOL[key] = SlotPool(resources, warm, persistent=persistent)
    return _POOL[key]


def close_all() -> None:
    for p in _POOL.values():
        p.close()
    _POOL.clear()
