"""Decides, per series, how head compares with base (slower, faster, same, unsure, newly failing,
fixed, added, removed, not run) from the stored `Result` rows of both revisions and their paired
samples; builds the comparison table and its markdown.

Whole-suite runs of the two revisions alternate in rounds (A B, B A, ...) for statuses,
correctness, resources and counters. The timing that decides the verdict is paired
(`pipeline.history.paired`): both builds of a series alternate sample by sample in one process on one
device, so a machine that drifts — a neighbour's load, a frequency step, seen at ±25% within
seconds on a shared 2-core VM — moves both sides alike. Where a series could not be paired, the
samples pooled over rounds are used, with the round-agreement check of `compare_rounds`.

In the markdown of a PR comment the points of a swept variant (`family[BLOCK_M=128,STAGES=3]`,
`workers.core.params`) at one shape are one line, "3 of 12 points slower, 9 same", naming the points
that moved (`FamilySummary`); the full table keeps a row per point.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from pipeline.history import verdicts
from pipeline.history.memory.threshold import DEFAULT as DEFAULT_MEMORY
from pipeline.history.memory.threshold import MemoryThreshold, grew
from pipeline.project import config
from pipeline.run import summary
from pipeline.run.summary import shape_label
from reports import metric_names
from reports.axes import point_label
from reports.format import mem_change
from workers.core import params, status, untrusted
from workers.core.launch import LAUNCH_BOUND_FACTOR, launch_bound

NEWLY_FAILING, NEWLY_FIXED, STILL_FAILING, ADDED, REMOVED = "newly failing", "newly fixed", "failing", "new", "gone"
# Same measurement identity at both commits: not timed again (`pipeline.history.unchanged`).
UNCHANGED = "unchanged"
# Measured at neither commit: nothing here can run the series (`skipped`: no device or toolchain
# of its kind) or its Ray node was lost (`lost`). That is no evidence of change, so not `same`
# ("measured, no change"), and not the variant's fault, so never a regression.
NOT_RUN = "not run"
# Measured at one commit only, for the same reasons: the other side's number has nothing to be
# set against.
NOT_RUN_AT_BASE, NOT_RUN_AT_HEAD = "not run at base", "not run at head"
# The compiler refused the point for a device limit at both commits (`status.DOES_NOT_FIT`): left
# out as an autotuner leaves it, so neither a failure nor "not run here". At one commit only, the
# row is `not run at base` / `not run at head` with the compiler's line: a series that fits at head
# only is fine, one that stops fitting is named but is not a regression.
DOES_NOT_FIT = "does not fit"
NOT_MEASURED = frozenset({status.SKIPPED, status.DOES_NOT_FIT}) | status.INCOMPLETE
# A row's peak memory grew beyond the memory threshold (`Row.memory`).
MEMORY_GREW = "memory grew"
# Table order: what blocks a merge first, then what needs a look, then the rest; rows without a
# number at either commit last.
_ORDER = {NEWLY_FAILING: 0, verdicts.SLOWER: 1, verdicts.UNSURE: 2, verdicts.FASTER: 3, NEWLY_FIXED: 4,
          STILL_FAILING: 5, verdicts.SAME: 6, UNCHANGED: 7, ADDED: 8, REMOVED: 9, NOT_RUN_AT_BASE: 10,
          NOT_RUN_AT_HEAD: 10, NOT_RUN: 11, DOES_NOT_FIT: 11}
# Counters are measured and jitter a little; below this relative change they did not "move".
COUNTER_TOLERANCE = 0.05
# A swept family's line in the PR comment names at most this many of its points that moved;
# the rest are counted ("and 9 more"): the comment stays short on a wide sweep.
NAMED_POINTS = 3
# The kinds worth naming a point for, most pressing first: a change, or a failure appearing or going.
_NOTABLE = (NEWLY_FAILING, verdicts.SLOWER, verdicts.UNSURE, verdicts.FASTER, NEWLY_FIXED)


@dataclass(frozen=True)
class Side:
    """One revision's view of one series: samples pooled over rounds (ok runs only), the
    status (ok when any round was ok, else the last round's), work per call, and the static
    resources and counters of the last ok round."""

    status: str
    samples: tuple[float, ...] = ()
    flops: float = 0.0
    bytes_moved: float = 0.0
    resources: dict | None = None
    counters: dict | None = None
    diagnostic: str = ""
    round_medians: tuple[float, ...] = ()
    paired: bool = False  # samples[i] ran back to back with the other side's samples[i]
    # Paired: head/base median ratio per load order (`pipeline.history.paired.ORDERS`).
    order_ratios: tuple[float, ...] = ()
    # An unchecked variant's output at its fixed seed: sha256, shape, dtype, first values
    # (`workers.ops.reference.output_digest`).
    output: dict | None = None
    # The run's peak memory of the timed call and the launch floor of its call path (GPU
    # results; None where not measured): from the result rows, not from the paired samples.
    peak_mem_bytes: int | None = None
    launch_floor_s: float | None = None

    def as_row(self) -> dict:
        """The fields `pipeline.run.summary` needs to compute and format a rate."""
        median = float(np.median(self.samples)) if self.samples else None
        return {"median_s": median, "flops": self.flops, "bytes_moved": self.bytes_moved}

    @property
    def launch_bound(self) -> bool:
        """The side's median within twice its launch floor (`workers.core.launch`)."""
        median = float(np.median(self.samples)) if self.samples else None
        return launch_bound(median, self.launch_floor_s)

    @property
    def rate(self) -> float | None:
        """Work per second at the median (FLOP/s, or B/s for ops without arithmetic)."""
        return summary.rate(self.as_row())


@dataclass(frozen=True)
class Moved:
    """Something other than time that differs between the sides, as display strings."""

    name: str
    before: str
    after: str


@dataclass(frozen=True)
class Row:
    """One series of the table. kind is a stats verdict or one of the failure transitions;
    comparison is set whenever both sides have samples."""

    variant: str
    shape: str
    dtype: str
    device: str
    kind: str
    base: Side | None
    head: Side | None
    comparison: verdicts.Comparison | None = None
    moved: tuple[Moved, ...] = ()
    threshold: float | None = None  # the one this row was judged with
    # Why the row was not timed at both commits ("same build: stored result of 1a2b3c4d5e"),
    # empty for a row that was.
    note: str = ""
    # Why a side has no measurement ("not run here: no rocm device in the cluster ..."), set for
    # the not-run kinds only.
    reason: str = ""
    # MEMORY_GREW when the peak memory grew beyond the memory threshold from base to head (a
    # regression whatever the time did), else "".
    memory: str = ""

    @property
    def memory_text(self) -> str:
        """`peak memory 10 MiB → 12 MiB (+20.0%)` where the sides' figures differ ("" otherwise)."""
        b = self.base.peak_mem_bytes if self.base else None
        h = self.head.peak_mem_bytes if self.head else None
        if b is None or h is None or b == h:
            return ""
        return f"peak memory {mem_change(b, h)}" + (", memory regression" if self.memory == MEMORY_GREW else "")

    @property
    def output_changed(self) -> str:
        """For an unchecked series (no reference to check it against) whose output digest differs
        between the commits: "output changed" with how far its first values moved; else ""."""
        b, h = (self.base.output if self.base else None) or {}, (self.head.output if self.head else None) or {}
        if not (b.get("sha256") and h.get("sha256")) or b["sha256"] == h["sha256"]:
            return ""
        if b.get("shape") != h.get("shape") or b.get("dtype") != h.get("dtype"):
            return f"output changed ({b.get('dtype')} {b.get('shape')} → {h.get('dtype')} {h.get('shape')})"
        diff = max((abs(x - y) for x, y in zip(b.get("sample") or (), h.get("sample") or ())), default=0.0)
        return f"output changed (first {len(b.get('sample') or ())} values: max difference {diff:.3g})"


@dataclass(frozen=True)
class Report:
    """threshold is the one given on the command line, or None when each series was judged
    with the default of its device kind (`pipeline.project.config.DEFAULT_THRESHOLDS`)."""

    base_sha: str
    base_subject: str
    head_sha: str
    head_subject: str
    threshold: float | None
    rounds: int
    rows: tuple[Row, ...]

    @property
    def threshold_text(self) -> str:
        if self.threshold is not None:
            return f"±{self.threshold:.1%}"
        used = {config.device_kind(r.device): r.threshold for r in self.rows if r.threshold is not None}
        return config.describe_thresholds(used)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.kind in (verdicts.SLOWER, NEWLY_FAILING)]

    @property
    def memory_regressions(self) -> list[Row]:
        """Series whose peak memory grew beyond the memory threshold (`Row.memory`)."""
        return [r for r in self.rows if r.memory == MEMORY_GREW]

    @property
    def not_run(self) -> list[Row]:
        """Series measured at neither commit (`NOT_RUN`)."""
        return [r for r in self.rows if r.kind == NOT_RUN]

    @property
    def not_retimed(self) -> list[Row]:
        """Series with the same measurement identity at both commits, not timed at both."""
        return [r for r in self.rows if r.note]

    @property
    def skip_text(self) -> str:
        """One sentence on what was not re-timed and why, for the PR comment and the page."""
        rows = self.not_retimed
        if not rows:
            return ""
        stored = sum(r.base is not None for r in rows)
        return (f"{len(rows)} of {len(self.rows)} series unchanged (same build: sources, included headers, flags, "
                f"toolchain, flopwatch harness, op and device model identical at both commits), not timed"
                + ("; no numbers were needed" if not stored else "; their rows carry stored results" if
                   stored == len(rows) else f"; {stored} of their rows carry stored results, the others "
                                            f"need no number") + ".")


