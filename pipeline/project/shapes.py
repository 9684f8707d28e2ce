"""A manifest's shapes against its op's sizes: the timed `shapes`, and the `[[check]]` sets of
shapes that are only checked (check points), each set with an optional tolerance of its own.

Both are written alike (a shape-set name of flopwatch.toml, or a list of shapes: `[512, 512]`
in the op's order or `{M = 512, N = 512}` by name). A check point is run once per variant,
dtype and device, never timed, and has no series of its own (`workers.job.check_points`); a
benchmark shape is checked at every job as before. A challenge problem's `tests:` are its
check points unless the manifest writes `[[check]]` sets.
"""

from __future__ import annotations

import difflib

from workers.core.records import Shape


class ShapeError(ValueError):
    """A shape that does not fit the op or the project; `key` is the manifest key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(message)


def resolve(key: str, raw, op_name: str, dims: tuple[str, ...], shape_sets: dict, fill: dict | None = None) -> list[Shape]:
    """The shapes `raw` (a list, or a shape-set name) writes, each with exactly the op's sizes
    `dims`; `fill` gives sizes a table may leave out. `key` names the manifest key in errors."""
    where = key
    if isinstance(raw, str):
        if raw not in shape_sets:
            known = sorted(shape_sets)
            hint = difflib.get_close_matches(raw, known, n=1)
            raise ShapeError(key, f"unknown shape set {raw!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                             + f" (known: {known or 'none defined in flopwatch.toml'})")
        where, raw = f"{key} (shape set {raw!r})", shape_sets[raw]
    shapes = []
    for i, item in enumerate(raw):
        if isinstance(item, dict) and fill:
            item = {**fill, **item}
        if isinstance(item, list) and len(item) == len(dims):
            values = dict(zip(dims, item))
        elif isinstance(item, dict) and set(item) == set(dims):
            values = {d: item[d] for d in dims}
        else:
            raise ShapeError(f"{where}[{i}]", f"{item!r} is not a {op_name} shape: expected {len(dims)} sizes "
                                              f"{list(dims)}, as a list or a table")
        shapes.append(Shape(values))
    return shapes


def check_points(sets: list, op_name: str, dims: tuple[str, ...], shape_sets: dict, fill: dict | None = None,
                 default: tuple[dict, ...] = (), default_where: str = "") -> list[dict]:
    """The check points of the manifest's `[[check]]` tables (`sets`), or where it writes none,
    `default` (a challenge's tests:, named `default_where[i]`): {"dims", "rtol", "atol", "where"}
    each, in order. A shape given twice is a mistake (it would be checked twice alike)."""
    points: list[dict] = []
    seen: dict[tuple, str] = {}
    if not sets:
        return [{"dims": dict(d), "rtol": None, "atol": None, "where": f"{default_where}[{i}]"}
                for i, d in enumerate(default)]
    for s, table in enumerate(sets):
        for i, shape in enumerate(resolve(f"check[{s}].shapes", table.shapes, op_name, dims, shape_sets, fill)):
            where = f"check[{s}].shapes[{i}]"
            key = tuple(shape.dims.items())
            if key in seen:
                raise ShapeError(where, f"{shape.label} is also {seen[key]}: a check point is given once")
            seen[key] = where
            points.append({"dims": shape.dims, "rtol": table.rtol, "atol": table.atol, "where": where})
    return points

