"""Decides which commit first made one series slower, from `Measurement`s (run-time samples per
commit) returned by an `evaluate` callable.

`evaluate(sha)` measures one commit once and returns a Measurement; calling it again for the
same commit takes more samples, which are pooled. Nothing here knows about Ray or git, so the
search is tested with a fake evaluate.

Method:
1. Confirm: measure both ends and compare them with `pipeline.history.verdicts.compare_samples`; the bad
   end must be `slower` than the good end beyond the threshold (re-measured while `unsure`, up
   to `max_repeats` times), else the regression did not reproduce and the search stops.
2. Binary search over the commits strictly between the ends (first-parent order): a probe is
   measured between fresh measurements of both ends (good, probe, bad, so that a change in
   the machine's load between probes cannot pass for a change in the code) and classified: `bad` when it is slower than the good end and not faster than
   the bad end, `good` when it is faster than the bad end and not slower than the good end;
   anything else is `unsure` and the probe is measured again; after `max_repeats` measurements
   it goes to the end whose median is nearer (on a log scale), and the reason says so.
3. A commit whose build fails (or that cannot be measured) is skipped, as `git bisect skip`
   does: the next probe is the untried commit nearest the middle of the open interval. When
   skips leave no commit to try, the answer is the set of candidates.
4. Nothing changed, nothing timed: given `identity(sha)` (the series' measurement identity at
   a commit, `pipeline.run.identity`), a probe whose identity equals that of an end or of a probe
   already classified takes that verdict without being measured (the same build measures the
   same number).
With no skips and no unsure verdicts this evaluates ⌈log2 N⌉ + 2 distinct commits for N
commits after the good end (the 2 are the confirmations).

`MemoryBisection` searches a peak memory step the same way (`--metric memory`): a measurement's
one sample is the series' peak memory in bytes, which is deterministic
(`pipeline.history.memory`), so each commit is measured once, the ends are not measured again
beside each probe, and a probe is bad when its figure grew beyond the memory threshold from the
good end's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.history import verdicts
from pipeline.history.memory.threshold import DEFAULT as DEFAULT_MEMORY
from pipeline.history.memory.threshold import MemoryThreshold, grew, growth
from reports import metric_names
from reports.format import mem_bytes

GOOD, BAD, SKIP = "good", "bad", "skip"


@dataclass(frozen=True)
class Measurement:
    """One measurement of one commit: ok is False when it could not be built or run (reason
    then says why); samples are run times in seconds (lower is better)."""

    sha: str
    ok: bool
    samples: tuple[float, ...] = ()
    reason: str = ""
    extra: dict | None = None


@dataclass(frozen=True)
class Probe:
    """The verdict on one commit: GOOD, BAD or SKIP, with the measurements it took and why."""

    sha: str
    verdict: str
    measurements: int
    median_s: float | None
    reason: str


@dataclass(frozen=True)
class Outcome:
    """reproduced is False when the ends did not differ (then first_bad is None).
    first_bad is the first bad commit when it is determined; candidates holds every commit
    that may be it (one element when determined, more when skipped commits hide it).
    evaluations counts distinct commits measured; measurements counts evaluate() calls."""

    reproduced: bool
    first_bad: str | None
    last_good: str | None
    candidates: tuple[str, ...]
    probes: tuple[Probe, ...]
    evaluations: int
    measurements: int
    ends: verdicts.Comparison | None
    message: str

    @property
    def skipped(self) -> tuple[str, ...]:
        return tuple(p.sha for p in self.probes if p.verdict == SKIP)


def bound(n_commits: int) -> int:
    """The most commits a clean bisection over n_commits after the good end evaluates."""
    return math.ceil(math.log2(max(n_commits, 1))) + 2


class Bisection:
    """One search. `commits` runs from the good end (index 0) to the bad end (last), oldest
    first; `evaluate` measures a commit once; `threshold` is the smallest slowdown that counts."""

    # What the bad end must be, against the good end, for the regression to reproduce.
    worse = verdicts.SLOWER

    def __init__(self, commits: Sequence[str], evaluate: Callable[[str], Measurement], threshold: float = 0.05,
                 max_repeats: int = 3, max_evals: int | None = None,
                 identity: Callable[[str], str | None] | None = None):
        if len(commits) < 2:
            raise ValueError("need a good and a bad commit")
        self.commits = list(commits)
        self.evaluate = evaluate
        self.threshold = threshold
        self.max_repeats = max_repeats
        self.max_evals = max_evals
        self.samples: dict[str, list[float]] = {}
        self.calls = 0
        self.failures: dict[str, str] = {}
        self.identity = identity
        self.known: dict[str, tuple[str, str]] = {}  # identity -> (verdict, the commit that had it)

    def _measure(self, sha: str) -> bool:
        """Measure once more; False when the commit cannot be measured."""
        self.calls += 1
        m = self.evaluate(sha)
        if not m.ok or not m.samples:
            self.failures[sha] = m.reason or "no samples"
            return False
        self.samples.setdefault(sha, []).extend(m.samples)
        return True

    def _confirm(self) -> verdicts.Comparison | str:
        good, bad = self.commits[0], self.commits[-1]
        comparison = None
        for _ in range(self.max_repeats):
            for sha in (good, bad):
                if not self._measure(sha):
                    return f"cannot measure {'good' if sha == good else 'bad'} end {sha[:10]}: {self.failures[sha]}"
            comparison = verdicts.compare_samples(self.samples[good], self.samples[bad], self.threshold)
            if comparison.verdict != verdicts.UNSURE:
                break
        return comparison

    def _identity(self, sha: str) -> str | None:
        return self.identity(sha) if self.identity is not None else None

    def classify(self, sha: str) -> Probe:
        """The verdict of a probe: taken from an end or an earlier probe with the same
        measurement identity, else measured (`measure_probe`)."""
        mine = self._identity(sha)
        if mine and mine in self.known:
            verdict, twin = self.known[mine]
            end = {self.commits[0]: "the good end", self.commits[-1]: "the bad end"}.get(twin, twin[:10])
            return Probe(sha, verdict, 0, None, f"same build as {end}: not measured")
        probe = self.measure_probe(sha)
        if mine and probe.verdict in (GOOD, BAD):
            self.known[mine] = (probe.verdict, sha)
        return probe

    def measure_probe(self, sha: str) -> Probe:
        """Measure `sha` between fresh measurements of both ends (good, probe, bad: drift of
        the machine then reaches all three alike) and decide whether it is good or bad; the
        comparison uses only the end samples taken alongside this probe."""
        good_sha, bad_sha = self.commits[0], self.commits[-1]
        good, mine, bad = [], [], []
        for n in range(1, self.max_repeats + 1):
            before = len(self.samples.get(good_sha, []))
            if not self._measure(good_sha):
                return Probe(sha, SKIP, n, None, f"good end stopped measuring: {self.failures[good_sha]}")
            good += self.samples[good_sha][before:]
            before = len(self.samples.get(sha, []))
            if not self._measure(sha):
                return Probe(sha, SKIP, n, None, f"skipped: {self.failures[sha]}")
            mine += self.samples[sha][before:]
            before = len(self.samples.get(bad_sha, []))
            if not self._measure(bad_sha):
                return Probe(sha, SKIP, n, None, f"bad end stopped measuring: {self.failures[bad_sha]}")
            bad += self.samples[bad_sha][before:]
            vs_good = verdicts.compare_samples(good, mine, self.threshold)
            vs_bad = verdicts.compare_samples(bad, mine, self.threshold)
            median = float(np.median(mine))
            detail = (f"{vs_good.change:+.1%} vs good end ({vs_good.verdict}), "
                      f"{vs_bad.change:+.1%} vs bad end ({vs_bad.verdict})")
            if vs_good.verdict == verdicts.SLOWER and vs_bad.verdict != verdicts.FASTER:
                return Probe(sha, BAD, n, median, detail)
            if vs_bad.verdict == verdicts.FASTER and vs_good.verdict != verdicts.SLOWER:
                return Probe(sha, GOOD, n, median, detail)
        near_bad = abs(math.log(median / np.median(bad))) < abs(math.log(median / np.median(good)))
        return Probe(sha, BAD if near_bad else GOOD, self.max_repeats, median,
                     f"unsure after {self.max_repeats} measurements; median nearer the "
                     f"{'bad' if near_bad else 'good'} end ({detail})")

    def run(self) -> Outcome:
        confirmed = self._confirm()
        if isinstance(confirmed, str):
            return self._outcome(False, None, (), [], None, confirmed)
        if confirmed.verdict != self.worse:
            return self._outcome(False, None, (), [], confirmed,
                                 f"did not reproduce: bad end vs good end {confirmed.change:+.1%} "
                                 f"({confirmed.verdict}; {confirmed.reason})")
        for sha, verdict in ((self.commits[-1], BAD), (self.commits[0], GOOD)):
            ident = self._identity(sha)
            if ident:
                self.known[ident] = (verdict, sha)
        lo, hi = 0, len(self.commits) - 1
        probes: list[Probe] = []
        skipped: set[int] = set()
        while True:
            untried = [i for i in range(lo + 1, hi) if i not in skipped]
            if not untried:
                break
            if self.max_evals is not None and len(self.samples) + len(self.failures) >= self.max_evals:
                break
            middle = (lo + hi) / 2
            i = min(untried, key=lambda k: (abs(k - middle), k))
            probe = self.classify(self.commits[i])
            probes.append(probe)
            if probe.verdict == SKIP:
                skipped.add(i)
            elif probe.verdict == GOOD:
                lo = i
            else:
                hi = i
        candidates = tuple(self.commits[k] for k in range(lo + 1, hi + 1))
        if len(candidates) == 1:
            message = f"first bad commit {candidates[0][:10]}"
        elif all(k in skipped for k in range(lo + 1, hi)):
            message = f"first bad commit is one of {len(candidates)} (skipped commits hide it)"
        else:
            message = f"stopped at the evaluation limit with {len(candidates)} candidates"
        first = candidates[0] if len(candidates) == 1 else None
        return self._outcome(True, first, candidates, probes, confirmed, message, self.commits[lo])

    def _outcome(self, reproduced, first_bad, candidates, probes, ends, message, last_good=None) -> Outcome:
        evaluated = set(self.samples) | set(self.failures)
        return Outcome(reproduced, first_bad, last_good, tuple(candidates), tuple(probes), len(evaluated),
                       self.calls, ends, message)


GREW = "grew"


class MemoryBisection(Bisection):
    """The search of a peak memory step (module docstring): `evaluate(sha)` returns the series'
    peak memory as its one sample; `threshold` is the memory threshold a growth must pass."""

    worse = GREW

    def __init__(self, commits: Sequence[str], evaluate: Callable[[str], Measurement],
                 threshold: MemoryThreshold = DEFAULT_MEMORY, max_evals: int | None = None,
                 identity: Callable[[str], str | None] | None = None):
        super().__init__(commits, evaluate, threshold.share, 1, max_evals, identity)
        self.memory_threshold = threshold

    def _bytes(self, sha: str) -> float:
        return self.samples[sha][-1]

    def _confirm(self) -> verdicts.Comparison | str:
        good, bad = self.commits[0], self.commits[-1]
        for sha in (good, bad):
            if not self._measure(sha):
                return f"cannot measure {'good' if sha == good else 'bad'} end {sha[:10]}: {self.failures[sha]}"
        before, after = self._bytes(good), self._bytes(bad)
        change = growth(before, after)
        verdict = GREW if grew(before, after, self.memory_threshold) else verdicts.SAME
        ratio = after / before if before else float("inf")
        return verdicts.Comparison(1, 1, before, after, ratio, ratio, ratio, 0.0, change, change, change, verdict,
                                   f"peak memory {mem_bytes(before)} → {mem_bytes(after)}; a growth counts beyond "
                                   f"{self.memory_threshold.text}", self.memory_threshold.share, 1.0)

    def measure_probe(self, sha: str) -> Probe:
        """Measure `sha` once and set its peak memory against the ends' (measured once each)."""
        if not self._measure(sha):
            return Probe(sha, SKIP, 1, None, f"skipped: {self.failures[sha]}")
        good, bad, mine = self._bytes(self.commits[0]), self._bytes(self.commits[-1]), self._bytes(sha)
        detail = (f"peak memory {mem_bytes(mine)}: {growth(good, mine):+.1%} vs good end, "
                  f"{growth(bad, mine):+.1%} vs bad end")
        return Probe(sha, BAD if grew(good, mine, self.memory_threshold) else GOOD, 1, None, detail)