def interleave(measure: Callable[[str], list[dict]], base: str, head: str, rounds: int) -> tuple[list, list]:
    """Call measure(rev) for both revisions `rounds` times, order reversed every other round."""
    got: dict[str, list[dict]] = {base: [], head: []}
    for r in range(rounds):
        for rev in ((base, head) if r % 2 == 0 else (head, base)):
            got[rev].extend(measure(rev))
    return got[base], got[head]


def with_pairs(base: dict[tuple, Side], head: dict[tuple, Side],
               pairs: dict[tuple, tuple]) -> tuple[dict[tuple, Side], dict[tuple, Side]]:
    """Replace the run samples by the paired samples where a series was paired: those were
    taken alternately in one process, so machine drift is common to both sides and the
    round-agreement check (for drift between runs) no longer applies."""
    base, head = dict(base), dict(head)
    for key, (b, h, *rest) in pairs.items():
        if key in base and key in head:
            ratios = tuple(rest[0]) if rest else ()
            base[key] = dataclasses.replace(base[key], samples=tuple(b), round_medians=(), paired=True,
                                            order_ratios=ratios)
            head[key] = dataclasses.replace(head[key], samples=tuple(h), round_medians=(), paired=True,
                                            order_ratios=ratios)
    return base, head


def series_key(row: dict) -> tuple[str, str, str, str]:
    return row["variant"], row["shape"], row["dtype"], row["device"]


