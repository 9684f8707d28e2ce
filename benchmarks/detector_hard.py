"""A second generator of noisy nightly series with planted steps, for `benchmarks/detector_otava.py
--generator hard`: other noise and another step mix than the project's generator
(`detector_otava.make_series` with `detector_noise.noise`), so that a detector tuned on one is
checked on the other.

Noise classes (relative run-time noise of a per-commit median):

- t2: Student's t with 2 degrees of freedom, scale 1% (infinite variance: a few nights per year
  are 10-30% off);
- skewed: 0.3% normal noise plus 1% times an exponential (mean removed): every night can only be
  slower than the floor, by a long one-sided tail;
- bursty: 0.5% normal noise; busy periods start on 4% of the nights and last one or two nights,
  each adding 3-15%, at least 3 quiet nights apart (outliers in pairs: shorter than the
  shortest planted bump, 4 nights);
- contaminated: 1% normal noise, and one night in ten drawn from 4% normal noise instead;
- gaussian-1.5%: 1.5% normal noise.

Steps: per series 0 (one in five), 1 (two in five), 2 or 3 events (two in five), each event of
one of three kinds, a third each:

- single: one step anywhere at least 3 commits from either end;
- edge: one step near an edge: 3-10 commits from the first or last commit, or within 3 commits
  of a multiple of 32 (where flopwatch's windows of 128, every 64, begin, end and hand over
  ownership; Otava's windows of 50 fall elsewhere);
- cluster: two or three steps 4-12 commits apart (a staircase, or a short bump and its revert).

Each step is 2, 3, 5 or 8% (run time × (1 + s) for a slowdown, 7 in 10, else × 1/(1 + s)); steps
of one series are at least 4 commits apart.
"""

from __future__ import annotations

import itertools

import numpy as np

CLASSES = ("t2", "skewed", "bursty", "contaminated", "gaussian-1.5%")
SIZES = (0.02, 0.03, 0.05, 0.08)
GAP = 4  # the least distance between two planted steps
END = 3  # the least distance of a step from either end


def noise(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Relative run-time deviations of n nightly medians (1.0 = the series' level)."""
    if kind == "t2":
        return 1.0 + 0.01 * rng.standard_t(2, n)
    if kind == "skewed":
        return 1.0 + rng.normal(0.0, 0.003, n) + 0.01 * (rng.exponential(1.0, n) - 1.0)
    if kind == "bursty":
        extra, quiet_until = np.zeros(n), 0
        for start in np.flatnonzero(rng.random(n) < 0.04):
            if start >= quiet_until:
                stop = start + int(rng.integers(1, 3))
                extra[start:stop] = rng.uniform(0.03, 0.15)
                quiet_until = stop + 3
        return 1.0 + rng.normal(0.0, 0.005, n) + extra
    if kind == "contaminated":
        return 1.0 + np.where(rng.random(n) < 0.1, rng.normal(0.0, 0.04, n), rng.normal(0.0, 0.01, n))
    if kind == "gaussian-1.5%":
        return 1.0 + rng.normal(0.0, 0.015, n)
    raise ValueError(kind)


def _event(n: int, rng: np.random.Generator) -> list[int]:
    kind = int(rng.integers(3))
    if kind == 0:
        return [int(rng.integers(END, n - END + 1))]
    if kind == 1:
        if rng.random() < 0.4:
            offset = int(rng.integers(END, 11))
            return [offset if rng.random() < 0.5 else n - offset]
        edge = 32 * int(rng.integers(1, (n - END) // 32 + 1))
        return [edge + int(rng.integers(-3, 4))]
    first = int(rng.integers(END, n - END + 1))
    out = [first]
    for _ in range(int(rng.integers(1, 3))):
        out.append(out[-1] + int(rng.integers(GAP, 13)))
    return out


def plant(n: int, rng: np.random.Generator) -> list[tuple[int, float, float]]:
    """(index, factor, size) of the planted steps of one series: values[index:] *= factor."""
    events = int(rng.choice([0, 1, 1, 2, 3]))
    for _ in range(1000):
        at = sorted(itertools.chain.from_iterable(_event(n, rng) for _ in range(events)))
        if all(END <= a <= n - END for a in at) and all(b - a >= GAP for a, b in itertools.pairwise(at)):
            steps = []
            for a in at:
                size = float(rng.choice(SIZES))
                steps.append((a, 1.0 + size if rng.random() < 0.7 else 1.0 / (1.0 + size), size))
            return steps
    raise RuntimeError("could not place the steps")


def make_series(seed: int, per_class: int, n: int) -> list[dict]:
    """The benchmark's series: noise class, values and planted steps (index, size)."""
    out = []
    for c, kind in enumerate(CLASSES):
        rng = np.random.default_rng([seed, 1000 + c])
        for _ in range(per_class):
            values = 1e-3 * noise(kind, n, rng)
            steps = plant(n, rng)
            for at, factor, _ in steps:
                values[at:] *= factor
            out.append({"noise": kind, "values": values, "steps": [(at, size) for at, _, size in steps]})
    return out
