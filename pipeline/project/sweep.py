"""Parameter sweeps: a manifest's `[params]` axes and `[sweep]` table into points, and a
variant into one variant record per point.

Every point is a variant of its own from here on (`workers.core.params` names it
`family[A=1,B=2]`): it is built, cached, timed, stored, compared and bisected as any other, so
a point that fails to build fails alone. What a point changes in the record:
- C/C++/CUDA/HIP sources: `-DAXIS=value` defines (a torch extension's cflags likewise);
- a raw entry naming template arguments by axis (`gemm_tiled<BM, BK>`): the values put in, and
  the build instantiates that kernel (`workers.toolkit.template_instance`);
- python and triton entries: the values as keyword arguments (`gemm(A, B, C, BLOCK_M=128)`);
- the `[triton]` table: the values the ahead-of-time build uses for the kernel's constexprs and
  for num_warps / num_stages (`params` in the table, read by `workers.triton_aot.spec`).
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import re
from pathlib import Path

from workers.core import status
from workers.core.params import (
    FORWARD,
    MODE_AXIS,
    Value,
    define_flags,
    format_value,
    mode_name,
    point_name,
    sweep_family,
    template_entry,
)
from workers.core.records import Variant

# An axis becomes a macro, a keyword argument and part of a name: an identifier.
_AXIS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# A string value becomes a define's text and part of a name (a type such as `__half`, a
# policy such as `row_major`): one token, nothing a shell or a point name would split.
_STRING_VALUE = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
# More points than this is a mistake in the axes (a sweep of that size is a tuning run).
MAX_POINTS = 256
# A point's name becomes part of file names (its trend page) and table cells.
MAX_POINT_TEXT = 160
# Python-side entries take the point as keyword arguments.
_KWARG_KINDS = ("python", "triton")


class SweepError(ValueError):
    """A `[params]` / `[sweep]` mistake: `key` is the manifest key, `str()` the complaint."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


def points_of(axes: dict[str, list[Value]], extra: list[dict], exclude: list[dict]) -> list[dict[str, Value]]:
    """The points a manifest asks for: the product of `axes` (in their order), then the `extra`
    points, less every point matching an `exclude` table. Raises `SweepError`."""
    if not axes and not extra:
        if exclude:
            raise SweepError("sweep.exclude", "there are no [params] axes to exclude points of")
        return []
    names = list(axes) or list(extra[0])
    for name in names:
        if name == MODE_AXIS:
            raise SweepError(f"params.{name}", f"{name!r} is the axis of the passes measured: list them as "
                                               "modes = [\"forward\", \"backward\", \"full\"]")
        if not _AXIS_NAME.fullmatch(name):
            raise SweepError(f"params.{name}", f"{name!r} is not an axis name: an identifier (letters, digits, _), "
                                               "as it becomes a define and a keyword argument")
    for name, values in axes.items():
        _check_values(f"params.{name}", values)
        # 1 and true both compile as -DA=1; 1 and 1.0 are one value to Python: one point each.
        texts = [t for v in values for t in {format_value(v), define_flags({name: v})[0]}]
        repeated = sorted({t for t in texts if texts.count(t) > 1})
        if repeated or len({v for v in values}) < len(values):
            raise SweepError(f"params.{name}", f"{', '.join(repeated or map(format_value, values))} give the same "
                                               "point twice")
    size = math.prod(len(v) for v in axes.values()) if axes else 0
    if size + len(extra) > MAX_POINTS:
        raise SweepError("params", f"{size + len(extra)} points; at most {MAX_POINTS} (exclude combinations, or "
                                   "split the sweep into variants)")
    points = [dict(zip(names, combo)) for combo in itertools.product(*axes.values())] if axes else []
    for i, point in enumerate(extra):
        if set(point) != set(names):
            raise SweepError(f"sweep.points[{i}]", f"sets {', '.join(sorted(point))}; a point sets every axis "
                                                   f"({', '.join(names)})")
        _check_values(f"sweep.points[{i}]", list(point.values()))
        ordered = {n: point[n] for n in names}
        if _key(ordered) not in {_key(p) for p in points}:
            points.append(ordered)
    for i, table in enumerate(exclude):
        unknown = sorted(set(table) - set(names))
        if unknown or not table:
            raise SweepError(f"sweep.exclude[{i}]", _not_axes(unknown, names) if unknown
                             else "an empty table would exclude every point")
        kept = [p for p in points if not all(format_value(p[k]) == format_value(v) for k, v in table.items())]
        if len(kept) == len(points):
            raise SweepError(f"sweep.exclude[{i}]", f"{_table_text(table)} matches no point (a value misspelt?)")
        points = kept
    if not points:
        raise SweepError("sweep.exclude", "excludes every point of [params]")
    if len(points) > MAX_POINTS:
        raise SweepError("params", f"{len(points)} points; at most {MAX_POINTS} (exclude combinations, or split "
                                   "the sweep into variants)")
    longest = max(points, key=lambda p: len(point_name("", p)))
    if len(point_name("", longest)) > MAX_POINT_TEXT:
        raise SweepError("params", f"the point {point_name('', longest)[:60]}... is named by more than "
                                   f"{MAX_POINT_TEXT} characters; shorter axis names or values")
    return points