def pool(rows: Iterable[dict]) -> dict[tuple, Side]:
    """Pool result rows (store rows or Result dicts) of one revision into a Side per series."""
    grouped: dict[tuple, list[dict]] = {}
    for row in rows:
        grouped.setdefault(series_key(row), []).append(row)
    out = {}
    for key, group in grouped.items():
        ok = [g for g in group if status.measured(g["status"])]
        last = ok[-1] if ok else group[-1]
        per_round = [g.get("samples") or g.get("samples_s") or () for g in ok]
        samples = tuple(s for r in per_round for s in r)
        out[key] = Side(last["status"], samples, last.get("flops") or 0.0, last.get("bytes_moved") or 0.0,
                        last.get("resources") or {}, last.get("counters") or {}, last.get("diagnostic") or "",
                        tuple(float(np.median(r)) for r in per_round if len(r)),
                        output=(_json(last.get("correctness")) or {}).get("output"),
                        peak_mem_bytes=_last(ok, "peak_mem_bytes"), launch_floor_s=_last(ok, "launch_floor_s"))
    return out


def _last(rows: list[dict], field: str):
    """The newest value of `field` among `rows` (None when none has one)."""
    return next((r[field] for r in reversed(rows) if r.get(field) is not None), None)


def _json(value) -> dict | None:
    """A JSON column as a dict: store rows may hold it as text, results as a dict."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def flatten_numeric(tree, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of nested dicts/lists as {"a.b.c": value}; backends shape their static
    analysis differently, so nothing here assumes a layout."""
    if type(tree) in (int, float):
        return {prefix: float(tree)}
    out: dict[str, float] = {}
    if type(tree) in (dict, list):
        _flatten_into(tree, prefix, out)
    return out


