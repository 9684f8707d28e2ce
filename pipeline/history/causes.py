"""Groups open regressions by what caused them: one entry per culprit commit, or per commit range
that is not resolved yet, with the series it slowed, worst first.

A change to a shared header or a compiler flag slows many series at once: the dashboard, the
PR comment and `detect` should say "commit X slowed these 8 series", not list 8 regressions
that all point at X. The rule:

- a regression whose bisection named a culprit belongs to that commit;
- a regression whose range holds a single commit (the last good and the first bad measurement
  are adjacent on the first-parent line) belongs to that commit too: there is nothing to
  bisect, the bad end is the culprit;
- any other regression belongs to its range (good, bad) until a bisection resolves it.
  Ranges are grouped only when equal: two series stepping in overlapping but different ranges
  may have different causes, and nothing but a bisection can tell.

`nightly` bisects ranges, not series (`bisection_plan`): one bisection per unresolved range,
measured on the series that slowed most in it, names the culprit of every series that stepped
there. Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.run.summary import shape_label
from workers.core import untrusted

BISECTED = "bisected"
ONLY_COMMIT = "only commit in the range"
UNRESOLVED = "unresolved"


@dataclass(frozen=True)
class Cause:
    """Open regressions sharing one cause. how is BISECTED or ONLY_COMMIT when `culprit` (a
    commit dict: sha, subject, author, authored_at) is known, UNRESOLVED when only the range
    good → bad is (between: first-parent commits after good up to bad, None when unknown).
    slowed holds the `dashboard.OpenRegression`s, worst slowdown first."""

    how: str
    culprit: dict | None
    good: dict
    bad: dict
    between: int | None
    slowed: tuple

    @property
    def worst_change(self) -> float:
        """The worst member's severity (`Regression.severity`: lower is worse, either metric)."""
        return self.slowed[0].regression.severity

    @property
    def bisected_on(self):
        """The regression whose bisection named the culprit (its bisect page), if any."""
        return next((o.regression for o in self.slowed if o.regression.culprit_sha and o.regression.bisect
                     and o.regression.bisect.get("evaluations")), None)


def culprit_of(regression, between: int | None) -> tuple[str | None, str]:
    """(culprit SHA, how it is known) of one regression; (None, UNRESOLVED) when only its range is."""
    if regression.culprit_sha:
        return regression.culprit_sha, BISECTED if between != 1 else ONLY_COMMIT
    if between == 1:
        return regression.bad_sha, ONLY_COMMIT
    return None, UNRESOLVED


def group(open_regressions: Sequence, commits: dict[str, dict]) -> tuple[Cause, ...]:
    """Causes of `open_regressions` (`dashboard.OpenRegression`s), the worst slowdown first;
    commits maps SHA → commit dict for the culprits' subjects and authors."""
    groups: dict[tuple, list] = {}
    for o in open_regressions:
        sha, _ = culprit_of(o.regression, o.between)
        key = ("commit", sha) if sha else ("range", o.regression.good_sha, o.regression.bad_sha)
        groups.setdefault(key, []).append(o)
    causes = []
    for key, members in groups.items():
        members.sort(key=lambda o: (o.regression.severity, o.regression.variant, o.regression.shape,
                                    o.regression.device))
        first = members[0]
        how = UNRESOLVED
        if key[0] == "commit":
            # One bisected member makes the cause bisected (and gives it a bisect page).
            hows = {culprit_of(o.regression, o.between)[1] for o in members}
            how = BISECTED if BISECTED in hows else ONLY_COMMIT
        culprit = (commits.get(key[1]) or {"sha": key[1]}) if key[0] == "commit" else None
        causes.append(Cause(how, culprit, first.good, first.bad, first.between, tuple(members)))
    causes.sort(key=lambda c: (c.worst_change, c.bad.get("sha", "")))
    return tuple(causes)


@dataclass(frozen=True)
class RangeToBisect:
    """One bisection of `nightly`: the range good → bad, measured on the series that slowed most
    in it (variant, shape), whose culprit is then recorded on every regression in `ids`;
    `metric` says what the search compares ("time", or "memory" for a peak memory step)."""

    good_sha: str
    bad_sha: str
    variant: str
    shape: str
    change: float
    ids: tuple[int, ...]
    metric: str = "time"


