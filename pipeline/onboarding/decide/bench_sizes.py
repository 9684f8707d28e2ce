"""An entry's timed sizes from where the repository benchmarks it, and from its test where it
does not, each draft saying which:

1. a sweep that calls the entry (or what it only forwards to), read from the text: a
   `triton.testing.Benchmark` (`conventions.triton_bench`), then a benchmark script whose sizes
   its text gives (`conventions.bench_script`);
2. the calls a benchmark script made when it was run under the recorder, for a script that
   computes its sizes as it runs (`Sweep`s with how = "recorded", from `bench_runs`);
3. none: the test's sizes scaled (`decide.scaling`).

Each call is mapped onto the entry's parameters (`Equivalent.params_of`: a call of
`LigerRMSNormFunction.apply` passes the entry's parameters in the Function's order); the
distinct sizes are kept in order of their working set, all of them up to `MAX_POINTS`, else
`MAX_POINTS` spread evenly over them by rank, the largest always among them; a size past
`scaling.MAX_WORKING_SET` per call is left out. The test's own size is then a check point of the
draft, not a timed one. Decisions over records."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.onboarding.conventions import bench_script, found, triton_bench
from pipeline.onboarding.conventions.bench_script import dims_at
from pipeline.onboarding.decide.scaling import MAX_WORKING_SET, itemsize, row_bytes
from pipeline.onboarding.source.pytest_file import ends_with, same_origin
from pipeline.onboarding.source.records import Arg, Equivalent, InputRow, Sweep

# Timed sizes taken from a sweep: enough to see a trend and where the launch stops mattering,
# few enough that every one is timed (a series each) and checked.
MAX_POINTS = 4
_HOW = {"triton_bench": "its triton.testing.Benchmark", "bench_script": "read from the script",
        "recorder": "recorded: the script computes its sizes as it runs"}


@dataclass(frozen=True)
class Taken:
    """Timed sizes taken from sweeps: the shapes (a built-in op's lists, or a `[reference]`
    op's size tables), their dtype where the sweep says, and where they come from in words."""

    shapes: tuple
    dtype: str
    label: str


def static_sweeps(repo, same_as: list[Equivalent]) -> list[Sweep]:
    """The sweeps read from the text that call the entry: Triton's declared ones first, then the
    benchmark scripts'."""
    words = {e.callee[0] for e in same_as}  # a file calling the entry names it (or what it forwards to)
    files = [p for p in repo.scripts if any(w in repo.text(p) for w in words)]
    triton = found(repo, Sweep, [p for p in files if triton_bench.matches(repo, p)])
    scripts = found(repo, Sweep, [p for p in files if bench_script.is_bench(p)])
    ordered = [s for s in triton if s.reader == "triton_bench"] + [s for s in scripts if s.reader == "bench_script"]
    seen: set[tuple] = set()
    out = []
    for s in ordered:  # a Triton sweep in a benchmark folder is read by both readers: once
        if (s.file, s.line, s.callee) not in seen and calls_entry(s, same_as) is not None:
            seen.add((s.file, s.line, s.callee))
            out.append(s)
    return out


def calls_entry(sweep: Sweep, same_as: list[Equivalent]) -> Equivalent | None:
    """The equivalent a sweep's call goes through (the entry, what it forwards to, a sibling
    forwarding to the same), or None where it calls something else."""
    for e in same_as:
        if not ends_with(sweep.callee, e.callee):
            continue
        if e.origin and "." in sweep.callee and len(sweep.callee.split(".")) > len(e.callee) \
                and not same_origin(sweep.callee, e.origin, len(e.callee)):
            continue
        return e
    return None


def concrete_calls(sweeps: list[Sweep], same_as: list[Equivalent]) -> list[tuple[Sweep, dict]]:
    """Each call the sweeps make of the entry at each of their points, as the entry's parameters
    → arguments with every tensor's dimensions in numbers (`(sweep, {param: Arg})`)."""
    out = []
    for s in sweeps:
        e = calls_entry(s, same_as)
        if e is None:
            continue
        for point in s.points or ({},):
            by_param = {}
            for p, a in e.params_of(s.args, s.kwargs).items():
                if a.tensor:
                    dims = dims_at(a, point)
                    if dims is None:
                        break
                    a = Arg(a.text, shape=dims, dtype=a.dtype, tensor=True)
                by_param[p] = a
            else:
                if any(a.tensor for a in by_param.values()):
                    out.append((s, by_param))
    return out


def _bytes(by_param: dict) -> int:
    total = 0
    for a in by_param.values():
        if a.tensor:
            n = 1
            for d in a.shape:
                n *= d
            total += n * itemsize(a.dtype or "fp32")
    return total


def pick(items: list, work) -> list:
    """The distinct items by `work` (ascending), all up to MAX_POINTS, else MAX_POINTS of them
    spread evenly by rank, the largest always kept; none past MAX_WORKING_SET."""
    kept = sorted((x for x in items if work(x) <= MAX_WORKING_SET), key=work)
    if len(kept) <= MAX_POINTS:
        return kept
    last = len(kept) - 1
    ranks = sorted({round(i * last / (MAX_POINTS - 1)) for i in range(MAX_POINTS)})
    return [kept[r] for r in ranks]


def label(chosen: list[Sweep]) -> str:
    """Where sizes came from: the first sweep's place and how it was read, and how many more."""
    first = chosen[0]
    places = list(dict.fromkeys(f"{s.file}:{s.line}" for s in chosen))
    more = f" and {len(places) - 1} more call(s)" if len(places) > 1 else ""
    return f"{places[0]}{more} ({_HOW.get(first.reader, first.reader)})"


def for_reference(rows: list[InputRow], test_sizes: dict, same_as: list[Equivalent],
                  sweeps: list[Sweep]) -> Taken | None:
    """A `[reference]` op's timed size tables from the sweeps' calls: each tensor input's
    dimensions named as the test's (`rows`), every name given one value by the call (two inputs
    sharing a name must agree), the names a call does not reach keeping the test's value."""
    found: dict[tuple, tuple[Sweep, str, int]] = {}
    for s, by_param in concrete_calls(sweeps, same_as):
        point = dict(test_sizes)
        given: set[str] = set()
        ok, dtype = True, ""
        for row in rows:
            if row.shape is None or row.name not in by_param:
                continue
            a = by_param[row.name]
            if not a.tensor or len(a.shape) != len(row.shape):
                ok = False
                break
            for name, value in zip(row.shape, a.shape):
                if isinstance(name, int):
                    ok = ok and name == value
                elif name in given and point[name] != value:
                    ok = False
                else:
                    point[name] = value
                    given.add(name)
            if not row.dtype:
                dtype = dtype or a.dtype
        if ok and given:
            key = tuple(sorted(point.items()))
            found.setdefault(key, (s, dtype, row_bytes(rows, point, dtype)))
    if not found:
        return None
    kept = pick(list(found), lambda k: found[k][2])
    if not kept:
        return None
    chosen = [found[k][0] for k in kept]
    dtype = next((found[k][1] for k in reversed(kept) if found[k][1]), "")
    ordered = [{n: dict(k)[n] for n in test_sizes if n in dict(k)} | dict(k) for k in kept]
    return Taken(tuple(ordered), dtype, label(chosen))