def _flatten_into(node, name: str, out: dict) -> None:
    # Exact type checks (bool is not a number here) and no intermediate dicts: a year of
    # history flattens ~70,000 of these.
    for k, v in (node.items() if type(node) is dict else enumerate(node)):
        key = f"{name}.{k}" if name else str(k)
        kind = type(v)
        if kind is float or kind is int:
            out[key] = float(v)
        elif kind is dict or kind is list:
            _flatten_into(v, key, out)


def format_value(name: str, value: float) -> str:
    """A flattened resource or counter value as every page shows it ("128", "64 KiB", "50.4%")."""
    return metric_names.flat(name, value).text


def moved(base: Side, head: Side) -> tuple[Moved, ...]:
    """Resources that differ at all (they are static), counters that differ by more than
    COUNTER_TOLERANCE relative (they are measured)."""
    out = []
    for field_name, tolerance in (("resources", 0.0), ("counters", COUNTER_TOLERANCE)):
        before = flatten_numeric(getattr(base, field_name) or {})
        after = flatten_numeric(getattr(head, field_name) or {})
        for name in sorted(set(before) | set(after)):
            b, a = before.get(name), after.get(name)
            if b is not None and a is not None and abs(a - b) <= tolerance * max(abs(a), abs(b)):
                continue
            out.append(Moved(name, "—" if b is None else format_value(name, b),
                             "—" if a is None else format_value(name, a)))
    return tuple(out)


def compare_sides(base: dict[tuple, Side], head: dict[tuple, Side], threshold: float | None,
                  memory_threshold: MemoryThreshold = DEFAULT_MEMORY) -> list[Row]:
    """One Row per series on either side, ordered regressions first (then by change).
    threshold None: each series is judged with the compare default of its device kind. A
    series' peak memory is judged by `memory_threshold` (`memory_verdict`)."""
    rows = []
    for key in sorted(set(base) | set(head)):
        b, h = base.get(key), head.get(key)
        comparison = None
        used = threshold if threshold is not None else config.default_threshold(key[3], "compare")
        if b and h and b.samples and h.samples:
            comparison = compare_rounds(b, h, used)
        kind = _kind(b, h, comparison)
        rows.append(Row(*key, kind, b, h, comparison, moved(b, h) if b and h else (), used,
                        reason=not_run_reason(kind, b, h), memory=memory_verdict(b, h, memory_threshold)))
    return sorted(rows, key=_table_order)


def memory_verdict(base: Side | None, head: Side | None, threshold: MemoryThreshold = DEFAULT_MEMORY) -> str:
    """MEMORY_GREW when both sides measured a peak memory and head's grew beyond `threshold`
    (a share and a number of bytes: the figure is deterministic, `pipeline.history.memory`), else ""."""
    if base is None or head is None or not (status.measured(base.status) and status.measured(head.status)):
        return ""
    return MEMORY_GREW if grew(base.peak_mem_bytes, head.peak_mem_bytes, threshold) else ""


def unchanged_rows(rows: dict[tuple, dict], notes: dict[tuple, str], threshold: float | None) -> list[Row]:
    """Rows of series that were not timed at both commits: `rows` holds the stored result each
    stands on, used for both sides, or None (nothing stored: `unchanged` with no number). A
    failing status stays visible as failing, one that was never measured as not run; anything
    else is `unchanged`."""
    out = []
    for key, row in sorted(rows.items()):
        side = pool([row])[series_key(row)] if row is not None else None
        kind = _untimed_kind(side) if side is not None else UNCHANGED
        used = threshold if threshold is not None else config.default_threshold(key[3], "compare")
        out.append(Row(*key, kind, side, side, None, (), used, notes.get(key, ""),
                       not_run_reason(kind, side, side)))
    return out