@dataclass(frozen=True)
class Culprit:
    """The first bad commit as people read it: who, what, how big, and what else moved
    across it (resource use and counters, as `pipeline.history.compare.Moved` records)."""

    sha: str
    subject: str
    author: str
    authored_at: str
    diffstat: str
    moved: tuple = ()


@dataclass(frozen=True)
class Report:
    """A finished bisection of one series: the range searched (commits oldest first, as
    (sha, subject) pairs), the search outcome and, when determined, the culprit."""

    variant: str
    shape: str
    threshold: float
    commits: tuple[tuple[str, str], ...]
    outcome: Outcome
    culprit: Culprit | None = None
    metric: str = "time"  # or "memory": a peak memory step (`MemoryBisection`)

    @property
    def within_bound(self) -> bool:
        return self.outcome.evaluations <= bound(len(self.commits) - 1)


def render_text(report: Report) -> str:
    """The bisection as plain text for the terminal and the job log."""
    o = report.outcome
    what = " (peak memory)" if report.metric == "memory" else ""
    lines = [f"bisect {report.variant} {report.shape}{what}: {o.message}",
             (f"evaluations: {o.evaluations} commit(s), {o.measurements} measurement(s); "
              f"bound ⌈log2 N⌉+2 = {bound(len(report.commits) - 1)} for N = {len(report.commits) - 1}")]
    if o.ends is not None and report.metric == "memory":
        lines.append(f"ends: bad vs good {o.ends.change:+.1%} ({o.ends.reason}; {o.ends.verdict})")
    elif o.ends is not None:
        lines.append(f"ends: bad vs good {o.ends.change:+.1%} (CI {o.ends.change_lo:+.1%}..{o.ends.change_hi:+.1%}, "
                     f"{o.ends.verdict})")
    for p in o.probes:
        lines.append(f"  {p.sha[:10]} {p.verdict:5} ({p.measurements}x) {p.reason}")
    if o.skipped:
        lines.append("skipped (could not be built or run): " + ", ".join(s[:10] for s in o.skipped))
    if len(o.candidates) > 1:
        lines.append("candidates: " + ", ".join(s[:10] for s in o.candidates))
    c = report.culprit
    if c is not None:
        lines += [f"first bad commit: {c.sha}", f"  {c.subject}", f"  {c.author}  {c.authored_at}", c.diffstat]
        lines += [f"  moved: {metric_names.flat(m.name, 0.0).label} {m.before} → {m.after}" for m in c.moved]
    return "\n".join(lines)
