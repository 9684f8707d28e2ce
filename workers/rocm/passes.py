"""Split a set of counters into rocprofv3 collection passes that fit gfx942's hardware.

Each hardware block has a fixed number of counter registers per pass; rocprofv3 refuses a
``--pmc`` set that does not fit. A ``*_sum`` derived counter (summed over block instances)
still takes one register in its block. GRBM_GUI_ACTIVE is added to every pass because
normalisations (cycles, occupancy) need it next to whatever else the pass measures.
SQ_ACCUM_PREV_HIRES accumulates the *level* counter collected with it (SQ_LEVEL_WAVES for
occupancy), so the two share a pass and a pass holds one such pair at most.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# Per-pass counter registers per block on gfx942 (rocprofv3 / rocprofiler-compute limits).
BLOCK_LIMITS_GFX942: dict[str, int] = {
    "SQ": 8,  # SQ and SQC counters share the SQ block's registers
    "TA": 2,
    "TD": 2,
    "TCP": 4,
    "TCC": 4,
    "SPI": 6,
    "GRBM": 2,
    "CPC": 2,
    "CPF": 2,
    "GDS": 4,
    "TCA": 4,
}
ALWAYS = "GRBM_GUI_ACTIVE"
ACCUMULATOR = "SQ_ACCUM_PREV_HIRES"
LEVEL_PARTNER = "SQ_LEVEL_WAVES"  # default level counter that ACCUMULATOR integrates


def block_of(counter: str) -> str:
    """Hardware block a counter is programmed in: its prefix, with SQC folded into SQ and
    per-instance suffixes (``TCC_HIT[3]``) ignored."""
    prefix = re.split(r"[_\[]", counter, maxsplit=1)[0]
    return "SQ" if prefix == "SQC" else prefix


def _fits(pass_counters: list[str], new: Sequence[str], limits: Mapping[str, int]) -> bool:
    usage: dict[str, int] = {}
    for c in [*pass_counters, *new]:
        if c == ALWAYS:
            continue
        block = block_of(c)
        usage[block] = usage.get(block, 0) + 1
    if any(n > limits.get(block, 0) for block, n in usage.items()):
        return False
    levels = [c for c in [*pass_counters, *new] if "_LEVEL" in c]
    return len(levels) <= 1


def plan_passes(groups: Sequence[Sequence[str]],
                limits: Mapping[str, int] = BLOCK_LIMITS_GFX942) -> list[list[str]]:
    """Assign counters to passes (pure).

    ``groups`` are the counter lists of the requested metrics; a group is kept in one pass
    when it fits anywhere (so a metric's inputs come from the same run), otherwise its
    counters are placed one by one. First fit, in the order given. Raises ValueError for a
    counter whose block is unknown or has no registers.
    """
    passes: list[list[str]] = []
    placed: set[str] = set()

    def place(units: list[list[str]]) -> None:
        for unit in units:
            unit = [c for c in unit if c not in placed and c != ALWAYS]
            if not unit:
                continue
            target = next((p for p in passes if _fits(p, unit, limits)), None)
            if target is None:
                if not _fits([], unit, limits):
                    raise ValueError(f"counters {unit} cannot share one pass on this GPU")
                target = []
                passes.append(target)
            target.extend(unit)
            placed.update(unit)

    for group in groups:
        group = list(dict.fromkeys(group))
        for c in group:
            if c != ALWAYS and limits.get(block_of(c), 0) == 0:
                raise ValueError(f"no counter registers known for block of {c!r}")
        if ACCUMULATOR in group and not any("_LEVEL" in c for c in group):
            group.append(LEVEL_PARTNER)
        # the accumulator and its level counter are inseparable
        pair = [c for c in group if c == ACCUMULATOR or "_LEVEL" in c]
        rest = [c for c in group if c not in pair]
        whole = pair + rest
        place([whole] if _fits([], whole, limits) else [pair] + [[c] for c in rest])
    return [[ALWAYS, *p] for p in passes]


def pass_usage(counters: Sequence[str]) -> dict[str, int]:
    """Registers used per block by one pass (GRBM_GUI_ACTIVE not counted)."""
    usage: dict[str, int] = {}
    for c in counters:
        if c != ALWAYS:
            usage[block_of(c)] = usage.get(block_of(c), 0) + 1
    return usage