def _untimed_kind(side: Side) -> str:
    """The kind of a series whose one result stands for both commits."""
    if side.status in status.FAILURES:
        return STILL_FAILING
    if side.status == status.DOES_NOT_FIT:
        return DOES_NOT_FIT
    return NOT_RUN if side.status in NOT_MEASURED else UNCHANGED


def _table_order(r: Row) -> tuple:
    """Regressions first (by kind; a memory growth with the slowdowns), and within a kind the
    largest change first."""
    return min(_ORDER[r.kind], _ORDER[verdicts.SLOWER]) if r.memory else _ORDER[r.kind], \
        r.comparison.change if r.comparison else 0.0


def merge_rows(measured: list[Row], unchanged: list[Row]) -> list[Row]:
    return sorted([*measured, *unchanged], key=_table_order)


def compare_rounds(base: Side, head: Side, threshold: float) -> verdicts.Comparison:
    """`verdicts.compare_samples` on the pooled samples, then a check across rounds.

    Samples of one run share that run's conditions (frequency, a neighbour's load), so pooled
    samples are not independent and their CI can be too narrow: on a busy 2-core machine one
    disturbed round alone can push a no-change comparison past 3%. So a slower/faster verdict
    stands only when every round pair (round i of head against round i of base) moves beyond
    the threshold in that direction; otherwise it becomes unsure, with the rounds in the reason.
    """
    if base.paired and head.paired:
        return _orders_agree(verdicts.compare_paired(base.samples, head.samples, threshold), head.order_ratios,
                             threshold)
    c = verdicts.compare_samples(base.samples, head.samples, threshold)
    pairs = list(zip(base.round_medians, head.round_medians))
    if c.verdict not in (verdicts.SLOWER, verdicts.FASTER) or len(pairs) < 2:
        return c
    ratios = [h / b for b, h in pairs]
    agree = all(r > 1 + threshold for r in ratios) if c.verdict == verdicts.SLOWER else \
        all(r < 1 - threshold for r in ratios)
    if agree:
        return c
    changes = ", ".join(f"{1 / r - 1:+.1%}" for r in ratios)
    return dataclasses.replace(c, verdict=verdicts.UNSURE,
                               reason=f"pooled samples say {c.verdict} but the rounds disagree ({changes})")


def with_copy_check(rows: list[Row], offsets: dict[tuple, float]) -> list[Row]:
    """A slower or faster row stands only when its change is well beyond what loading the very
    same build again does to that series (`paired.copy_offsets`: two copies of the base build
    timed alternately in one process; 1.0 for most kernels). Where the copies differ by more
    than the threshold and by more than a third of the change, the row is unsure, with both
    figures in the reason: the number moves when the binary is loaded, not with the commit."""
    out = []
    for r in rows:
        offset = offsets.get((r.variant, r.shape, r.dtype, r.device))
        if offset is None or r.kind not in (verdicts.SLOWER, verdicts.FASTER) or r.comparison is None:
            out.append(r)
            continue
        copies, change = abs(math.log(offset)), abs(math.log(r.comparison.ratio))
        if copies > max(r.threshold or 0.0, change / 3):
            reason = (f"paired samples say {r.kind} ({r.comparison.change:+.1%}) but two copies of the base build "
                      f"differ by {1 / offset - 1:+.1%} in one process: this kernel's speed is set when it is "
                      "loaded, not by the commit")
            r = dataclasses.replace(r, kind=verdicts.UNSURE,
                                    comparison=dataclasses.replace(r.comparison, verdict=verdicts.UNSURE,
                                                                   reason=reason))
        out.append(r)
    return sorted(out, key=_table_order)


def _orders_agree(c: verdicts.Comparison, ratios: tuple[float, ...], threshold: float) -> verdicts.Comparison:
    """A paired slower/faster verdict stands only when the pairs of each load order (base
    loaded first, head loaded first) move beyond the threshold in that direction: a change
    the builds made moves both, an effect of which copy was loaded first moves them apart."""
    if c.verdict not in (verdicts.SLOWER, verdicts.FASTER) or len(ratios) < 2:
        return c
    agree = all(r > 1 + threshold for r in ratios) if c.verdict == verdicts.SLOWER else \
        all(r < 1 - threshold for r in ratios)
    if agree:
        return c
    changes = ", ".join(f"{label} {1 / r - 1:+.1%}" for label, r in zip(("base loaded first", "head loaded first"),
                                                                          ratios))
    return dataclasses.replace(c, verdict=verdicts.UNSURE,
                               reason=f"paired samples say {c.verdict} but the two load orders disagree ({changes})")


