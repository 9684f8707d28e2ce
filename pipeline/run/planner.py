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

Concurrency: a job's non-sampling device time (load, correctness checks, warm-up, profile: its
busy seconds less `timing_s`) grows with the GPUs of its node busy at once (they share the
host), its sampling loop does not. On n GPUs per node, from a run recorded on n_rec,

    busy(n) = timing_s + (busy_s − timing_s) × (1 + g × (n − 1)) / (1 + g × (n_rec − 1))

for the jobs and the peer check's re-times alike (factor 1 where n = n_rec). g, the growth per
extra busy GPU, is learned where the store can tell (`learn_growth`: the newest other finished
run of the same kind on the same device model with another number of slots per node, from the
jobs both measured), else `DEFAULT_GROWTH`. The untimed time per call is not scaled: it grew
too (0.027-0.034 s a call on one H100, 0.037-0.048 s on two, 0.091 s on four), but on four GPUs
that is some 0.5 s of a 29.8 s slot wall, one 4-GPU run is all that measured it, and the slots'
start-up and hand-offs are in it beside any host contention.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from pipeline.run import schedule
from pipeline.run.accounting import PEER_RETIME_BUDGET_S, busy_s
from workers.core import status


# Growth of a job's non-sampling device time per extra busy GPU of its node, where the store
# holds no run to learn it from. Measured on a 4× H100 node (one 64-core host, CPU pinning on,
# 2026-11-27, docs/benchmarks.md "Four GPUs", docs/gpu-runs/fleet_h100x4_2026-11-27/scaling.json):
# the suite's slot busy seconds, summed, went 103.2 s on 1 GPU → 113.5 s on 4, of which sampling
# (`timing_s`) 73.8 → 74.0 s (this split is not in the raw output there; the busy sums are, as
# the slots' busy_s); so the host-bound rest (load, checks, warm-up) 29.4 → 39.5 s,
# × 1.344 with 3 extra busy GPUs: g = 0.344 / 3 = 0.115. The 4-GPU slots' busy also holds the
# peer check's 3 re-times (84 jobs on the slots, 81 results), which the planner adds on their own;
# their load, check and warm-up are in the 39.5 s, so the jobs' own growth is below 0.115: rounded
# down to 0.10 (× 1.30 on 4 GPUs, × 1.70 on 8). On the 2× H100 machines (docs/benchmarks.md "Many
# GPUs") correctness + warm-up grew × 1.01-1.06 with one extra GPU at 8 host threads per job
# (× 1.12-1.16 at 16), the re-time in: g 0.01-0.06 there, so the growth is not linear in the busy
# GPUs, and 0.10 puts some 1-2% too much work on a 2-GPU prediction. A run in the store to learn
# from is what fits a site's own machines.
DEFAULT_GROWTH = 0.10
# Fewer jobs measured by both runs than this and a run is not learned from.
MIN_COMMON_JOBS = 5


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
    device: str = ""  # the result's device, e.g. "cuda:NVIDIA H100 80GB HBM3"

    @property
    def host_s(self) -> float:
        """Its non-sampling device time: load, correctness, warm-up, profile."""
        return max(0.0, self.busy_s - self.timing_s)

    def scaled_s(self, factor: float = 1.0) -> float:
        """Its busy seconds with the non-sampling part × `factor` (the sampling loop as recorded)."""
        return self.busy_s if factor == 1.0 else self.timing_s + self.host_s * factor

    def retime_at(self, factor: float = 1.0) -> float:
        """Its device time as a peer re-time: sampling cut to `PEER_RETIME_BUDGET_S`, the rest × `factor`."""
        if factor == 1.0:
            return self.retime_s
        return self.host_s * factor + min(self.timing_s, PEER_RETIME_BUDGET_S)

    @property
    def retime_s(self) -> float:
        """Its device time as a peer re-time: sampling cut to `PEER_RETIME_BUDGET_S`."""
        return self.busy_s - self.timing_s + min(self.timing_s, PEER_RETIME_BUDGET_S)