def bisection_plan(regressions: Sequence) -> list[RangeToBisect]:
    """The ranges to bisect for `regressions` (stored `Regression`s without a culprit), one per
    distinct (good, bad) and metric, the worst slowdown first. A series steps where its measurements
    change, so every regression with the same ends stepped in the same commits: one search
    serves them all (a memory step is searched by its memory, a slowdown by its time)."""
    ranges: dict[tuple[str, str, str], list] = {}
    for r in regressions:
        if not r.culprit_sha:
            ranges.setdefault((r.good_sha, r.bad_sha, r.metric), []).append(r)
    plan = []
    for (good, bad, metric), members in ranges.items():
        worst = min(members, key=lambda r: (r.severity, r.variant, r.shape))
        plan.append(RangeToBisect(good, bad, worst.variant, worst.shape, worst.change,
                                  tuple(sorted(r.id for r in members)), metric))
    plan.sort(key=lambda p: (-p.change if p.metric == "memory" else p.change, p.bad_sha))
    return plan


def _commit_line(cause: Cause) -> str:
    if cause.culprit:
        c = cause.culprit
        known = "bisected" if cause.how == BISECTED else "the only commit in its range"
        return (f"commit {c['sha'][:10]} {c.get('subject') or ''} ({c.get('author') or 'unknown author'}; "
                f"{known})")
    span = f", {cause.between} commits" if cause.between is not None else ""
    return f"commits {cause.good['sha'][:10]}..{cause.bad['sha'][:10]} (not bisected yet{span})"


def render_text(causes: Sequence[Cause], new: frozenset[int] = frozenset()) -> str:
    """The causes for a terminal: one line per cause, then its series indented, worst first;
    regressions whose id is in `new` are marked NEW."""
    lines = []
    for cause in causes:
        lines.append(untrusted.one_line(f"{_commit_line(cause)}: slowed {len(cause.slowed)} series"))
        for o in cause.slowed:
            r = o.regression
            mark = "NEW " if r.id in new else ""
            lines.append(untrusted.one_line(f"  {mark}{r.label} {r.variant} {shape_label(r.shape)} {r.dtype} {r.device} "
                                            f"({r.good_sha[:10]} → {r.bad_sha[:10]})"))
    return "\n".join(lines)


def render_markdown(causes: Sequence[Cause], trend_url, limit: int = 10, rows_per_cause: int = 8) -> str:
    """The causes as a markdown section (the PR comment): per cause its commit and a table of
    the series it slowed, worst first, each linked to its trend page. trend_url(series) gives
    the link, or None to show the page name only. Every string from the repository goes
    through `untrusted.markdown`."""
    if not causes:
        return ""
    md = untrusted.markdown
    n_series = sum(len(c.slowed) for c in causes)
    lines = [f"#### Open regressions on the branch: {len(causes)} cause(s), {n_series} series", ""]
    for cause in causes[:limit]:
        lines += [f"**{md(_commit_line(cause))}**", "", "| change | variant | shape | dtype | device | step | trend |",
                  "|---|---|---|---|---|---|---|"]
        for o in cause.slowed[:rows_per_cause]:
            r = o.regression
            url = trend_url(o.series) if o.series is not None else None
            link = f"[trend]({url})" if url else ""
            lines.append(f"| {r.label} | {md(r.variant)} | {md(shape_label(r.shape))} | {md(r.dtype)} | "
                         f"{md(r.device.split(':')[0])} | {r.good_sha[:10]} → {r.bad_sha[:10]} | {link} |")
        if len(cause.slowed) > rows_per_cause:
            lines.append(f"| … | {len(cause.slowed) - rows_per_cause} more series | | | | | |")
        lines.append("")
    if len(causes) > limit:
        lines.append(f"… and {len(causes) - limit} more cause(s) on the dashboard.")
    return "\n".join(lines).rstrip() + "\n"