def _kind(b: Side | None, h: Side | None, comparison) -> str:
    bad_b = b is not None and b.status in status.FAILURES
    bad_h = h is not None and h.status in status.FAILURES
    if bad_h and not bad_b:
        return NEWLY_FAILING
    if bad_b and h is not None and h.status in NOT_MEASURED:
        return NOT_RUN_AT_HEAD  # failing at base and not run at head: nothing says it was fixed
    if bad_b and not bad_h and h is not None:
        return NEWLY_FIXED
    if bad_b and bad_h:
        return STILL_FAILING
    if comparison is not None:
        return comparison.verdict
    if h is None or b is None:
        return REMOVED if h is None else ADDED
    return _not_run_kind(b, h) or verdicts.SAME


def _not_run_kind(b: Side, h: Side) -> str | None:
    """Which side went unmeasured (neither failed), or None when both ran. Without this, a
    series skipped at both commits would read `same`, the word for "measured, no change"."""
    idle_b, idle_h = b.status in NOT_MEASURED, h.status in NOT_MEASURED
    if idle_b and idle_h:
        return DOES_NOT_FIT if b.status == h.status == status.DOES_NOT_FIT else NOT_RUN
    if idle_b or idle_h:
        return NOT_RUN_AT_BASE if idle_b else NOT_RUN_AT_HEAD
    return None


def not_run_reason(kind: str, b: Side | None, h: Side | None) -> str:
    """Why a not-run row has no number, from the unmeasured side's diagnostic (head's when
    neither side ran: it is what this machine says now); empty for any other kind."""
    if kind not in (NOT_RUN, NOT_RUN_AT_BASE, NOT_RUN_AT_HEAD, DOES_NOT_FIT):
        return ""
    side = b if kind == NOT_RUN_AT_BASE else h
    if side.status == status.DOES_NOT_FIT:
        where = {NOT_RUN_AT_BASE: " at base", NOT_RUN_AT_HEAD: " at head"}.get(kind, "")
        return f"does not fit the device{where}: {side.diagnostic.splitlines()[0] if side.diagnostic else ''}"
    if side.status == status.SKIPPED:
        return f"not run here: {side.diagnostic}" if side.diagnostic else "not run here"
    # A lost result's diagnostic already says "not measured: ..." and why.
    return side.diagnostic or f"not measured: {side.status}"


def exit_status(report: Report) -> int:
    """1 on a significant slowdown, a newly failing variant or a peak memory growth beyond the
    memory threshold, else 0 (not-run rows included)."""
    return 1 if report.regressions or report.memory_regressions else 0


def as_json(report: Report) -> dict:
    """The report as `compare --json` prints it: every row with its kind (and reason, for rows
    not run), and the counts of series not re-timed and not run at either commit."""
    out = {**dataclasses.asdict(report), "not_retimed": len(report.not_retimed), "not_run": len(report.not_run),
           "memory_regressions": len(report.memory_regressions)}
    for row, data in zip(report.rows, out["rows"]):
        data["output_changed"] = row.output_changed
        for side in ("base", "head"):
            if data[side] is not None:
                data[side]["launch_bound"] = getattr(row, side).launch_bound
    return out


def format_rate(side: Side | None) -> str:
    """A side's throughput, marked where it is launch-bound (it then measures the call path)."""
    if side is None:
        return "—"
    if side.rate is None:
        return side.status
    return summary.format_rate(side.as_row()) + (" (launch-bound)" if side.launch_bound else "")


def md_escape(text: str) -> str:
    """Text safe inside a markdown table cell of a PR comment: no HTML, links, images,
    @-mentions or cell breaks (`workers.core.untrusted.markdown`); names, subjects and compiler
    output all come from the repository under test."""
    return untrusted.markdown(text)


def _change_cells(c: verdicts.Comparison | None) -> tuple[str, str]:
    if c is None:
        return "", ""
    return f"{c.change:+.1%}", f"[{c.change_lo:+.1%}, {c.change_hi:+.1%}]"