@dataclass(frozen=True)
class Growth:
    """g: how much a job's non-sampling device time grows per extra busy GPU of its node, and
    where it came from (a stored run, or `DEFAULT_GROWTH`)."""

    per_gpu: float = DEFAULT_GROWTH
    run_id: int | None = None  # the run it was learned from; None: the default
    gpus_per_node: int = 0  # that run's slots per node
    common_jobs: int = 0  # the jobs both runs measured
    unit: str = "GPU"

    @property
    def source(self) -> str:
        if self.run_id is None:
            return "default"
        return f"learned from run {self.run_id} ({self.gpus_per_node} {self.unit}{'s' if self.gpus_per_node > 1 else ''})"

    def factor(self, gpus_per_node: int, recorded_per_node: int) -> float:
        """The non-sampling time on `gpus_per_node` busy GPUs against the recorded run's."""
        if gpus_per_node == recorded_per_node:
            return 1.0
        g = self.per_gpu
        return (1 + g * (gpus_per_node - 1)) / (1 + g * (recorded_per_node - 1))

    def to_dict(self) -> dict:
        return {"growth_per_gpu": round(self.per_gpu, 4), "growth_source": self.source,
                "growth_run_id": self.run_id, "growth_common_jobs": self.common_jobs}


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
    resumed_from: list[int] = field(default_factory=list)  # earlier runs whose results a `--resume` run kept
    gpus_per_node: int = 1  # slots of `kind` on a node (the most any node had)
    device: str = ""  # the device model most of its jobs ran on
    growth: Growth = field(default_factory=Growth)
    resumed_jobs: int = 0  # the `kind` results a `--resume` run kept instead of measuring: not planned

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
    growth: Growth = field(default_factory=Growth)
    host_factor: float = 1.0  # the jobs' non-sampling time here against the recorded run's

    @property
    def slots(self) -> int:
        return self.nodes * self.gpus_per_node

    def to_dict(self) -> dict:
        return {"nodes": self.nodes, "gpus_per_node": self.gpus_per_node, "slots": self.slots,
                "jobs_wall_s": round(self.jobs_wall_s, 2), "command_s": round(self.command_s, 2),
                "bound_s": round(self.bound.bound_s, 2), "calls": self.calls, "split": self.split,
                "peer_retimes": self.retimes, "work_s": round(self.bound.work_s, 2),
                "host_factor": round(self.host_factor, 4), "growth_per_gpu": round(self.growth.per_gpu, 4),
                "growth_source": self.growth.source}


def kind_of(device: str) -> str:
    return (device or "").split(":", 1)[0]


def from_store(store, run_id: int | None = None, kind: str | None = None, learn: bool = True) -> Recorded:
    """The run `run_id` (default: the newest finished `run`) as the planner needs it; with
    `learn`, its concurrency growth learned from another stored run where one can tell."""
    run = store.run_record(run_id)
    if run is None:
        raise PlanError(f"no run {run_id} in {store.location.shown}" if run_id is not None else
                        f"no finished `flopwatch run` in {store.location.shown} to plan from")
    columns = ("variant", "op", "shape", "dtype", "device", "status", "peer", "phases", "device_info", "median_s")
    rows = store.results(columns=columns, run_id=run["id"])
    # A `--resume` run is planned as it ran: from the jobs it measured, not those it kept from
    # earlier runs (which --run of those runs plans); they are only named.
    resumed = _resumed(store, run, rows, columns)
    measured = [r for r in rows if r["phases"] and busy_s(r["phases"]) > 0]
    work: dict[str, float] = {}
    for r in measured:
        work[kind_of(r["device"])] = work.get(kind_of(r["device"]), 0.0) + busy_s(r["phases"])
    if kind is None:
        gpu = {k: w for k, w in work.items() if k != "cpu"}
        kind = max(gpu or work, key=(gpu or work).get) if work else ""
    mine = [r for r in measured if kind_of(r["device"]) == kind]
    if not mine:
        earlier = sorted({r["run_id"] for r in resumed})
        why = (f"; --resume kept {summary_resumed(run)} stored result(s) instead"
               + (f", measured by run {', '.join(map(str, earlier))}: plan that with --run {earlier[-1]}"
                  if earlier else "")) if summary_resumed(run) else ""
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
                        r["median_s"] or 0.0, float(r["phases"].get("timing_s") or 0.0), r["device"] or "")
            for r in mine]
    models = Counter(j.device for j in jobs)
    kept = [r for r in resumed if kind_of(r["device"]) == kind]
    rec = Recorded(run["id"], kind, jobs, max(1, len(slot_rows)), untimed / n_calls, jobs_wall, other_wall,
                   max(0.0, command - max(jobs_wall, other_wall)), command, _probe(jobs, summary), n_calls,
                   sorted({r["run_id"] for r in kept}), per_node(slot_rows), models.most_common(1)[0][0],
                   Growth(default_growth(kind), unit=unit(kind)), len(kept))
    return replace(rec, growth=learn_growth(store, rec, run["kind"])) if learn else rec


def unit(kind: str) -> str:
    return "CPU slot" if kind == "cpu" else "GPU"


def default_growth(kind: str) -> float:
    """`DEFAULT_GROWTH` for GPU kinds. It was measured on GPU jobs' host phases; a CPU slot's
    sampling runs on the host too, which the term leaves as recorded: no growth for CPU slots
    unless a stored run tells."""
    return 0.0 if kind == "cpu" else DEFAULT_GROWTH


