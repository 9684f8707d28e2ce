"""Where a run's time went, from the results' own phase records, and the peer check across
the devices of a node. Pure functions over plain records.

Phases of one result (seconds; `workers.job.runner` and `workers.job.child` measure them):
queue_s (runnable → its slot started it), start_s (the slot's overhead: unpacking, process
start, result IO), load_s (GPU context, library load), correctness_s, warmup_s, timing_s,
profile_s. A device's *busy* time is the sum of its jobs' load + correctness + warm-up +
timing + profile: the time the device was in use by a job. A GPU slot's next job starts while
the one before finishes (`workers.job.handoff`): where two jobs' spans overlap (`began_at` to
`ended_at`, epoch marks of the child), the overlap counts once. A device's *wall* is the run's wall
from the first job submission to the last result that device returned; so busy/wall says how
much of the run the device spent measuring, whatever the builds before it took. A slot's
*calls* are its processes (a variant's shapes, or one job): results of one call share its start
mark. A kind's *bound* is the shortest jobs wall any schedule could reach on its slots.
"""

from __future__ import annotations

from workers.core import status
from workers.core.records import Result

# The launch floor's loop and the one call whose peak memory is counted hold the device too
# (`workers.job.child`: after the job's own loop, before the next job may start beside it).
BUSY_PHASES = ("load_s", "correctness_s", "warmup_s", "timing_s", "profile_s", "launch_floor_s", "memory_s")
# How much slower than its node's fastest card a card's peer may run before it is flagged. Two
# healthy H100s of one machine ran the 8192^3 bf16 reference peer 0.3-4.2% apart over three
# machines (a power-limited GEMM runs at what each card's power and clock allow), so 3% flagged
# healthy pairs; a card shared with another process read +118%. 10% is over twice the widest
# healthy gap and far below what sharing a card costs.
PEER_TOLERANCE = 0.10
# The sampling budget of a re-time on another card. A median of a steady launch settles long
# before the run's default budget (the 8192^3 reference: 1.6 ms, so some 150 launches in
# 0.25 s), and a shared card shows in every launch that spans its time slices; the rest of the
# default budget would only keep the extra card from its own jobs.
PEER_RETIME_BUDGET_S = 0.25


def retime_settings(settings: dict) -> dict:
    """A job's settings for its peer re-time: no profile, sampling cut to `PEER_RETIME_BUDGET_S`
    (never raised above the run's own budget)."""
    timing = dict(settings.get("timing") or {})
    timing["budget_s"] = min(float(timing.get("budget_s", PEER_RETIME_BUDGET_S)), PEER_RETIME_BUDGET_S)
    return {**settings, "timing": timing, "profile": False}


def busy_s(phases: dict) -> float:
    return sum(float(phases.get(k) or 0.0) for k in BUSY_PHASES)


def job_span(phases: dict) -> tuple[float, float] | None:
    """(start, end), epoch seconds, of a job's busy phases: from its child's start to its end
    (a job that ended early: its start plus its busy phases); None without the marks."""
    began = phases.get("began_at")
    if not began:
        return None
    return float(began), float(phases.get("ended_at") or began + busy_s(phases))


def overlap_s(spans: list[tuple[float, float]]) -> float:
    """How much of the spans' summed length is covered twice or more (what a union would not count)."""
    total, union, reach = 0.0, 0.0, float("-inf")
    for start, end in sorted(spans):
        total += end - start
        if end > reach:
            union += end - max(start, reach)
            reach = end
    return max(0.0, total - union)


def summarise(measured: list[tuple[str, Result]], first_submit: float | None,
              last_result: dict[str, float]) -> list[dict]:
    """One row per device slot that ran something: jobs, busy, wall, busy %, the device's
    identity, and the phase totals."""
    rows: dict[str, dict] = {}
    for slot, r in measured:
        row = rows.setdefault(slot, {"slot": slot, "device": r.device, "uuid": "", "pci_bus_id": "",
                                     "node_id": "", "cpus": "", "jobs": 0, "busy_s": 0.0, "phases": {}})
        info = r.device_info or {}
        row["cpus"] = row["cpus"] or info.get("cpus", "")
        row["uuid"] = row["uuid"] or info.get("uuid", "")
        row["pci_bus_id"] = row["pci_bus_id"] or info.get("pci_bus_id", "")
        row["node_id"] = row["node_id"] or info.get("ray_node_id", "")
        row["jobs"] += 1
        row["busy_s"] += busy_s(r.phases)
        row.setdefault("spans", []).append(job_span(r.phases))
        # One call of the slot (a process: a variant's shapes or one job) shares its start mark.
        row.setdefault("call_marks", set()).add(r.phases.get("started_at") or id(r))
        for k, v in r.phases.items():
            if k.endswith("_s"):
                row["phases"][k] = round(row["phases"].get(k, 0.0) + float(v or 0.0), 3)
    out = []
    for slot, row in sorted(rows.items()):
        row["busy_s"] -= overlap_s([s for s in row.pop("spans") if s is not None])
        row["calls"] = len(row.pop("call_marks"))
        wall = max(0.0, last_result.get(slot, 0.0) - (first_submit or 0.0))
        out.append({**row, "busy_s": round(row["busy_s"], 3), "wall_s": round(wall, 3),
                    "busy_pct": round(100.0 * row["busy_s"] / wall, 1) if wall else None})
    return out