def render_markdown(report: Report, page_url: str = "") -> str:
    """The comparison as a markdown table for a PR comment or a job summary."""
    n_slow = sum(r.kind == verdicts.SLOWER for r in report.rows)
    n_fail = sum(r.kind == NEWLY_FAILING for r in report.rows)
    n_memory = len(report.memory_regressions)
    n_changed = sum(bool(r.output_changed) for r in report.rows)
    n_bound = sum(bool(r.head and r.head.launch_bound) for r in report.rows)
    head = "regressions found" if report.regressions or n_memory else "no regressions"
    lines = [f"### flopwatch: {head}",
             (f"`{report.base_sha[:10]}` {md_escape(report.base_subject)} → `{report.head_sha[:10]}` "
              f"{md_escape(report.head_subject)}"), "",
             (f"threshold {report.threshold_text}; {report.rounds} interleaved round(s); "
              f"{n_slow} slower, {n_fail} newly failing, "
              # the memory count appears only when memory moved: most comparisons never see it
              + (f"{n_memory} memory regression(s), " if n_memory else "") + _series_count(report)
              + (f"; {n_changed} output(s) changed (no reference to check them)" if n_changed else "") + "."), ""]
    if n_bound:
        lines += [(f"{n_bound} series launch-bound at head (median within {LAUNCH_BOUND_FACTOR:g}x the launch floor of "
                   "its call path): their throughput and change measure the call, not the kernel."), ""]
    if report.skip_text:
        lines += [report.skip_text, ""]
    timed = [r for r in report.rows if not r.note]
    lines += [*_markdown_table(timed), ""] if timed else []
    untimed = report.not_retimed
    if untimed:
        # Collapsed: on a PR that touches one kernel, the dozens of unchanged rows are context.
        lines += [f"<details><summary>{len(untimed)} unchanged series (not re-timed)</summary>", "",
                  *_markdown_table(untimed), "", "</details>"]
    if page_url:
        lines += ["", f"[full report]({page_url})"]
    return "\n".join(lines) + "\n"


def _series_count(report: Report) -> str:
    """The series count ("40 series"), those measured at neither commit counted apart: they
    carry no number."""
    not_run = len(report.not_run)
    return f"{len(report.rows)} series" + (f" ({not_run} not run here)" if not_run else "")


@dataclass(frozen=True)
class FamilySummary:
    """The rows of one swept family's points at one shape, dtype and device, as one line."""

    family: str
    shape: str
    dtype: str
    device: str
    points: tuple[Row, ...]

    @property
    def counts(self) -> list[tuple[str, int]]:
        """(kind, number of points) in table order: what blocks a merge first."""
        found: dict[str, int] = {}
        for r in self.points:
            found[r.kind] = found.get(r.kind, 0) + 1
        return sorted(found.items(), key=lambda kv: _ORDER[kv[0]])

    @property
    def text(self) -> str:
        """`3 of 12 points slower, 1 faster, 8 same`."""
        (first, n), *rest = self.counts
        return ", ".join([f"{n} of {len(self.points)} points {first}", *(f"{m} {kind}" for kind, m in rest)])

    @property
    def severe(self) -> bool:
        return any(r.kind in (verdicts.SLOWER, NEWLY_FAILING) or r.memory for r in self.points)

    @property
    def notable(self) -> list[Row]:
        """The points that moved or changed status, most pressing first (largest slowdown first)."""
        moved = [r for r in self.points if r.kind in _NOTABLE or r.memory]
        return sorted(moved, key=lambda r: (_NOTABLE.index(r.kind) if r.kind in _NOTABLE else 0,
                                            r.comparison.change if r.comparison else 0.0))

    def side_best(self, side: str) -> Side | None:
        """The fastest point's side at base or head (what the family can do there)."""
        sides = [getattr(r, side) for r in self.points if getattr(r, side) is not None]
        rated = [s for s in sides if s.rate is not None]
        return max(rated, key=lambda s: s.rate) if rated else (sides[0] if sides else None)

    @property
    def change_range(self) -> str:
        """The points' changes from the lowest to the highest (`-8.1% … +1.2%`)."""
        changes = sorted(r.comparison.change for r in self.points if r.comparison is not None)
        if not changes:
            return ""
        low, high = changes[0], changes[-1]
        return f"{low:+.1%}" if f"{low:+.1%}" == f"{high:+.1%}" else f"{low:+.1%} … {high:+.1%}"