def _not_axes(unknown: list[str], names: list[str]) -> str:
    """`'BLK' is not an axis; did you mean 'BK'? (axes: TILE, BK)`: the manifest's words, not
    Python's lists."""
    said = ", ".join(repr(u) for u in unknown) + (" is not an axis" if len(unknown) == 1 else " are not axes")
    meant = [m for u in unknown for m in difflib.get_close_matches(u, names, n=1)]
    return said + (f"; did you mean {', '.join(repr(m) for m in meant)}?" if meant else "") + f" (axes: {', '.join(names)})"


def _table_text(table: dict) -> str:
    """An exclude table as the manifest writes it: `{TILE = 256, BK = 64}`."""
    return "{" + ", ".join(f"{k} = {format_value(v)}" for k, v in table.items()) + "}"


def _check_values(key: str, values: list) -> None:
    for value in values:
        if isinstance(value, str) and not _STRING_VALUE.fullmatch(value):
            raise SweepError(key, f"{value!r} is not a single token (letters, digits, _ . + -, at most 64): a value "
                                  "becomes a define's text and part of the point's name")
        if isinstance(value, float) and not math.isfinite(value):
            raise SweepError(key, f"{value} is not a value a define can carry")


def _key(point: dict) -> tuple:
    return tuple((k, format_value(v)) for k, v in point.items())


def unused_axes(axes: list[str], texts: list[str]) -> list[str]:
    """The axes no source mentions as a word: a misspelt axis would otherwise sweep nothing
    (every point the same binary, differing only by noise)."""
    words: set[str] = set()
    for text in texts:
        words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    return [a for a in axes if a not in words]


def source_texts(repo_root: Path, folder: str, extra_files: tuple[str, ...]) -> list[str]:
    """The text of every file a variant ships (its folder but its manifest, and the files it
    names outside the folder): where a point's values are read."""
    paths = [p for p in sorted((repo_root / folder).rglob("*")) if p.is_file() and p.name != "variant.toml"]
    paths += [repo_root / f for f in extra_files if (repo_root / f).is_file()]
    out = []
    for path in paths:
        try:
            if path.stat().st_size <= 4 << 20:
                out.append(path.read_text(errors="replace"))
        except OSError:
            continue
    return out


def expand(variant: Variant) -> list[Variant]:
    """One variant record per point and pass (module docstring): the `[params]` points, each in
    every mode of `modes` (a mode other than forward is the last axis of the name,
    `workers.core.params.mode_name`); a variant without axes or modes is returned alone."""
    modes = variant.modes or (FORWARD,)
    if not variant.points and modes == (FORWARD,):
        return [variant]
    points = [_at_point(variant, point) for point in variant.points] or [variant]
    return [in_mode(p, mode) for p in points for mode in modes]


def in_mode(variant: Variant, mode: str) -> Variant:
    """`variant` measuring pass `mode`: its name carries the mode (forward: unchanged), and
    nothing else changes (the same build serves every pass)."""
    return dataclasses.replace(variant, name=mode_name(variant.name, mode), mode=mode, points=())


def template_axes(entry: str) -> set[str]:
    """The words inside a raw entry's template arguments (`gemm_tiled<BM, BK>` → BM, BK)."""
    _, sep, rest = entry.partition("<")
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", rest)) if sep else set()


def _at_point(v: Variant, point: dict[str, Value]) -> Variant:
    flags = v.flags
    extensions = v.extensions
    # An axis the raw entry takes as a template argument is not also a macro: `-DBM=64` would
    # turn the template's own parameter list into `template <int 64>`.
    as_template = template_axes(v.binding.entry) if v.binding.kind == "raw" else set()
    if v.backend in ("cpp", "cuda", "hip"):
        flags = (*v.flags, *define_flags({k: x for k, x in point.items() if k not in as_template}))
    elif v.backend == "torch":
        defines = define_flags(point)
        extensions = tuple({**s, "extra_cflags": [*s.get("extra_cflags", ()), *defines],
                            "extra_cuda_cflags": [*s.get("extra_cuda_cflags", ()), *defines]} for s in v.extensions)
    binding = v.binding
    if binding.kind in _KWARG_KINDS:
        binding = dataclasses.replace(binding, kwargs={**binding.kwargs, **point})
    elif binding.kind == "raw":
        binding = dataclasses.replace(binding, entry=template_entry(binding.entry, point))
    triton = {**v.triton, "params": dict(point)} if v.triton else v.triton
    return dataclasses.replace(v, name=point_name(v.name, point), flags=flags, extensions=extensions,
                               binding=binding, triton=triton, params=dict(point), points=())


def best_points(rows: list[dict]) -> dict[str, str]:
    """{family: its best point's name} from stored results (the newest per series): the point
    nearest the fastest point at every (shape, dtype, device) the family was measured at, by
    the mean of best time / its time (a series a point has no good result at counts 0, so a
    point that fails at one shape does not win on the others). Families with no measured
    point are absent."""
    times: dict[str, dict[str, dict[tuple, float]]] = {}
    for r in rows:
        family, params = sweep_family(r["variant"])  # a pass is not a point: best per mode
        if not params or not status.measured(r.get("status")) or not r.get("median_s"):
            continue
        key = (r["shape"], r["dtype"], r["device"])
        times.setdefault(family, {}).setdefault(r["variant"], {})[key] = float(r["median_s"])
    best: dict[str, str] = {}
    for family, by_point in times.items():
        keys = {k for per in by_point.values() for k in per}
        fastest = {k: min(per[k] for per in by_point.values() if k in per) for k in keys}

        def score(point: str) -> float:
            per = by_point[point]
            return sum(fastest[k] / per[k] for k in keys if k in per) / len(keys)

        best[family] = max(sorted(by_point), key=score)
    return best