def per_node(slot_rows: list[dict]) -> int:
    """The most slots of a kind any one node had (rows without a node id: one node)."""
    nodes = Counter(d.get("node_id") or "" for d in slot_rows)
    return max(nodes.values(), default=1)


def learn_growth(store, rec: Recorded, run_kind: str = "run") -> Growth:
    """g from the newest other finished run of `run_kind` that had another number of `rec.kind`
    slots per node and measured at least `MIN_COMMON_JOBS` of the jobs (variant, shape, dtype)
    `rec` measured itself, on the same device model (`rec.device`): the two runs' summed
    non-sampling seconds over those jobs, H_rec and H_other, solve
    H_other / H_rec = (1 + g (n_other − 1)) / (1 + g (n_rec − 1)). A pair where they shrank counts
    as no growth (g = 0). The default where no run qualifies."""
    fallback = Growth(default_growth(rec.kind), unit=unit(rec.kind))
    own = {}
    for j in rec.jobs:
        if j.device == rec.device:
            own[(j.variant, j.shape, j.dtype)] = j.host_s
    if len(own) < MIN_COMMON_JOBS:
        return fallback
    for other in sorted((r for r in store.runs() if r["id"] != rec.run_id and r["kind"] == run_kind
                         and r.get("finished_at")), key=lambda r: -r["id"]):
        summary = (store.run_record(other["id"]) or {}).get("summary") or {}
        slot_rows = [d for d in summary.get("devices") or [] if d["slot"].split("/")[0] == rec.kind]
        n_other = per_node(slot_rows)
        if not slot_rows or n_other == rec.gpus_per_node:
            continue
        theirs = {}
        for r in store.results(columns=("variant", "shape", "dtype", "device", "phases"), run_id=other["id"]):
            if r["device"] == rec.device and r["phases"] and busy_s(r["phases"]) > 0:
                theirs[(r["variant"], r["shape"], r["dtype"])] = max(
                    0.0, busy_s(r["phases"]) - float(r["phases"].get("timing_s") or 0.0))
        common = own.keys() & theirs.keys()
        mine_s, other_s = sum(own[k] for k in common), sum(theirs[k] for k in common)
        if len(common) < MIN_COMMON_JOBS or mine_s <= 0:
            continue
        ratio = other_s / mine_s
        # ratio (1 + g (n_rec − 1)) = 1 + g (n_other − 1). Where the run on more GPUs took less,
        # no growth; no g fits a growth past (n_other − 1) / (n_rec − 1), where the ratio tends as
        # g grows (the solution comes out negative): such a pair is not used.
        grew = (ratio - 1) * (n_other - rec.gpus_per_node) > 0
        denominator = (n_other - 1) - ratio * (rec.gpus_per_node - 1)
        g = (ratio - 1) / denominator if grew and denominator else 0.0
        if grew and g <= 0:
            continue
        return Growth(g, other["id"], n_other, len(common), unit(rec.kind))
    return fallback


def summary_resumed(run: dict) -> int:
    """How many stored results a `run --resume` kept instead of measuring them again."""
    return int((run.get("summary") or {}).get("resumed") or 0)


def _resumed(store, run: dict, rows: list[dict], columns: tuple[str, ...]) -> list[dict]:
    """The results a `run --resume` kept rather than measured: the newest stored result of each
    series of its commit that an earlier run measured and it did not; none for a run that resumed
    nothing. Named beside the plan, not planned: the run did not take their time."""
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
    # Non-sampling time × the concurrency factor: as many GPUs of a node busy at once as it has.
    factor = rec.growth.factor(gpus_per_node, rec.gpus_per_node)
    groups = [[j.scaled_s(factor) for j in rec.jobs if j.variant == n] for n in names]
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
                pinned[s].append(rec.probe.retime_at(factor) + rec.call_overhead_s)
                retimes += 1
    replayed = schedule.replay(costs, slots, pinned=pinned)
    wall = replayed["wall_s"]
    retimed = [rec.probe.retime_at(factor)] * retimes if rec.probe else []
    bound = schedule.bound([(f"{j.variant} {j.shape} {j.dtype}", j.scaled_s(factor)) for j in rec.jobs]
                           + [("peer re-time", s) for s in retimed], slots)
    return Prediction(nodes, gpus_per_node, wall, rec.outside_s + max(wall, rec.other_wall_s), bound, len(costs),
                      [n for n, ps in zip(names, parts) if len(ps) > 1], retimes, rec.growth, factor)


def measured(store, run_id: int, kind: str) -> dict:
    """What a stored run took on its slots of `kind`: for holding predictions against."""
    rec = from_store(store, run_id, kind, learn=False)
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