def run_wall_s(rows: list[dict]) -> float:
    """First submission → last result of the run (the longest device wall)."""
    return max((r["wall_s"] for r in rows), default=0.0)


def bounds(measured: list[tuple[str, Result]], slot_counts: dict[str, int], rows: list[dict]) -> dict:
    """Per device kind that ran jobs: the shortest jobs wall any schedule could reach on its
    slots (`pipeline.run.schedule.bound`: the longest job, or the work over the slots) beside the
    wall the run took (its slots' longest wall)."""
    from pipeline.run.schedule import bound

    per: dict[str, list[tuple[str, float]]] = {}
    for slot, r in measured:
        per.setdefault(slot.split("/")[0], []).append((f"{r.variant} {r.shape} {r.dtype}", busy_s(r.phases)))
    out = {}
    for kind, jobs in sorted(per.items()):
        wall = max((row["wall_s"] for row in rows if row["slot"].split("/")[0] == kind), default=0.0)
        out[kind] = bound(jobs, max(1, slot_counts.get(kind, 1))).to_dict(wall)
    return out


def bound_lines(found: dict) -> list[str]:
    """"cuda: jobs wall 52.3 s, lower bound 50.1 s (work 100.2 s over 2 slots; longest job 4.9 s:
    cuda_naive …) — wall 1.04× the bound"."""
    out = []
    for kind, b in found.items():
        ratio = f" — wall {b['wall_over_bound']:.2f}× the bound" if b.get("wall_over_bound") else ""
        out.append(f"{kind}: jobs wall {b.get('wall_s', 0.0):.1f} s, lower bound {b['bound_s']:.1f} s (work "
                   f"{b['work_s']:.1f} s over {b['slots']} slot(s); longest job {b['longest_job_s']:.1f} s: "
                   f"{b['longest_job']}){ratio}")
    return out


def busy_line(row: dict) -> str:
    ident = row["uuid"] or row["device"]
    pct = f"{row['busy_pct']:.0f}%" if row.get("busy_pct") is not None else "—"
    return (f"{row['slot']} ({ident}): device busy {row['busy_s']:.1f} s of {row['wall_s']:.1f} s wall ({pct}), "
            f"{row['jobs']} jobs")


def peer_check(rows: list[dict], tolerance: float = PEER_TOLERANCE) -> dict:
    """Per node, op peer and shape: each slot's peer median against the fastest slot's; a slot
    more than `tolerance` slower is flagged. The fastest, not the median, is the reference: on a
    node of two cards the median is their midpoint, which would split a slow card's gap between
    both and flag either both or neither. Slots whose peer did not time are listed too."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["node_id"], r["variant"], r["shape"], r["dtype"]), []).append(r)
    checks, flagged = [], []
    for (node, variant, shape, dtype), members in sorted(groups.items()):
        timed = [m for m in members if status.measured(m["status"]) and m.get("median_s")]
        fastest = min(m["median_s"] for m in timed) if timed else None
        devices = []
        for m in sorted(members, key=lambda m: m["slot"]):
            # How much longer this card's peer took than the fastest card's.
            off = (m["median_s"] / fastest - 1.0) if fastest and m.get("median_s") else None
            bad = off is None or off > tolerance
            d = {"slot": m["slot"], "uuid": m["uuid"], "pci_bus_id": m["pci_bus_id"], "status": m["status"],
                 "median_s": m.get("median_s"), "off_pct": round(100 * off, 2) if off is not None else None,
                 "flagged": bad}
            devices.append(d)
            if bad:
                flagged.append({**d, "node_id": node, "variant": variant, "shape": shape, "dtype": dtype})
        checks.append({"node_id": node, "variant": variant, "shape": shape, "dtype": dtype,
                       "fastest_s": fastest, "devices": devices})
    return {"tolerance_pct": 100 * tolerance, "checks": checks, "flagged": flagged}


def flag_lines(check: dict) -> list[str]:
    out = []
    for f in check.get("flagged", []):
        how = (f"peer {f['off_pct']:+.1f}% vs the node's fastest card" if f["off_pct"] is not None
               else f"peer did not time ({f['status']})")
        out.append(f"peer check: {f['slot']} ({f['uuid'] or f['pci_bus_id'] or 'no uuid'}) on node "
                   f"{f['node_id'][:12]}: {how} for {f['variant']} {f['shape']} {f['dtype']} — FLAGGED")
    return out


def lost_node_lines(lost_nodes: list[dict]) -> list[str]:
    """One line per Ray node lost during a run: which, its slots, and what became of its jobs."""
    return [f"node {n['node_id']} was lost during the run (slots {', '.join(n['slots'])}): "
            f"{n['retried']} job(s) retried on other nodes, {n['given_up']} recorded as lost "
            "(`flopwatch run --resume` measures them)" for n in lost_nodes]
