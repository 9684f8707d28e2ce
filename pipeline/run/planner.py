"""What a recorded run would take on other machines: its jobs' measured device seconds, grouped
into the calls the runner would make (`pipeline.run.schedule.split`), replayed on 1, 2, 4, 8 GPUs
or on several nodes (`pipeline.run.schedule.replay`), plus the peer check's re-times and what the
command spent outside its jobs. Everything comes from the store: a run's results with their
phases and its summary (slot walls, busy time, calls, the driver's phases and whole wall).

Calibration, from the recorded run itself: a call costs its jobs' busy seconds plus the slot's
untimed time per call there ((slot wall − slot busy) / calls: process start, hand-off, the
driver's turn-around), and the command's time outside its jobs (start, probes, plan, report)
stays what it was. Builds are taken as cached (a warm run), and nodes as alike and fed by one
driver; the network is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.run import schedule
from pipeline.run.accounting import PEER_RETIME_BUDGET_S, busy_s
from workers.core import status


class PlanError(ValueError):
    """A run that cannot be planned from (none stored, nothing measured on the kind)."""


@dataclass(frozen=True)
class RecordedJob:
    variant: str
    op: str
    shape: str
    dtype: str
    peer: bool
    busy_s: float
    median_s: float = 0.0
    timing_s: float = 0.0  # of busy_s, the sampling loop

    @property
    def retime_s(self) -> float:
        """Its device time as a peer re-time: sampling cut to `PEER_RETIME_BUDGET_S`."""
        return self.busy_s - self.timing_s + min(self.timing_s, PEER_RETIME_BUDGET_S)


@dataclass(frozen=True)
class Recorded:
    """One stored run, as the planner reads it (seconds throughout)."""

    run_id: int
    kind: str
    jobs: list[RecordedJob]
    slots: int  # slots of `kind` the run had
    call_overhead_s: float  # untimed slot time per call
    jobs_wall_s: float  # the kind's slots' longest wall
    other_wall_s: float  # the longest wall of the other kinds' slots (CPU timing beside the GPUs)
    outside_s: float  # the command's wall less its jobs' wall
    command_s: float
    probe: RecordedJob | None = None  # the peer job the peer check re-times
    calls: int = 0
    resumed_from: list[int] = field(default_factory=list)  # earlier runs whose job times a `--resume` run kept

    @property
    def variants(self) -> list[str]:
        return list(dict.fromkeys(j.variant for j in self.jobs))


@dataclass(frozen=True)
class Prediction:
    nodes: int
    gpus_per_node: int
    jobs_wall_s: float
    command_s: float
    bound: schedule.Bound
    calls: int
    split: list[str] = field(default_factory=list)  # variants whose shapes are spread over slots
    retimes: int = 0  # peer-check re-times

    @property
    def slots(self) -> int:
        return self.nodes * self.gpus_per_node

    def to_dict(self) -> dict:
        return {"nodes": self.nodes, "gpus_per_node": self.gpus_per_node, "slots": self.slots,
                "jobs_wall_s": round(self.jobs_wall_s, 2), "command_s": round(self.command_s, 2),
                "bound_s": round(self.bound.bound_s, 2), "calls": self.calls, "split": self.split,
                "peer_retimes": self.retimes}


def kind_of(device: str) -> str:
    return (device or "").split(":", 1)[0]


def from_store(store, run_id: int | None = None, kind: str | None = None) -> Recorded:
    """The run `run_id` (default: the newest finished `run`) as the planner needs it."""
    run = store.run_record(run_id)
    if run is None:
        raise PlanError(f"no run {run_id} in {store.location.shown}" if run_id is not None else
                        f"no finished `flopwatch run` in {store.location.shown} to plan from")
    columns = ("variant", "op", "shape", "dtype", "device", "status", "peer", "phases", "device_info", "median_s")
    rows = store.results(columns=columns, run_id=run["id"])
    resumed = _resumed(store, run, rows, columns)
    measured = [r for r in rows + resumed if r["phases"] and busy_s(r["phases"]) > 0]
    work: dict[str, float] = {}
    for r in measured:
        work[kind_of(r["device"])] = work.get(kind_of(r["device"]), 0.0) + busy_s(r["phases"])
    if kind is None:
        gpu = {k: w for k, w in work.items() if k != "cpu"}
        kind = max(gpu or work, key=(gpu or work).get) if work else ""
    mine = [r for r in measured if kind_of(r["device"]) == kind]
    if not mine:
        why = (f"; it resumed {summary_resumed(run)} job(s) whose earlier runs stored no {kind or 'device'} time "
               "either") if summary_resumed(run) else ""
        raise PlanError(f"run {run['id']} measured no {kind or 'device'} job: nothing to plan from "
                        f"(kinds measured: {', '.join(sorted(work)) or 'none'}){why}")
    summary = run["summary"]
    devices = summary.get("devices") or []
    slot_rows = [d for d in devices if d["slot"].split("/")[0] == kind]
    calls = {}
    for r in mine:
        slot = (r["device_info"] or {}).get("slot", "")
        calls.setdefault(slot, set()).add(r["phases"].get("started_at") or id(r))
    n_calls = sum(d.get("calls") or len(calls.get(d["slot"], ())) for d in slot_rows) or len(mine)
    untimed = sum(max(0.0, d["wall_s"] - d["busy_s"]) for d in slot_rows)
    jobs_wall = max((d["wall_s"] for d in slot_rows), default=0.0)
    other_wall = max((d["wall_s"] for d in devices if d["slot"].split("/")[0] != kind), default=0.0)
    command = float((summary.get("driver") or {}).get("command_s") or 0.0)
    jobs = [RecordedJob(r["variant"], r["op"] or "", r["shape"], r["dtype"], bool(r["peer"]), busy_s(r["phases"]),
                        r["median_s"] or 0.0, float(r["phases"].get("timing_s") or 0.0)) for r in mine]
    return Recorded(run["id"], kind, jobs, max(1, len(slot_rows)), untimed / n_calls, jobs_wall, other_wall,
                    max(0.0, command - max(jobs_wall, other_wall)), command, _probe(jobs, summary), n_calls,
                    sorted({r["run_id"] for r in resumed if kind_of(r["device"]) == kind}))


def summary_resumed(run: dict) -> int:
    """How many stored results a `run --resume` kept instead of measuring them again."""
    return int((run.get("summary") or {}).get("resumed") or 0)


def _resumed(store, run: dict, rows: list[dict], columns: tuple[str, ...]) -> list[dict]:
    """The results a `run --resume` kept rather than measured: the newest stored result of each
    series of its commit that an earlier run measured and it did not. Their recorded device times
    are what its jobs take, so the run is planned from them; none for a run that resumed nothing."""
    if not summary_resumed(run):
        return []
    own = {(r["variant"], r["shape"], r["dtype"], r["device"]) for r in rows}
    earlier: dict[tuple, dict] = {}
    for r in store.results(columns=(*columns, "run_id"), commit_sha=run["commit_sha"]):  # oldest first
        key = (r["variant"], r["shape"], r["dtype"], r["device"])
        if r["run_id"] < run["id"] and key not in own and r["status"] != status.LOST:
            earlier[key] = r
    return list(earlier.values())


def _probe(jobs: list[RecordedJob], summary: dict) -> RecordedJob | None:
    """The peer job the run's peer check used, else the one the runner would choose: the peer
    job of the longest launches (`runflow._Stream._choose_probes`; here ties go to the longer job)."""
    checked = [(c["variant"], c["shape"], c["dtype"]) for c in (summary.get("peer_check") or {}).get("checks", [])]
    for j in jobs:
        if (j.variant, j.shape, j.dtype) in checked:
            return j
    return max((j for j in jobs if j.peer), key=lambda j: (j.median_s, j.busy_s), default=None)


def predict(rec: Recorded, nodes: int, gpus_per_node: int) -> Prediction:
    """The recorded run's jobs on `nodes` nodes of `gpus_per_node` slots each."""
    if nodes < 1 or gpus_per_node < 1:
        raise PlanError(f"a machine of {nodes} node(s) × {gpus_per_node} GPU(s) cannot run anything")
    slots = nodes * gpus_per_node
    names = rec.variants
    groups = [[j.busy_s for j in rec.jobs if j.variant == n] for n in names]
    # Decided as the runner decides (its process cost), replayed with this run's own overhead.
    parts = schedule.split(groups, slots)
    costs = [sum(groups[g][i] for i in p) + rec.call_overhead_s for g, ps in enumerate(parts) for p in ps]
    pinned: list[list[float]] = [[] for _ in range(slots)]
    retimes = 0
    if rec.probe is not None and gpus_per_node > 1:
        for s in range(slots):
            # The probe's own run is the reference on one slot of the first node; every other slot
            # of each node re-times it once.
            if s != 0:
                pinned[s].append(rec.probe.retime_s + rec.call_overhead_s)
                retimes += 1
    replayed = schedule.replay(costs, slots, pinned=pinned)
    wall = replayed["wall_s"]
    retimed = [rec.probe.retime_s] * retimes if rec.probe else []
    bound = schedule.bound([(f"{j.variant} {j.shape} {j.dtype}", j.busy_s) for j in rec.jobs]
                           + [("peer re-time", s) for s in retimed], slots)
    return Prediction(nodes, gpus_per_node, wall, rec.outside_s + max(wall, rec.other_wall_s), bound, len(costs),
                      [n for n, ps in zip(names, parts) if len(ps) > 1], retimes)


def measured(store, run_id: int, kind: str) -> dict:
    """What a stored run took on its slots of `kind`: for holding predictions against."""
    rec = from_store(store, run_id, kind)
    return {"run_id": run_id, "slots": rec.slots, "jobs_wall_s": round(rec.jobs_wall_s, 2),
            "command_s": round(rec.command_s, 2)}


def parse_machine(text: str) -> tuple[int, int]:
    """"8" → (1, 8); "4x8" → 4 nodes of 8 GPUs."""
    nodes, _, per = text.strip().lower().rpartition("x")
    try:
        n, g = int(nodes or 1), int(per)
    except ValueError:
        raise PlanError(f"{text!r}: give GPUs as N, or nodes × GPUs as NODESxN (e.g. 8, 2x8)") from None
    if n < 1 or g < 1:
        raise PlanError(f"{text!r}: nodes and GPUs must be at least 1")
    return n, g