def group_points(rows: list[Row]) -> list[Row | FamilySummary]:
    """`rows` in their order, each swept family's points at one shape, dtype and device (two or
    more) replaced by one `FamilySummary` where its first (most pressing) row stood; plain
    variants, and a family with one point there, stay rows."""
    members: dict[tuple, list[Row]] = {}
    for r in rows:
        family, axes = params.sweep_family(r.variant)  # each pass its own family: best of backward ≠ of forward
        if axes:
            members.setdefault((family, r.shape, r.dtype, r.device), []).append(r)
    out: list[Row | FamilySummary] = []
    placed = set()
    for r in rows:
        family, axes = params.sweep_family(r.variant)
        key = (family, r.shape, r.dtype, r.device)
        if not axes or len(members[key]) < 2:
            out.append(r)
        elif key not in placed:
            placed.add(key)
            out.append(FamilySummary(*key, tuple(members[key])))
    return out


def _point_note(r: Row) -> str:
    """One point as the family line names it: `BLOCK_M=128,STAGES=3 slower -8.1%`."""
    point = point_label(r.variant)
    if r.kind == NEWLY_FAILING and r.head:
        return f"{point} {r.head.status}"
    return f"{point} {r.kind}" + (f" {r.comparison.change:+.1%}" if r.comparison else "") + \
        (f", {r.memory_text}" if r.memory else "")


def _family_line(f: FamilySummary) -> str:
    notable = f.notable
    named = ", ".join(_point_note(r) for r in notable[:NAMED_POINTS])
    if len(notable) > NAMED_POINTS:
        named += f"; and {len(notable) - NAMED_POINTS} more"
    best = [f"best {format_rate(s)}" if s is not None and s.rate is not None else format_rate(s)
            for s in (f.side_best("base"), f.side_best("head"))]
    return _markdown_row(f.text, f.severe, [f.family, shape_label(f.shape), f.dtype, f.device.split(":")[0], *best,
                                            f.change_range, "", named])


def _markdown_row(verdict: str, bold: bool, cells: list[str]) -> str:
    """One table line, every cell escaped (`md_escape`): a status, a rate and a diagnostic all
    come from result.json, which the kernel's own code can write, and stored rows outlive the
    check that keeps a job's status to the known set (`workers.job.runner`)."""
    verdict = md_escape(verdict)
    return "| " + " | ".join([f"**{verdict}**" if bold else verdict, *map(md_escape, cells)]) + " |"


def _markdown_table(rows: list[Row]) -> list[str]:
    lines = ["| verdict | variant | shape | dtype | device | base | head | change | 95% CI | what else moved |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in group_points(rows):
        if isinstance(r, FamilySummary):
            lines.append(_family_line(r))
            continue
        change, ci = _change_cells(r.comparison)
        vendor = metric_names.vendor_of(r.device)
        others = "; ".join(f"{metric_names.flat(m.name, 0.0, vendor).label} {m.before} → {m.after}"
                           for m in r.moved[:6])
        if r.kind == NEWLY_FAILING and r.head:
            others = (f"{r.head.status}: {r.head.diagnostic[:120]}; " + others).rstrip("; ")
        if r.memory_text:
            others = f"{r.memory_text}; {others}" if others else r.memory_text
        if r.output_changed:  # reported, never a regression: there is no reference to say which is right
            others = f"{r.output_changed}; {others}" if others else r.output_changed
        if r.reason:
            others = f"{r.reason[:160]}; {others}" if others else r.reason[:160]
        if r.note:
            others = f"{r.note}; {others}" if others else r.note
        memory = f", {r.memory}" if r.memory else ""  # a memory growth is a regression, whatever the time did
        lines.append(_markdown_row(r.kind + memory, r.kind in (verdicts.SLOWER, NEWLY_FAILING) or bool(r.memory),
                                   [r.variant, shape_label(r.shape), r.dtype, r.device.split(":")[0],
                                    format_rate(r.base), format_rate(r.head), change, ci, others]))
    return lines
