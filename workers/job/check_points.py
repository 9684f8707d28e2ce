"""Check points: shapes a variant is only checked at (`[[check]]`, a challenge problem's
`tests:`), never timed and with no series of their own, beside its timed shapes.

They are a verdict on the variant at one dtype on one device, not on a shape: the first job of a
process to need them runs them all (each a correctness check of its own, at the set's tolerance
where it has one), and every job of that process with the same variant, dtype and device reuses
the verdicts (a batch, `workers.job.batch`, is one variant's jobs in one process: the points run
once however many shapes it times). Each job's result carries them (`check_points`: the shape,
where the manifest or task.yml gives it, passed, seed, figures, the finding), and a failure at
one makes the job `incorrect` with a diagnostic naming that shape; a job answered from a failed
verdict runs nothing of the variant. Where a variant's jobs run in several processes (its
shapes split across slots, `--profile`, `FLOPWATCH_BATCH=0`) each process checks them once.
"""

from __future__ import annotations

import dataclasses

# (variant name, artifact, dtype, device kind) -> (the shape key of the job that ran them, verdicts)
_VERDICTS: dict[tuple, tuple[str, list[dict]]] = {}
# Figures kept per check point in a result (the tile map is kept for a failing one only).
_KEPT = ("passed", "seed", "rel_fro_err", "max_abs_err", "rtol", "atol", "unwritten", "nonfinite", "out_shape",
         "problem_check", "returned", "repeat_mismatch")


def label(point: dict) -> str:
    """A check point as diagnostics name it: `size=127 (task.yml tests[0])`."""
    dims = ",".join(f"{k}={v}" for k, v in point["dims"].items())
    return dims + (f" ({point['where']})" if point.get("where") else "")


def _key(spec: dict) -> tuple:
    return (spec["variant"]["name"], spec["artifact"], spec["dtype"], spec["device_kind"])


def known(spec: dict) -> tuple[str, list[dict]] | None:
    """The verdicts this process already has for the job's variant, dtype and device."""
    return _VERDICTS.get(_key(spec))


def answered_by_failure(spec: dict) -> bool:
    """Whether the job is settled by a failed check point this process found: it can be written
    as `incorrect` without running anything of the variant."""
    found = known(spec)
    return found is not None and not all(p["passed"] for p in found[1])


def run(spec: dict, variant, op, kind: str, dtype, check, load_call, too_big, diagnose) -> tuple[str, list[dict]]:
    """Every check point of `variant` checked once (or the verdicts of this process's earlier
    job): (the shape key of the job that ran them, verdicts). `check(call, op, variant, dims,
    dtype, kind, seed, previous, repeat)` is the job's own correctness check, `load_call(dims)`
    the entry bound to a shape, `too_big(dims)` why a shape cannot run here, `diagnose(figures,
    dims)` the finding of a failed check in words."""
    found = known(spec)
    if found is not None:
        return found
    verdicts = []
    seed0 = int(spec["seeds"][0])
    for i, point in enumerate(variant.check_points):
        dims = dict(point["dims"])
        own = {k: point[k] for k in ("rtol", "atol") if point.get(k) is not None}
        v = dataclasses.replace(variant, **own) if own else variant
        seed = (seed0 + 7919 * (i + 1)) % 2**31
        verdict = {"shape": ",".join(f"{k}={x}" for k, x in dims.items()), "where": point.get("where", ""),
                   "label": label(point), "seed": seed}
        unfit = too_big(dims)
        if unfit:
            verdict.update(passed=False, finding=f"not run: {unfit}")
            verdicts.append(verdict)
            continue
        figures = check(load_call(dims), op, v, dims, dtype, kind, seed, None, False)
        figures.pop("_out", None)
        verdict.update({k: figures[k] for k in _KEPT if k in figures})
        if not figures["passed"]:
            verdict["finding"] = diagnose(figures, dims)
            if "tile_map" in figures:
                verdict["tile_map"], verdict["tile"] = figures["tile_map"], figures.get("map_tile", figures["tile"])
        verdicts.append(verdict)
    shape = ",".join(f"{k}={x}" for k, x in spec["dims"].items())
    _VERDICTS[_key(spec)] = (shape, verdicts)
    return shape, verdicts


def record(result: dict, ran_in: str, verdicts: list[dict], shape: str) -> dict:
    """`result` with the verdicts (`check_points`: where they ran, each point); a failed one makes it
    `incorrect`, the diagnostic naming the shape and what was found there."""
    result["check_points"] = {"ran_in": ran_in, "here": ran_in == shape,
                              "points": [{k: v for k, v in p.items() if k not in ("tile_map", "tile")}
                                         for p in verdicts]}
    bad = [p for p in verdicts if not p["passed"]]
    if bad:
        first = bad[0]
        more = f" (and {len(bad) - 1} more of {len(verdicts)} check points)" if len(bad) > 1 else ""
        ran = "" if ran_in == shape else f", checked in the job at {ran_in}"
        result.update(status="incorrect", diagnostic=f"check point {first['label']}{ran}: seed {first['seed']}: "
                                                      f"{first['finding']}{more}")
        if "tile_map" in first:
            result["check_point_tiles"] = {"tile_map": first["tile_map"], "tile": first["tile"]}
    return result
